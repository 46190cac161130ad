package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestReadNamesTheGoThatBuiltIt(t *testing.T) {
	i := Read()
	if i.GoVersion != runtime.Version() || i.Platform != runtime.GOOS+"/"+runtime.GOARCH || i.Version == "" {
		t.Fatalf("Read() = %+v", i)
	}
	if s := i.String(); !strings.HasPrefix(s, "leapcount "+i.Version) || !strings.Contains(s, runtime.Version()) {
		t.Fatalf("String() = %q", s)
	}
}

func TestLinkTimeVersionWins(t *testing.T) {
	old := version
	defer func() { version = old }()
	version = "v9.8.7"
	if got := Read().Version; got != "v9.8.7" {
		t.Fatalf("Version = %q, want the link-time v9.8.7", got)
	}
}

func TestShortCommit(t *testing.T) {
	i := Info{Commit: "0123456789abcdef0123"}
	if i.ShortCommit() != "0123456789ab" {
		t.Fatal(i.ShortCommit())
	}
	i.Modified = true
	if !strings.Contains(i.String(), "commit 0123456789ab (modified)") {
		t.Fatal(i.String())
	}
}
