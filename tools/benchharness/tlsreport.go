package benchharness

import (
	"fmt"
	"strings"
)

// tlsSection is the client TLS section: the groups, then TLS over plain for each
// protocol, then handshakes and idle connections.
func (r *Report) tlsSection() string {
	t := r.tls
	if t == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Client TLS\n\nOne redis-server serving its plain port and `--tls-port`, one node serving `--resp` and " +
		"`--resp-tls`, `--http` and `--http-tls` (TLS 1.3, ECDSA P-256 certificates, no client certificate), measured in the same groups.\n\n")
	for _, g := range t.groups {
		b.WriteString(groupTable(g))
		b.WriteString(tlsCostTable(g))
	}
	var rows [][]string
	for _, h := range t.handshakes {
		errs := fmt.Sprint(h.errs)
		if h.firstErr != "" {
			errs += " (" + h.firstErr + ")"
		}
		rows = append(rows, []string{h.name, fmtRate(h.rate), fmtDur(h.cpu), errs})
	}
	b.WriteString(fmt.Sprintf("### Full handshakes (%d clients at once, no session resumption)\n\n", handshakeWorkers))
	b.WriteString(table([]string{"port", "handshakes/s", "server CPU a handshake", "errors"}, rows) + "\n")
	rows = nil
	for _, c := range t.conns {
		goMem := "n/a"
		if c.perConnGo >= 0 {
			goMem = fmtBytes(c.perConnGo)
		}
		rows = append(rows, []string{c.name, fmtBytes(c.perConn), goMem})
	}
	b.WriteString(fmt.Sprintf("### Memory of an idle connection (%d connections, each answered one PING; server RSS growth)\n\n", idleConns))
	b.WriteString(table([]string{"port", "RSS a connection", "Go heap and stacks a connection (after a GC)"}, rows) + "\n")
	return b.String()
}

// tlsCostTable sets each TLS side against its plain twin (the side whose id it
// extends with "-tls"): its rate and its server CPU an op.
func tlsCostTable(g *groupResult) string {
	var rows [][]string
	for _, s := range g.sides {
		plain := g.side(strings.TrimSuffix(s.side.id, "-tls"))
		if !strings.HasSuffix(s.side.id, "-tls") || plain == nil {
			continue
		}
		rows = append(rows, []string{s.side.name, fmtRatio(ratio(s.rate(), plain.rate())),
			fmtRatio(ratio(float64(s.cpuPerOp(s.serverCPU)), float64(plain.cpuPerOp(plain.serverCPU))))})
	}
	return table([]string{"over TLS", "ops/s vs plain", "server CPU/op vs plain"}, rows) + "\n"
}
