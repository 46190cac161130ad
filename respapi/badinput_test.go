package respapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/leapcount/leapcount/counter"
)

func TestBadCommandsAnswerErrorsAndKeepTheConnection(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	long := strings.Repeat("k", counter.DefaultMaxKeyBytes+1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SW.INCR"}, "-ERR wrong number of arguments for 'sw.incr' command"},
		{[]string{"sw.incr", "k"}, "-ERR wrong number of arguments for 'sw.incr' command"},
		{[]string{"SW.COUNT", "k"}, "-ERR wrong number of arguments for 'sw.count' command"},
		{[]string{"SW.ALLOW", "k", "1m"}, "-ERR wrong number of arguments for 'sw.allow' command"},
		{[]string{"SW.RESET"}, "-ERR wrong number of arguments for 'sw.reset' command"},
		{[]string{"SW.INCR", "", "1m"}, "-ERR key is empty"},
		{[]string{"SW.INCR", long, "1m"}, "-ERR key is too long: 257 bytes, at most 256"},
		{[]string{"SW.INCR", "k", "1x"}, `-ERR invalid window "1x": want a duration like 60s or 500ms, or whole milliseconds`},
		{[]string{"SW.INCR", "k", "0"}, `-ERR invalid window "0": must be from 1ms to 31 days`},
		{[]string{"SW.INCR", "k", "-1s"}, `-ERR invalid window "-1s": must be from 1ms to 31 days`},
		{[]string{"SW.INCR", "k", "745h"}, `-ERR invalid window "745h": must be from 1ms to 31 days`},
		{[]string{"SW.INCR", "k", "1.5ms"}, `-ERR invalid window "1.5ms": not a whole number of milliseconds`},
		{[]string{"SW.INCR", "k", "10s", "BUCKETS", "3"}, "-ERR invalid buckets: window 10000ms does not divide evenly into 3 buckets"},
		{[]string{"SW.INCR", "k", "10s", "BUCKETS", "0"}, "-ERR invalid buckets: must be from 1 to 3600, got 0"},
		{[]string{"SW.INCR", "k", "1h", "BUCKETS", "3601"}, "-ERR invalid buckets: must be from 1 to 3600, got 3601"},
		{[]string{"SW.COUNT", "k", "1h", "BUCKETS", "x"}, "-ERR invalid buckets: BUCKETS 'x' is not an integer or out of range"},
		{[]string{"SW.INCR", "k", "1m", "BY", "0"}, "-ERR invalid n: n must be from 1 to 2147483647, got 0"},
		{[]string{"SW.INCR", "k", "1m", "BY", "-1"}, "-ERR invalid n: n must be from 1 to 2147483647, got -1"},
		{[]string{"SW.INCR", "k", "1m", "BY", "2147483648"}, "-ERR invalid n: n must be from 1 to 2147483647, got 2147483648"},
		{[]string{"SW.INCR", "k", "1m", "BY", "abc"}, "-ERR invalid n: BY 'abc' is not an integer or out of range"},
		{[]string{"SW.INCR", "k", "1m", "BY", "1.5"}, "-ERR invalid n: BY '1.5' is not an integer or out of range"},
		{[]string{"SW.INCR", "k", "1m", "by", "99999999999999999999"}, "-ERR invalid n: BY '99999999999999999999' is not an integer or out of range"},
		{[]string{"SW.INCR", "k", "1m", "BY"}, "-ERR syntax error: option 'BY' needs a value"},
		{[]string{"SW.INCR", "k", "1m", "BY", "1", "by", "2"}, "-ERR syntax error: option 'by' given twice"},
		{[]string{"SW.INCR", "k", "1m", "BUCKETS", "1", "BUCKETS", "1"}, "-ERR syntax error: option 'BUCKETS' given twice"},
		{[]string{"SW.INCR", "k", "1m", "FOO", "1"}, "-ERR syntax error: unknown option 'FOO' for 'sw.incr'"},
		{[]string{"SW.COUNT", "k", "1m", "BY", "2"}, "-ERR syntax error: unknown option 'BY' for 'sw.count'"},
		{[]string{"SW.RESET", "k", "1m", "BY", "2"}, "-ERR syntax error: unknown option 'BY' for 'sw.reset'"},
		{[]string{"SW.ALLOW", "k", "1m", "-1"}, "-ERR invalid limit: limit must be from 0 to 4611686018427387904, got -1"},
		{[]string{"SW.ALLOW", "k", "1m", fmt.Sprint(int64(counter.MaxLimit) + 1)}, "-ERR invalid limit: limit must be from 0 to 4611686018427387904, got 4611686018427387905"},
		{[]string{"SW.ALLOW", "k", "1m", "ten"}, "-ERR invalid limit: limit 'ten' is not an integer or out of range"},
		{[]string{"SW.ALLOW", "k", "1m", "5", "BY", "0"}, "-ERR invalid n: n must be from 1 to 2147483647, got 0"},
		{[]string{"NOSUCH", "a", "b"}, "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' "},
		{[]string{""}, "-ERR unknown command '', with args beginning with: "},
		{[]string{"BAD\r\nNAME", "x\ny"}, "-ERR unknown command 'BAD  NAME', with args beginning with: 'x y' "},
		{[]string{"SW.INCRBY", "k", "1m"}, "-ERR unknown command 'SW.INCRBY', with args beginning with: 'k' '1m' "},
		{[]string{"PING", "a", "b"}, "-ERR wrong number of arguments for 'ping' command"},
		{[]string{"SELECT"}, "-ERR wrong number of arguments for 'select' command"},
		{[]string{"SELECT", "1"}, "-ERR DB index is out of range"},
		{[]string{"SELECT", "x"}, "-ERR value is not an integer or out of range"},
		{[]string{"AUTH"}, "-ERR wrong number of arguments for 'auth' command"},
		{[]string{"AUTH", "a", "b", "c"}, "-ERR syntax error"},
		{[]string{"AUTH", "x"}, "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		{[]string{"CONFIG"}, "-ERR wrong number of arguments for 'config' command"},
		{[]string{"CONFIG", "GET"}, "-ERR wrong number of arguments for 'config|get' command"},
		{[]string{"CONFIG", "SET", "save", ""}, "-ERR unsupported CONFIG subcommand 'SET': only CONFIG GET is served"},
		{[]string{"CLIENT"}, "-ERR wrong number of arguments for 'client' command"},
		{[]string{"CLIENT", "KILL", "x"}, "-ERR unknown subcommand or wrong number of arguments for 'KILL'. Try CLIENT HELP."},
		{[]string{"COMMAND", "FOO"}, "-ERR unknown subcommand 'FOO'. Try COMMAND HELP."},
		{[]string{"HELLO", "3"}, "-NOPROTO unsupported protocol version"},
		{[]string{"HELLO", "1"}, "-NOPROTO unsupported protocol version"},
		{[]string{"HELLO", "x"}, "-ERR Protocol version is not an integer or out of range"},
		{[]string{"HELLO", "2", "AUTH", "u"}, "-ERR Syntax error in HELLO option 'AUTH'"},
		{[]string{"HELLO", "2", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'"},
	} {
		wantReply(t, c.do(tc.args...), tc.want)
		c.wantServes()
	}
}

func TestProtocolErrorsCloseOnlyThatConnection(t *testing.T) {
	ts := startServer(t, nil)
	for _, tc := range []struct{ raw, want string }{
		{"*x\r\n", "-ERR Protocol error: invalid multibulk length"},
		{"*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length"},
		{"*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'"},
		{"SW.INCR \"k 1m\r\n", "-ERR Protocol error: unbalanced quotes in request"},
	} {
		c := ts.dial(t)
		c.write(tc.raw)
		wantReply(t, c.reply(), tc.want)
		c.wantClosed()
		ts.dial(t).wantServes()
	}
}

func TestInlineCommands(t *testing.T) {
	// What telnet, or redis-cli reading a pipe, sends.
	c := startServer(t, nil).dial(t)
	c.write("PING\r\nSW.INCR k 1m BY 2\r\nsw.count \"k\" 1m\n")
	wantReply(t, c.reply(), "+PONG")
	wantReply(t, c.reply(), ":2")
	wantReply(t, c.reply(), ":2")
}

func TestServiceFailuresAreErrors(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.Decider = failingDecider{err: fmt.Errorf("%w: owner n2 unreachable", counter.ErrUnavailable)}
	})
	c := ts.dial(t)
	for _, args := range [][]string{
		{"SW.INCR", "k", "1m"}, {"SW.COUNT", "k", "1m"}, {"SW.ALLOW", "k", "1m", "1"}, {"SW.RESET", "k", "1m"},
	} {
		wantReply(t, c.do(args...), "-ERR counter unavailable: owner n2 unreachable")
		wantReply(t, c.do("PING"), "+PONG")
	}
	if got := ts.metricValue(t, "sw.incr", "failed"); got != 1 {
		t.Fatalf("got %v failed sw.incr; want 1", got)
	}
}

// An op whose owner never answered is counted apart from one that failed: it may have
// been applied.
func TestOutcomeUnknownIsCountedApart(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.Decider = failingDecider{err: fmt.Errorf("%w: owner n2 did not answer", counter.ErrOutcomeUnknown)}
	})
	c := ts.dial(t)
	if got := c.do("SW.INCR", "k", "1m"); !strings.HasPrefix(got, "-") {
		t.Fatalf("got %q; want an error", got)
	}
	if got, failed := ts.metricValue(t, "sw.incr", "unknown"), ts.metricValue(t, "sw.incr", "failed"); got != 1 || failed != 0 {
		t.Fatalf("got %v unknown and %v failed sw.incr; want 1 and 0", got, failed)
	}
	if got := ts.metric(t, "leapcount_op_errors_total", "frontend", "resp", "class", "unknown"); got != 1 {
		t.Fatalf("leapcount_op_errors_total{resp,unknown} = %v; want 1", got)
	}
}
