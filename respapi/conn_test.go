package respapi

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// helloReply matches the HELLO answer for protocol 2; the id varies.
var helloReply = regexp.MustCompile(`^\*\[\$server \$redis \$version \$7\.0\.0 \$proto :2 \$id :\d+ \$mode \$standalone \$role \$master \$modules \*\[\]\]$`)

func TestConnectionCommands(t *testing.T) {
	c := startServer(t, nil).dial(t)
	wantReply(t, c.do("PING"), "+PONG")
	wantReply(t, c.do("ping", "hello there"), "$hello there")
	wantReply(t, c.do("ECHO", "a\r\nb"), "$a\r\nb")
	wantReply(t, c.do("SELECT", "0"), "+OK")
	if got := c.do("COMMAND"); !strings.HasPrefix(got, "*[*[$sw.incr :-3 *[+write +fast] :1 :1 :1 ") {
		t.Fatalf("COMMAND: got %.200s; want SW.INCR first, its key at 1", got)
	}
	wantReply(t, c.do("COMMAND", "COUNT"), fmt.Sprintf(":%d", len(commandList)))
	wantReply(t, c.do("COMMAND", "INFO", "SW.COUNT", "nope"), "*[*[$sw.count :-3 *[+readonly +fast] :1 :1 :1 *[+@read +@fast] *[] "+
		"*[*[$flags *[+RO +ACCESS] $begin_search *[$type $index $spec *[$index :1]] $find_keys *[$type $range $spec *[$lastkey :0 $keystep :1 $limit :0]]]] *[]] $-1]")
	wantReply(t, c.do("command", "docs", "ping"), "*[$ping *[$summary $as Redis's PING $since $1.0.0 $group $connection]]")
	wantReply(t, c.do("CONFIG", "GET", "save", "appendonly"), "*[$save $ $appendonly $no]")
	wantReply(t, c.do("config", "get", "maxmemory"), "*[]")
	wantReply(t, c.do("CLIENT", "SETNAME", "me"), "+OK")
	wantReply(t, c.do("CLIENT", "SETINFO", "lib-name", "go-redis"), "+OK")
	wantReply(t, c.do("AUTH", "someone", "anything"), "+OK") // no token: like Redis's passwordless default user
	for _, args := range [][]string{{"HELLO"}, {"HELLO", "2"}, {"hello", "2", "setname", "me"}, {"HELLO", "2", "AUTH", "u", "p"}} {
		if got := c.do(args...); !helloReply.MatchString(got) {
			t.Fatalf("%v: got %s; want %s", args, got, helloReply)
		}
	}
	wantReply(t, c.do("QUIT"), "+OK")
	c.wantClosed()
}

func TestHelloIDsDiffer(t *testing.T) {
	ts := startServer(t, nil)
	a, b := ts.dial(t).do("HELLO"), ts.dial(t).do("HELLO")
	if a == b {
		t.Fatalf("two connections got the same HELLO %s; want different ids", a)
	}
}

func TestInfo(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Info = func() string { return "# Cluster\nmembers:3\nself:n1\n" } })
	c := ts.dial(t)
	for _, args := range [][]string{{"INFO"}, {"info", "server"}, {"INFO", "everything"}} {
		got := c.do(args...)
		for _, part := range []string{
			"$# Server\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n",
			"\r\n\r\n# Clients\r\nconnected_clients:1\r\n",
			"\r\n\r\n# Cluster\r\nmembers:3\r\nself:n1\r\n",
		} {
			if !strings.Contains(got, part) {
				t.Fatalf("%v: got %q; want it to contain %q", args, got, part)
			}
		}
		if !strings.HasSuffix(got, "\r\n") {
			t.Fatalf("%v: got %q; want it to end in CRLF", args, got)
		}
	}
}

func TestQuitDropsTheRestOfThePipeline(t *testing.T) {
	ts := startServer(t, nil)
	c := ts.dial(t)
	c.write(encode("SW.INCR", "q", "1m") + encode("QUIT") + encode("SW.INCR", "q", "1m"))
	wantReply(t, c.reply(), ":1")
	wantReply(t, c.reply(), "+OK")
	c.wantClosed()
	wantReply(t, ts.dial(t).do("SW.COUNT", "q", "1m"), ":1")

	c = ts.dial(t) // QUIT first, so nothing read it with the SW.* commands behind it
	c.write(encode("QUIT") + encode("SW.INCR", "q", "1m"))
	wantReply(t, c.reply(), "+OK")
	c.wantClosed()
	wantReply(t, ts.dial(t).do("SW.COUNT", "q", "1m"), ":1")
}

func TestTokenRequired(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Token = "s3cret" })
	c := ts.dial(t)
	const noAuth = "-NOAUTH Authentication required."
	for _, args := range [][]string{
		{"SW.INCR", "k", "1m"}, {"SW.COUNT", "k", "1m"}, {"SW.ALLOW", "k", "1m", "5"}, {"SW.RESET", "k", "1m"},
		{"PING"}, {"INFO"}, {"SELECT", "0"}, {"COMMAND"}, {"CONFIG", "GET", "save"}, {"CLIENT", "SETNAME", "x"},
	} {
		wantReply(t, c.do(args...), noAuth)
	}
	// As in Redis, an unknown command or a wrong count of arguments is reported first.
	wantReply(t, c.do("NOSUCH"), "-ERR unknown command 'NOSUCH', with args beginning with: ")
	wantReply(t, c.do("SW.INCR", "k"), "-ERR wrong number of arguments for 'sw.incr' command")
	wantReply(t, c.do("HELLO"), "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
	wantReply(t, c.do("HELLO", "3", "AUTH", "default", "s3cret"), "-NOPROTO unsupported protocol version")
	wantReply(t, c.do("HELLO", "2", "AUTH", "default", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.")
	wantReply(t, c.do("AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.")
	wantReply(t, c.do("AUTH", "default", "s3cret2"), "-WRONGPASS invalid username-password pair or user is disabled.")
	wantReply(t, c.do("PING"), noAuth)
	wantReply(t, c.do("AUTH", "s3cret"), "+OK")
	wantReply(t, c.do("SW.INCR", "k", "1m"), ":1")
	wantReply(t, c.do("AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.")
	wantReply(t, c.do("SW.INCR", "k", "1m"), ":2") // a failed AUTH does not log out

	c2 := ts.dial(t)
	if got := c2.do("HELLO", "2", "AUTH", "default", "s3cret"); !helloReply.MatchString(got) {
		t.Fatalf("HELLO 2 AUTH: got %s; want %s", got, helloReply)
	}
	wantReply(t, c2.do("SW.COUNT", "k", "1m"), ":2")

	c3 := ts.dial(t)
	wantReply(t, c3.do("AUTH", "anyuser", "s3cret"), "+OK")
	wantReply(t, c3.do("PING"), "+PONG")
	wantReply(t, ts.dial(t).do("QUIT"), "+OK") // QUIT needs no AUTH
}

func TestAuthInAPipelineKeepsOrder(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Token = "s3cret" })
	c := ts.dial(t)
	c.write(encode("SW.INCR", "a", "1m") + encode("AUTH", "s3cret") + encode("SW.INCR", "a", "1m") + encode("SW.INCR", "a", "1m"))
	wantReply(t, c.reply(), "-NOAUTH Authentication required.")
	wantReply(t, c.reply(), "+OK")
	wantReply(t, c.reply(), ":1")
	wantReply(t, c.reply(), ":2")
}

func TestGoRedisWithToken(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.Token = "s3cret" })
	ctx := context.Background()
	for name, opts := range clients {
		t.Run(name, func(t *testing.T) {
			for _, user := range []string{"", "default"} {
				o := opts(ts.addr)
				o.Username, o.Password = user, "s3cret"
				if got, err := newClient(t, o).Do(ctx, "SW.INCR", "tok", "1m").Result(); err != nil || got == nil {
					t.Fatalf("user %q: got %v, %v; want a count", user, got, err)
				}
			}
			o := opts(ts.addr)
			o.Password = "wrong"
			if err := newClient(t, o).Do(ctx, "SW.INCR", "tok", "1m").Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Fatalf("wrong password: got %v; want WRONGPASS", err)
			}
			if err := newClient(t, opts(ts.addr)).Do(ctx, "SW.INCR", "tok", "1m").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
				t.Fatalf("no password: got %v; want NOAUTH", err)
			}
		})
	}
}

func TestGoRedisConnectionCommands(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	for name, opts := range clients {
		t.Run(name, func(t *testing.T) {
			o := opts(ts.addr)
			o.ClientName = "tester" // go-redis then sends CLIENT SETNAME when HELLO 3 fails
			rc := newClient(t, o)
			if got, err := rc.Ping(ctx).Result(); err != nil || got != "PONG" {
				t.Fatalf("PING: got %q, %v; want PONG", got, err)
			}
			if got, err := rc.Info(ctx).Result(); err != nil || !strings.Contains(got, "redis_version:7.0.0") {
				t.Fatalf("INFO: got %q, %v; want redis_version:7.0.0", got, err)
			}
			if got, err := rc.ConfigGet(ctx, "save").Result(); err != nil || len(got) != 1 {
				t.Fatalf("CONFIG GET save: got %v, %v; want save", got, err)
			}
		})
	}
	// The default client asked for RESP3 first and took NOPROTO for an answer.
	if got := ts.metricValue(t, "hello", "bad_request"); got < 1 {
		t.Fatalf("got %v refused HELLOs; want the default client's HELLO 3 among them", got)
	}
}

// CONFIG GET maxclients answers the client limit as Redis does (name, value); patterns
// match as Redis's globs. Before, it answered nothing.
func TestConfigGetMaxclients(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxClients = 123 })
	c := ts.dial(t)
	wantReply(t, c.do("CONFIG", "GET", "maxclients"), "*[$maxclients $123]")
	wantReply(t, c.do("CONFIG", "GET", "MAXCLIENTS", "max*"), "*[$maxclients $123]")
	wantReply(t, c.do("CONFIG", "GET", "*"), "*[$save $ $appendonly $no $maxclients $123]")
}

// INFO's redis_mode agrees with its cluster_enabled: cluster when the CLUSTER commands
// are served, standalone otherwise. Before, it said standalone beside cluster_enabled:1.
func TestInfoModeAgreesWithClusterEnabled(t *testing.T) {
	for _, c := range []struct {
		cluster   Cluster
		mode      string
		clusterOn bool
	}{{nil, "standalone", false}, {halves{"10.0.0.2:7001"}, "cluster", true}} {
		ts := startServer(t, func(cfg *Config) { cfg.Cluster = c.cluster })
		got := ts.dial(t).do("INFO")
		if !strings.Contains(got, "\r\nredis_mode:"+c.mode+"\r\n") || strings.Contains(got, "cluster_enabled:1") != c.clusterOn {
			t.Errorf("INFO with cluster %v: %q; want redis_mode:%s, cluster_enabled:1 %v", c.cluster, got, c.mode, c.clusterOn)
		}
	}
}
