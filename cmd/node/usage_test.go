package main

import (
	"bytes"
	"strings"
	"testing"
)

// dispatchOut runs the binary's main on args and returns its exit code, stdout and
// stderr.
func dispatchOut(args ...string) (int, string, string) {
	var out, errw bytes.Buffer
	code := dispatch(args, noEnv, &out, &errw)
	return code, out.String(), errw.String()
}

// -h and help list every subcommand beside the flags, and exit 0. Before, -h listed
// the flags alone, and help was refused as an "unexpected argument".
func TestHelpListsTheCommands(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"--help"}} {
		code, out, errw := dispatchOut(args...)
		text := out + errw
		if code != 0 {
			t.Errorf("%v: exit %d; want 0\n%s", args, code, text)
		}
		for _, want := range []string{"status", "hotkeys", "healthcheck", "version", "help", "-lease duration", "LEAPCOUNT_<NAME>"} {
			if !strings.Contains(text, "\n  "+want) && !strings.Contains(text, want) {
				t.Errorf("%v does not list %q:\n%s", args, want, text)
			}
		}
		for _, c := range commands {
			if !strings.Contains(text, "\n  "+c.name+" ") {
				t.Errorf("%v does not list the command %q:\n%s", args, c.name, text)
			}
		}
	}
	if code, out, _ := dispatchOut("help", "status"); code != 0 || !strings.Contains(out, "leapcount-node status [flags]") || !strings.Contains(out, "-token-file") {
		t.Errorf("help status: exit %d\n%s\nwant status's usage and flags", code, out)
	}
}

// A mistyped command is refused (exit 2) naming the closest command; one far from any
// lists them all.
func TestUnknownCommandSuggestsTheClosest(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"stauts", `unknown command "stauts"; did you mean "status"?`},
		{"hotkey", `unknown command "hotkey"; did you mean "hotkeys"?`},
		{"verison", `unknown command "verison"; did you mean "version"?`},
		{"frobnicate", `unknown command "frobnicate" (commands: status, hotkeys, healthcheck, ratelimit, version, help;`},
	} {
		code, out, errw := dispatchOut(c.arg)
		if code != 2 || !strings.Contains(errw, c.want) || out != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %q; want 2 and %q", c.arg, code, errw, out, c.want)
		}
	}
}

// A bad flag value is one line naming the flag and what it wants, with a pointer to
// -h, and exit 2: not the flag package's "parse error" followed by the whole usage.
func TestBadFlagValueIsOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--lease", "2"}, `invalid --lease "2": want a duration with its unit, such as 500ms, 2s or 1m`},
		{[]string{"--max-clients=many"}, `invalid --max-clients "many": want a whole number`},
		{[]string{"--pprof=perhaps"}, `invalid --pprof "perhaps": want true or false`},
		{[]string{"--leas", "2s"}, `unknown flag --leas; did you mean --lease?`},
		{[]string{"--lease"}, `--lease needs a value`},
		{[]string{"status", "--timeout", "5"}, `invalid --timeout "5": want a duration`},
	} {
		code, out, errw := dispatchOut(c.args...)
		text := out + errw
		if code != 2 {
			t.Errorf("%v: exit %d; want 2", c.args, code)
		}
		if strings.Count(strings.TrimRight(text, "\n"), "\n") != 0 || !strings.Contains(text, c.want) || !strings.Contains(text, "run with -h for usage") {
			t.Errorf("%v printed %q; want one line with %q and \"run with -h for usage\"", c.args, text, c.want)
		}
	}
}
