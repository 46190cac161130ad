package respapi

// A transaction, as MULTI / EXEC / DISCARD make one: commands are queued (answered
// +QUEUED) and run when EXEC comes, their replies in one array. The SW.* ops among
// them are decided in one Do call, in order, each atomic on its owner; nothing else
// runs between them on this connection, but other clients' ops on the same counters
// may. WATCH is refused: there is no optimistic locking to offer, since no op reads
// a value to write another.
type transaction struct {
	queued [][][]byte // each queued command's arguments (copies: the input is reused)
	ops    int        // how many of them are SW.* ops
	dirty  bool       // a command failed to queue: EXEC aborts
	slot   int        // the first key's slot, on a cluster connection (-1: none yet)
}

var (
	errNestedMulti    = errorf("ERR", "MULTI calls can not be nested")
	errExecNoMulti    = errorf("ERR", "EXEC without MULTI")
	errDiscardNoMulti = errorf("ERR", "DISCARD without MULTI")
	errExecAbort      = errorf("EXECABORT", "Transaction discarded because of previous errors.")
	errWatch          = errorf("ERR", "WATCH is not supported: each op is atomic on its counter's owner, and no op reads a value to write another, so there is nothing to watch")
	errWatchInMulti   = errorf("ERR", "WATCH inside MULTI is not allowed")
	errCrossSlot      = errorf("CROSSSLOT", "Keys in request don't hash to the same slot")
)

func (s *Server) multiCmd(c *client, _ [][]byte) error {
	if c.multi != nil {
		return errNestedMulti
	}
	c.multi = &transaction{slot: -1}
	c.out.WriteString("OK")
	return nil
}

func (s *Server) discard(c *client, _ [][]byte) error {
	if c.multi == nil {
		return errDiscardNoMulti
	}
	c.multi = nil
	c.out.WriteString("OK")
	return nil
}

func (s *Server) watch(c *client, _ [][]byte) error {
	if c.multi != nil {
		return errWatchInMulti
	}
	return errWatch
}

func (s *Server) unwatch(c *client, _ [][]byte) error {
	c.out.WriteString("OK")
	return nil
}

// exec runs the queued commands, their replies in one array.
func (s *Server) exec(c *client, _ [][]byte) error {
	t := c.multi
	if t == nil {
		return errExecNoMulti
	}
	c.multi = nil
	if t.dirty {
		return errExecAbort
	}
	c.out.WriteArray(len(t.queued))
	for _, args := range t.queued {
		s.execute(c, args)
	}
	s.decide(c)
	return nil
}

// queue adds a command to c's transaction, or answers why it cannot be, which makes
// EXEC abort (as Redis does for errors found before EXEC).
func (s *Server) queue(c *client, cmd *command, args [][]byte) {
	t := c.multi
	err := s.queueable(c, cmd, args)
	if err != nil {
		t.dirty = true
		c.out.WriteError(replyText(err))
		s.metrics.count(cmd, err)
		return
	}
	t.queued = append(t.queued, cloneArgs(args))
	if cmd.kind != 0 {
		t.ops++
	}
	c.out.WriteString("QUEUED")
}

func (s *Server) queueable(c *client, cmd *command, args [][]byte) error {
	if cmd.kind == 0 || !c.redirect {
		return nil
	}
	if err := s.moved(c, args[1]); err != nil {
		return err
	}
	t := c.multi
	slot, _, _ := s.cfg.Cluster.Redirect(args[1])
	if t.slot >= 0 && int(slot) != t.slot {
		return errCrossSlot
	}
	t.slot = int(slot)
	return nil
}

// inTransaction reports whether cmd, arriving between MULTI and EXEC, is queued
// rather than run now: all but the commands that end or guard the transaction.
func inTransaction(c *client, cmd *command) bool {
	if c.multi == nil {
		return false
	}
	switch cmd.name {
	case "exec", "discard", "multi", "watch", "quit", "reset":
		return false
	}
	return true
}

// cloneArgs copies args into one new array.
func cloneArgs(args [][]byte) [][]byte {
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		out[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	return out
}
