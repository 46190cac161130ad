package respapi

import (
	"errors"
	"slices"

	"github.com/tidwall/redcon"

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
}

// pending is the reply a command of the batch is owed: the result of ops[op], or err.
type pending struct {
	cmd *command // nil for an unknown command
	op  int
	err error
}

// serveCommand is redcon's handler. For an SW.* command it also takes every command
// already read behind it (the rest of the pipeline), so their ops reach the Doer in
// one Do call. redcon flushes the replies when this returns.
func (s *Server) serveCommand(conn redcon.Conn, cmd redcon.Command) {
	c := conn.Context().(*client)
	cmds := append(c.pipeline[:0], cmd)
	if first := lookup(cmd.Args[0]); first != nil && first.kind != 0 {
		cmds = append(cmds, conn.ReadPipeline()...)
	}
	for _, cmd := range cmds {
		s.execute(c, cmd.Args)
		if c.quit {
			break
		}
	}
	s.decide(c)
	clear(cmds) // let go of the arguments until the next pipeline
	c.pipeline = cmds[:0]
	if c.quit {
		conn.ReadPipeline() // drop what came after QUIT, or redcon would hand it on
		conn.Close()        // flushes the replies first
	}
}

// execute runs one command, or adds it to the batch if it is an op or an error.
func (s *Server) execute(c *client, args [][]byte) {
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
		s.decide(c) // the replies owed so far come before QUEUED
		s.queue(c, cmd, args)
		return
	case cmd.kind != 0:
		if err = s.moved(c, args[1]); err != nil {
			break
		}
		var op counter.Op
		if op, err = parseOp(cmd.kind, args, s.cfg.Limits); err == nil {
			c.batch.add(cmd, op)
			return
		}
	}
	if err != nil {
		if c.multi != nil {
			c.multi.dirty = true // as Redis: a command that cannot be queued aborts EXEC
		}
		c.batch.replies = append(c.batch.replies, pending{cmd: cmd, op: -1, err: err})
		return
	}
	// A command that runs on its own ends the batch: the batch's replies come first,
	// and AUTH must not change the state the batch's commands were checked in.
	s.decide(c)
	err = cmd.run(s, c, args)
	if err != nil {
		c.conn.WriteError(replyText(err))
	}
	s.metrics.count(cmd, err)
}

func (b *batch) add(cmd *command, op counter.Op) {
	b.replies = append(b.replies, pending{cmd: cmd, op: len(b.ops)})
	b.ops = append(b.ops, op)
}

// decide sends the queued ops to the Doer in one call and writes every queued reply.
func (s *Server) decide(c *client) {
	b := &c.batch
	if len(b.replies) == 0 {
		return
	}
	if len(b.ops) > 0 {
		b.results = slices.Grow(b.results[:0], len(b.ops))[:len(b.ops)]
		clear(b.results)
		s.cfg.Doer.Do(s.ctx, b.ops, b.results)
	}
	for _, p := range b.replies {
		err := p.err
		if err == nil {
			res := &b.results[p.op]
			if err = res.Err; err == nil {
				writeResult(c.conn, p.cmd.kind, res)
			}
		}
		if err != nil {
			if !counter.IsBadInput(err) {
				// Debug: when an owner is down every op fails; the metrics count them.
				s.log.Debug("resp operation failed", "remote", c.conn.RemoteAddr(), "err", err)
			}
			c.conn.WriteError(s.errorReply(c, err))
		}
		s.metrics.count(p.cmd, err)
	}
	clear(b.ops) // let go of the keys and errors
	clear(b.replies)
	b.ops, b.replies = b.ops[:0], b.replies[:0]
}

// writeResult writes the reply to a decided op.
func writeResult(w redcon.Conn, kind counter.Kind, res *counter.Result) {
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
