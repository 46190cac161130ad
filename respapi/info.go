package respapi

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// redisVersion is the Redis version the server claims in HELLO and INFO. Client
// libraries turn features on by it; 7.0.0 is the protocol this server follows.
const redisVersion = "7.0.0"

// info answers INFO (whatever sections are asked for) with the Server, Clients and (when
// serving the cluster protocol) Cluster sections in Redis's format, followed by
// Config.Info's text.
func (s *Server) info(c *client, _ [][]byte) error {
	var b strings.Builder
	port := 0
	if addr, ok := s.Addr().(*net.TCPAddr); ok {
		port = addr.Port
	}
	uptime := time.Since(s.start)
	mode := "standalone"
	if s.cfg.Cluster != nil {
		mode = "cluster" // as cluster_enabled:1 below says: tools read either
	}
	fmt.Fprintf(&b, "# Server\r\nredis_version:%s\r\nredis_mode:%s\r\nos:%s %s\r\narch_bits:%d\r\n",
		redisVersion, mode, runtime.GOOS, runtime.GOARCH, strconv.IntSize)
	fmt.Fprintf(&b, "process_id:%d\r\ntcp_port:%d\r\nuptime_in_seconds:%d\r\nuptime_in_days:%d\r\n",
		os.Getpid(), port, int64(uptime.Seconds()), int64(uptime.Hours()/24))
	fmt.Fprintf(&b, "\r\n# Clients\r\nconnected_clients:%d\r\n", s.connected.Load())
	if s.cfg.Cluster != nil {
		// redis-py's RedisCluster will not start on a node that does not say so here.
		b.WriteString("\r\n# Cluster\r\ncluster_enabled:1\r\n")
	}
	if s.cfg.Info != nil {
		if extra := s.cfg.Info(); extra != "" {
			b.WriteString("\r\n")
			b.WriteString(crlf(strings.TrimRight(extra, "\r\n")))
			b.WriteString("\r\n")
		}
	}
	c.out.WriteBulkString(b.String())
	return nil
}

// crlf ends every line of s with CRLF, as INFO's lines are.
func crlf(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// config answers CONFIG GET, as Redis does (name, value pairs; each parameter once,
// whatever patterns name it), for the parameters clients and tools read: save and
// appendonly (redis-benchmark, on start: this server persists nothing) and maxclients
// (the connections this port keeps, 0: no cap). Other names answer nothing.
func (s *Server) config(c *client, args [][]byte) error {
	if !bytes.EqualFold(args[1], []byte("GET")) {
		return errorf("ERR", "unsupported CONFIG subcommand '%s': only CONFIG GET is served", args[1])
	}
	if len(args) < 3 {
		return wrongArity("config|get")
	}
	params := []struct{ name, value string }{{"save", ""}, {"appendonly", "no"}, {"maxclients", strconv.Itoa(s.cfg.MaxClients)}}
	var pairs []string
	for _, prm := range params {
		for _, p := range args[2:] {
			// A glob, as Redis takes (Go's path.Match has the same *, ? and [...]).
			if ok, _ := path.Match(strings.ToLower(string(p)), prm.name); ok {
				pairs = append(pairs, prm.name, prm.value)
				break
			}
		}
	}
	c.out.WriteArray(len(pairs))
	for _, p := range pairs {
		c.out.WriteBulkString(p)
	}
	return nil
}
