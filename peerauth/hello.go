package peerauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
)

// After TLS (if any) each end introduces itself, the dialer first:
//
//	magic "LCPEER" | u8 '0' + cluster protocol version | u8 kind (1 hello, 2 refusal) |
//	u8 length | text | u8 length | proof
//
// (so that an introduction of version 1 begins "LCPEER1"). A hello's text is the
// cluster name and its proof the key proof (empty without keys); a refusal's text is
// why, and it has no proof. The acceptor answers a hello with its own or with a
// refusal. Every version keeps the magic and the version where they are, so that nodes
// of two versions tell each other so rather than misread each other: an end reads
// nothing past the version of a peer of another (VersionError).
const (
	magic       = "LCPEER"
	versionBase = '0' // the version byte is versionBase + ProtocolVersion
	kindHello   = 1
	kindRefusal = 2
	maxName     = 255

	ekmLabel    = "EXPORTER-leapcount-peer"
	proofLength = sha256.Size
)

// introduce exchanges hellos on c and checks the peer's.
func (a *Auth) introduce(c net.Conn, dialer bool) error {
	if dialer {
		if err := a.sendHello(c, "dialer"); err != nil {
			return err
		}
		kind, text, proof, err := a.readIntro(c)
		if err != nil {
			return err
		}
		if kind == kindRefusal {
			return fmt.Errorf("%w: %s refused us: %s", ErrRefused, c.RemoteAddr(), text)
		}
		if why := a.check(c, text, proof, "acceptor"); why != "" {
			return fmt.Errorf("%w: %s: %s", ErrRefused, c.RemoteAddr(), why)
		}
		return nil
	}
	kind, text, proof, err := a.readIntro(c)
	if ve := (*VersionError)(nil); errors.As(err, &ve) {
		c.Write(a.intro(kindRefusal, ve.why(), nil)) // best effort: the peer learns why
	}
	if err != nil {
		return err
	}
	why := "expected a hello"
	if kind == kindHello {
		why = a.check(c, text, proof, "dialer")
	}
	if why != "" {
		c.Write(a.intro(kindRefusal, why, nil)) // best effort: the peer learns why
		return fmt.Errorf("%w: %s: %s", ErrRefused, c.RemoteAddr(), why)
	}
	return a.sendHello(c, "acceptor")
}

func (a *Auth) sendHello(c net.Conn, role string) error {
	var proof []byte
	if len(a.cfg.Keys) > 0 {
		var err error
		if proof, err = prove(c, a.cfg.Keys[0], a.cfg.Cluster, role); err != nil {
			return err
		}
	}
	_, err := c.Write(a.intro(kindHello, a.cfg.Cluster, proof))
	return err
}

// check returns why the peer's hello is refused, or "".
func (a *Auth) check(c net.Conn, cluster string, proof []byte, role string) string {
	if cluster != a.cfg.Cluster {
		return fmt.Sprintf("cluster name %q, want %q (--cluster-name)", cluster, a.cfg.Cluster)
	}
	switch {
	case len(a.cfg.Keys) == 0 && len(proof) == 0:
		return ""
	case len(a.cfg.Keys) == 0:
		return "the peer has a cluster key (--gossip-key) and this node none"
	case len(proof) == 0:
		return "the peer has no cluster key (--gossip-key)"
	}
	for _, k := range a.cfg.Keys {
		want, err := prove(c, k, a.cfg.Cluster, role)
		if err == nil && hmac.Equal(proof, want) {
			return ""
		}
	}
	return "wrong cluster key (--gossip-key)"
}

// prove is role's proof of holding key on c: an HMAC of the session's exported keying
// material, which only the two ends of this TLS session know, so a proof is worth
// nothing on any other connection.
func prove(c net.Conn, key []byte, cluster, role string) ([]byte, error) {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil, fmt.Errorf("a cluster key needs TLS")
	}
	st := tc.ConnectionState()
	ekm, err := st.ExportKeyingMaterial(ekmLabel, []byte(cluster), 32)
	if err != nil {
		return nil, err
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(role))
	m.Write(ekm)
	return m.Sum(nil), nil
}

func (a *Auth) intro(kind byte, text string, proof []byte) []byte {
	text = text[:min(len(text), maxName)]
	b := make([]byte, 0, len(magic)+4+len(text)+len(proof))
	b = append(b, magic...)
	b = append(b, versionBase+a.version, kind, byte(len(text)))
	b = append(b, text...)
	b = append(b, byte(len(proof)))
	return append(b, proof...)
}

// readIntro reads one introduction: at most a few hundred bytes, whatever is sent. Of
// a peer of another cluster protocol version it reads nothing past the version, and
// returns a VersionError.
func (a *Auth) readIntro(c net.Conn) (kind byte, text string, proof []byte, err error) {
	var head [len(magic) + 3]byte
	if _, err = io.ReadFull(c, head[:]); err != nil {
		return 0, "", nil, err
	}
	v := head[len(magic)]
	if string(head[:len(magic)]) != magic || v < versionBase {
		return 0, "", nil, fmt.Errorf("%w: not a leapcount peer", ErrRefused)
	}
	if v -= versionBase; v != a.version {
		return 0, "", nil, &VersionError{Peer: c.RemoteAddr().String(), Theirs: v, Ours: a.version}
	}
	kind = head[len(magic)+1]
	if kind != kindHello && kind != kindRefusal {
		return 0, "", nil, fmt.Errorf("%w: introduction of kind %d", ErrRefused, kind)
	}
	buf := make([]byte, int(head[len(magic)+2])+1)
	if _, err = io.ReadFull(c, buf); err != nil {
		return 0, "", nil, err
	}
	text = string(buf[:len(buf)-1])
	if n := int(buf[len(buf)-1]); n > 0 {
		if n != proofLength {
			return 0, "", nil, fmt.Errorf("%w: proof of %d bytes", ErrRefused, n)
		}
		proof = make([]byte, n)
		if _, err = io.ReadFull(c, proof); err != nil {
			return 0, "", nil, err
		}
	}
	return kind, text, proof, nil
}
