package respapi

import "testing"

func TestMultiExec(t *testing.T) {
	c := startServer(t, nil).dial(t)
	wantReply(t, c.do("MULTI"), "+OK")
	wantReply(t, c.do("SW.INCR", "k", "1m"), "+QUEUED")
	wantReply(t, c.do("sw.incr", "k", "1m", "BY", "2"), "+QUEUED")
	wantReply(t, c.do("PING"), "+QUEUED")
	wantReply(t, c.do("SW.COUNT", "k", "1m"), "+QUEUED")
	wantReply(t, c.do("SW.INCR", "k", "1m", "BY", "x"), "+QUEUED") // fails when run, as in Redis
	wantReply(t, c.do("EXEC"), "*[:1 :3 +PONG :3 -ERR invalid n: BY 'x' is not an integer or out of range]")
	wantReply(t, c.do("SW.COUNT", "k", "1m"), ":3")

	wantReply(t, c.do("MULTI"), "+OK")
	wantReply(t, c.do("SW.INCR", "k", "1m"), "+QUEUED")
	wantReply(t, c.do("DISCARD"), "+OK")
	wantReply(t, c.do("SW.COUNT", "k", "1m"), ":3")

	// A command that cannot be queued aborts the transaction; nothing in it runs.
	wantReply(t, c.do("MULTI"), "+OK")
	wantReply(t, c.do("SW.INCR", "k", "1m"), "+QUEUED")
	wantReply(t, c.do("NOPE"), "-ERR unknown command 'NOPE', with args beginning with: ")
	wantReply(t, c.do("SW.INCR"), "-ERR wrong number of arguments for 'sw.incr' command")
	wantReply(t, c.do("EXEC"), "-EXECABORT Transaction discarded because of previous errors.")
	wantReply(t, c.do("SW.COUNT", "k", "1m"), ":3")

	wantReply(t, c.do("EXEC"), "-ERR EXEC without MULTI")
	wantReply(t, c.do("DISCARD"), "-ERR DISCARD without MULTI")
	wantReply(t, c.do("WATCH", "k"), "-"+replyText(errWatch))
	wantReply(t, c.do("UNWATCH"), "+OK")
	wantReply(t, c.do("MULTI"), "+OK")
	wantReply(t, c.do("MULTI"), "-ERR MULTI calls can not be nested")
	wantReply(t, c.do("WATCH", "k"), "-ERR WATCH inside MULTI is not allowed")
	wantReply(t, c.do("EXEC"), "*[]")
}

// A transaction sent as one pipeline (as redis-py's pipeline() and go-redis's
// TxPipeline send it) gets every reply in order, and its ops reach the Decider in one call.
func TestMultiExecPipelined(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	c.write(encode("MULTI") + encode("SW.INCR", "a", "1m") + encode("SW.INCR", "b", "1m") + encode("SW.ALLOW", "a", "1m", "1") + encode("EXEC"))
	for _, want := range []string{"+OK", "+QUEUED", "+QUEUED", "+QUEUED"} {
		wantReply(t, c.reply(), want)
	}
	wantReply(t, c.reply(), "*[:1 :1 *[:0 :1 :0 :60000]]")
	if got := ts.decider.calls.Load(); got != 1 {
		t.Fatalf("the transaction's ops took %d Do calls; want 1", got)
	}
}
