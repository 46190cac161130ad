package proctest

import (
	"os"
	"testing"
)

func TestVmRSS(t *testing.T) {
	if got, err := vmRSS([]byte("Name:\tnode\nVmPeak:\t  900 kB\nVmRSS:\t  1234 kB\n")); err != nil || got != 1234<<10 {
		t.Errorf("got %d, %v; want %d", got, err, 1234<<10)
	}
	if _, err := vmRSS([]byte("Name:\tnode\nState:\tZ (zombie)\n")); err == nil {
		t.Error("a status without VmRSS: got no error")
	}
	self, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	if got, err := vmRSS(self); err != nil || got <= 0 {
		t.Errorf("this process: got %d, %v; want a positive size", got, err)
	}
}
