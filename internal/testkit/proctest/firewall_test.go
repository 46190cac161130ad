package proctest

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A rule the Firewall adds drops traffic from one address to another, carries the
// test's tag, and is gone after Heal.
func TestFirewallRuleLifeCycle(t *testing.T) {
	f := NewFirewall(t)
	ln, err := net.Listen("tcp", "127.0.0.251:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := func() error {
		d := net.Dialer{Timeout: 300 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.250")}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err
	}
	f.add("-s", "127.0.0.250", "-d", "127.0.0.251")
	out, _ := exec.Command("iptables", "-w", "-S", "OUTPUT").Output()
	if !strings.Contains(string(out), f.tag) {
		t.Fatalf("no rule tagged %s in:\n%s", f.tag, out)
	}
	if err := dial(); err == nil {
		t.Fatal("dial through a cut succeeded")
	}
	f.Heal()
	out, _ = exec.Command("iptables", "-w", "-S", "OUTPUT").Output()
	if strings.Contains(string(out), f.tag) {
		t.Fatalf("rule tagged %s left after Heal:\n%s", f.tag, out)
	}
	if err := dial(); err != nil {
		t.Fatalf("dial after Heal: %v", err)
	}
}
