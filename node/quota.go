package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leapcount/leapcount/cluster"
	"github.com/leapcount/leapcount/hashslot"
	"github.com/leapcount/leapcount/internal/peerrpc"
	"github.com/leapcount/leapcount/rlqs/fairshare"
)

// quotaShareTimeout bounds a fair share asked of a bucket's owner: a report waits for
// it, and the share computed here alone is the fallback.
const quotaShareTimeout = 500 * time.Millisecond

// errNoQuotaShare: the bucket's owner cannot be asked for a share.
var errNoQuotaShare = errors.New("the bucket's owner cannot be asked for a share")

// quotaSharer is the RLQS front end's rlqs.Sharer: a bucket's fair shares are computed
// on the owner of its ledger (this node's quotaDemands when it is this one), where
// every stream's demand for it meets, wherever the streams are.
type quotaSharer struct{ n *Node }

func (q quotaSharer) Share(ctx context.Context, req fairshare.Request) (float64, error) {
	n := q.n
	rg := n.router.Ring()
	if rg == nil {
		return 0, fmt.Errorf("%w: this node has not joined", errNoQuotaShare)
	}
	m, ok := rg.SlotOwner(hashslot.Of(req.Bucket))
	if !ok {
		return 0, fmt.Errorf("%w: no owner", errNoQuotaShare)
	}
	if m.Name == n.cfg.Name {
		return n.quotaDemands.Share(req), nil
	}
	if !q.canAsk(m.Name) {
		return 0, fmt.Errorf("%w: %s runs a release without it", errNoQuotaShare, m.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, quotaShareTimeout)
	defer cancel()
	return peerrpc.QuotaShares{C: n.rpcClient}.Share(ctx, m.RPCAddr, req)
}

// canAsk reports whether member name advertises featureQuotaShare: a release before it
// drops the connection that carries a message kind it does not know.
func (q quotaSharer) canAsk(name string) bool {
	for _, m := range q.n.cluster.Members() {
		if m.Name == name {
			return m.Features&featureQuotaShare != 0 && (m.State == cluster.StateAlive || m.State == cluster.StateLeaving)
		}
	}
	return false
}
