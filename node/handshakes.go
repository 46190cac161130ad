package node

import (
	"context"
	"crypto/tls"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/leapcount/leapcount/internal/certfiles"
)

// handshakePacer spaces out the TLS handshakes of the client ports (--tls-handshake-rate):
// a flood of new connections, each with a full handshake, would otherwise spend the
// node's CPU on signatures that --max-clients does not bound, since each connection
// closes before the next opens.
type handshakePacer struct {
	lim     *rate.Limiter
	waited  atomic.Int64 // handshakes that waited for their turn
	refused atomic.Int64 // handshakes whose turn did not come in time
}

func newHandshakePacer(perSecond float64) *handshakePacer {
	return &handshakePacer{lim: rate.NewLimiter(rate.Limit(perSecond), max(1, int(perSecond)))}
}

// Wait takes a turn now if one is free, else waits for it within ctx.
func (p *handshakePacer) Wait(ctx context.Context) error {
	if p.lim.Allow() {
		return nil
	}
	p.waited.Add(1)
	if err := p.lim.Wait(ctx); err != nil {
		p.refused.Add(1)
		return err
	}
	return nil
}

// pacer is the client ports' handshake pacer, or nil without a bound.
func (n *Node) pacer() certfiles.Pacer {
	if n.handshakes == nil {
		return nil
	}
	return n.handshakes
}

// tlsConfig is the TLS configuration of a client port offering nextProtos.
func (n *Node) tlsConfig(nextProtos []string) *tls.Config {
	return n.clientTLS.ServerConfig(nextProtos, n.pacer(), maxHandshakeWait(n.cfg.TLSHandshakeTimeout))
}

// maxHandshakeWait is how long a handshake may wait its turn: half of its time. A turn
// that came later would leave the handshake too little to finish, and the turn, with
// the costly step it admits, would be spent on a connection that then times out.
func maxHandshakeWait(handshakeTimeout time.Duration) time.Duration {
	return handshakeTimeout / 2
}
