package procstat

import (
	"os"
	"testing"
)

// A command name with spaces and parentheses does not shift the fields.
func TestParseCommandWithParens(t *testing.T) {
	line := "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 100 1000 25 18446744073709551615"
	f, err := parse(42, []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if string(f[statState]) != "S" || string(f[statUtime]) != "7" || string(f[statStime]) != "3" || string(f[statRSS]) != "25" {
		t.Fatalf("fields %q", f)
	}
}

func TestParseShort(t *testing.T) {
	if _, err := parse(1, []byte("1 (x) S 1 2")); err == nil {
		t.Fatal("a short line parsed")
	}
}

// This process is running and holds some memory.
func TestSelf(t *testing.T) {
	pid := os.Getpid()
	if rss, err := RSS(pid); err != nil || rss <= 0 {
		t.Fatalf("RSS = %d, %v", rss, err)
	}
	if _, err := CPUTime(pid); err != nil {
		t.Fatal(err)
	}
	if s, err := State(pid); err != nil || (s != 'R' && s != 'S') {
		t.Fatalf("State = %q, %v", s, err)
	}
}
