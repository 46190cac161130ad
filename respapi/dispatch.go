package respapi

import (
	"errors"
	"slices"
	"time"

	"github.com/leapcount/leapcount/counter"
)

// batch holds the replies owed to the commands of a pipeline since the last command
// that ran on its own: SW.* ops waiting to be decided together in one Do call, and
// errors. Its slices are kept between pipelines, so a busy connection does not
// allocate them again.
type batch struct {
	ops     []counter.Op
	results []counter.Result
	replies []pending
	started time.Time // when its first op was queued (leapcount_resp_batch_duration_seconds)
	// call hands ops and results to the Decider from an event loop; its Done, bound
	// once per connection (loopConn.open), brings a batch decided later back to the loop.
	call counter.Batch
}

// slowBatch is how long a batch may take before it is logged.
const slowBatch = time.Second

// pending is the reply a command of the batch is owed: the result of ops[op], or err.
type pending struct {
	cmd *command // nil for an unknown command
	op  int
	err error
}

// execute runs one command, or adds it to the batch if it is an op or an error. It
// reports false, having done nothing, when the command runs on its own and so must
// wait for the batch before it, which cannot be decided without waiting here; or when
// the command itself may wait (EXEC of ops) and c may not.
func (s *Server) execute(c *client, args [][]byte) bool {
	cmd := lookup(args[0])
	var err error
	switch {
	case cmd == nil:
		err = unknownCommand(args)
	case !cmd.arityOK(len(args)):
		err = wrongArity(cmd.name)
	case !c.authed && !cmd.noAuth:
		err = errNoAuth
	case inTransaction(c, cmd):
		if !s.decide(c) { // the replies owed so far come before QUEUED
			return false
		}
		s.queue(c, cmd, args)
		return true
	case cmd.kind != 0:
		if err = s.moved(c, args[1]); err != nil {
			break
		}
		var op counter.Op
		if op, err = parseOp(cmd.kind, args, s.cfg.Limits); err == nil { // checked: the layers below take it as given
			c.batch.add(cmd, op)
			return true
		}
	}
	if err != nil {
		if c.multi != nil {
			c.multi.dirty = true // as Redis: a command that cannot be queued aborts EXEC
		}
		c.batch.replies = append(c.batch.replies, pending{cmd: cmd, op: -1, err: err})
		return true
	}
	// A command that runs on its own ends the batch: the batch's replies come first,
	// and AUTH must not change the state the batch's commands were checked in.
	if !s.decide(c) || !c.mayWait && cmd.name == "exec" && c.multi != nil && c.multi.ops > 0 {
		return false
	}
	err = cmd.run(s, c, args)
	if err != nil {
		c.out.WriteError(replyText(err))
	}
	s.metrics.count(cmd, err)
	return true
}

func (b *batch) add(cmd *command, op counter.Op) {
	if len(b.ops) == 0 {
		b.started = time.Now()
	}
	b.replies = append(b.replies, pending{cmd: cmd, op: len(b.ops)})
	b.ops = append(b.ops, op)
}

// decide sends the queued ops to the Decider in one call and writes every queued
// reply. Where c may not wait (on an event loop) and the ops are not decided at once,
// decide reports false: the session is parked until they are (loopConn.startBatch).
func (s *Server) decide(c *client) bool {
	b := &c.batch
	if len(b.replies) == 0 {
		return true
	}
	if len(b.ops) > 0 {
		b.prepare()
		switch {
		case c.mayWait:
			counter.Do(s.ctx, s.cfg.Decider, b.ops, b.results)
		case !c.loop.startBatch():
			return false
		}
	}
	s.answer(c)
	return true
}

// prepare sizes and clears the results of the batch's ops, to be decided.
func (b *batch) prepare() {
	b.results = slices.Grow(b.results[:0], len(b.ops))[:len(b.ops)]
	clear(b.results)
}

// undecided reports whether the batch holds ops that wait to be decided.
func (b *batch) undecided() bool { return len(b.ops) > 0 }

// answer writes the reply of every command of the batch, whose ops are decided, and
// empties it.
func (s *Server) answer(c *client) {
	b := &c.batch
	if len(b.ops) > 0 {
		// One observation a batch: its commands were read together and are answered
		// in one write, so each one's latency is the batch's.
		took := time.Since(b.started)
		s.metrics.batchTook.Observe(took.Seconds())
		if took > slowBatch {
			s.log.Warn("slow request", "took", took, "ops", len(b.ops), "first_key", b.ops[0].Key, "first_err", b.results[0].Err, "remote", c.remote)
		}
	}
	for _, p := range b.replies {
		err := p.err
		if err == nil {
			res := &b.results[p.op]
			if err = res.Err; err == nil {
				writeResult(&c.out, p.cmd.kind, res)
			}
		}
		if err != nil {
			if !counter.IsBadInput(err) {
				// Debug: when an owner is down every op fails; the metrics count them.
				s.log.Debug("resp operation failed", "remote", c.remote, "err", err)
			}
			c.out.WriteError(s.errorReply(c, err))
		}
		s.metrics.count(p.cmd, err)
	}
	clear(b.ops) // let go of the keys and errors
	clear(b.replies)
	b.ops, b.replies = b.ops[:0], b.replies[:0]
}

// writeResult writes the reply to a decided op. An allow answered by the fail policy
// keeps the form of a decision, its count and remaining -1 (counter.Result.Undecided):
// clients expect 4 integers.
func writeResult(w *replies, kind counter.Kind, res *counter.Result) {
	switch kind {
	case counter.Allow:
		w.WriteArray(4)
		w.WriteInt(boolInt(res.Allowed))
		w.WriteInt64(res.Count)
		w.WriteInt64(res.Remaining)
		w.WriteInt64(res.RetryAfterMs)
	case counter.Reset:
		w.WriteInt(boolInt(res.Existed))
	default:
		w.WriteInt64(res.Count)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// errorReply is the error reply for err. A cluster client is told to try again when
// the node is stopping: it takes no op now, and will redirect the keys it owns once it
// has handed them on (Redis Cluster clients retry TRYAGAIN, and follow -MOVED).
func (s *Server) errorReply(c *client, err error) string {
	if c.redirect && errors.Is(err, counter.ErrShuttingDown) {
		return "TRYAGAIN " + err.Error()
	}
	return replyText(err)
}
