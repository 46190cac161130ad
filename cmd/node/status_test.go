package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/wait"
)

// status reads a whole three-node cluster as OK (exit 0, every member listed), and
// once a member is killed names it dead and exits 1; hotkeys lists the keys a node
// decided. Both find the token in --token-file.
func TestStatusAndHotkeysSubcommands(t *testing.T) {
	bin := buildBinary(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := startBinary(t, bin, "--name", "s1", "--token-file", tokenFile)
	var others []proc
	for _, name := range []string{"s2", "s3"} {
		others = append(others, startBinary(t, bin, "--name", name, "--token-file", tokenFile, "--join", first.gossip))
	}
	noEnv := func(string) (string, bool) { return "", false }
	run := func(f func([]string, func(string) (string, bool), io.Writer) int, args ...string) (int, string) {
		var out bytes.Buffer
		code := f(append([]string{"--http", first.http, "--token-file", tokenFile}, args...), noEnv, &out)
		return code, out.String()
	}
	var last string
	err := wait.Until(60*time.Second, func() error {
		code, out := run(status)
		last = out
		if code != 0 || !strings.Contains(out, "s3") {
			return fmt.Errorf("exit %d", code)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a whole cluster never read OK: %v\n%s", err, last)
	}
	for _, want := range []string{"s1", "s2", "s3", "alive", "OK\n"} {
		if !strings.Contains(last, want) {
			t.Fatalf("status lacks %q:\n%s", want, last)
		}
	}
	if code, out := run(hotkeysCmd, "--n", "3"); code != 0 || !strings.Contains(out, "KEY") {
		t.Fatalf("hotkeys: exit %d\n%s", code, out)
	}
	var wrong bytes.Buffer
	if code := status([]string{"--http", first.http}, noEnv, &wrong); code != 1 || !strings.Contains(wrong.String(), "401") {
		t.Fatalf("status without the token: exit %d\n%s; want 1, refused", code, wrong.String())
	}

	others[1].cmd.Process.Kill()
	err = wait.Until(60*time.Second, func() error {
		code, out := run(status)
		last = out
		if code != 1 || !strings.Contains(out, "PROBLEM: member s3 is dead") {
			return fmt.Errorf("exit %d", code)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a killed member was never reported dead: %v\n%s", err, last)
	}
}
