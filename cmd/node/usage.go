package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// command is a subcommand of the binary: its first argument names it.
type command struct {
	name, summary string
	run           func(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int
}

// commands are the subcommands, in the order -h lists them. Without one, the binary
// runs a node.
var commands []command

func init() { // (an initialization cycle otherwise: help lists commands)
	commands = []command{
		{"status", "the cluster as one node sees it; exit 0 once it has settled, 1 while anything is wrong or settling",
			func(a []string, env func(string) (string, bool), out, _ io.Writer) int { return status(a, env, out) }},
		{"hotkeys", "the keys a node decided most often lately (--cluster: every member's, merged)",
			func(a []string, env func(string) (string, bool), out, _ io.Writer) int {
				return hotkeysCmd(a, env, out)
			}},
		{"healthcheck", "exit 0 if the node at --http is ready (GET /readyz), 1 if not: a container's health check",
			func(a []string, env func(string) (string, bool), _, errw io.Writer) int {
				return healthcheck(a, env, errw)
			}},
		{"ratelimit", "run a node configured by envoyproxy/ratelimit's environment variables (docs/envoy.md)", ratelimitCmd},
		{"version", "print the version, and the cluster protocol version it speaks",
			func(_ []string, _ func(string) (string, bool), out, _ io.Writer) int { return printVersion(out) }},
		{"help", "print this help; help <command>: that command's flags", help},
	}
}

// dispatch runs the subcommand args name, or a node when args start with a flag (or are
// empty), and returns the exit code. A first argument that is neither is refused,
// naming the closest command.
func dispatch(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "--version" && args[0] != "-version" {
		return run(args, env, stderr)
	}
	name := args[0]
	if name == "--version" || name == "-version" {
		name = "version"
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(args[1:], env, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "leapcount-node: %s\n", unknownCommand(name))
	return 2
}

// unknownCommand says that name is no command, suggesting the closest one.
func unknownCommand(name string) string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	if s := closest(name, names); s != "" {
		return fmt.Sprintf("unknown command %q; did you mean %q?", name, s)
	}
	return fmt.Sprintf("unknown command %q (commands: %s; run with -h for usage)", name, strings.Join(names, ", "))
}

// help is the "help" subcommand: the node's usage, or a command's with its name.
func help(args []string, env func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return run([]string{"-h"}, env, stdout)
	}
	if args[0] == "help" || strings.HasPrefix(args[0], "-") {
		return help(nil, env, stdout, stderr)
	}
	return dispatch([]string{args[0], "-h"}, env, stdout, stderr)
}

// nodeUsage is the -h text of the node: how to call the binary, its commands, and the
// node's flags.
func nodeUsage(fs *flag.FlagSet) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage:\n  leapcount-node [flags]            run a node\n  leapcount-node <command> [flags]\n\nCommands:\n")
		for _, c := range commands {
			fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
		}
		fmt.Fprintf(w, "\nEvery flag of the node also reads from LEAPCOUNT_<NAME> (upper case, \"-\" as \"_\");\n"+
			"a flag on the command line beats the variable.\n\nFlags:\n")
		fs.PrintDefaults()
	}
}

// commandFlags is the flag set of the subcommand name, its usage and errors to out.
func commandFlags(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: leapcount-node %s [flags]\n\nFlags:\n", name)
		fs.PrintDefaults()
	}
	return fs
}

// parseQuietly parses args into fs. -h prints fs's usage (ErrHelp is returned); any
// other error is returned as one line naming the flag and what is wrong with it,
// without the usage the flag package would print after it.
func parseQuietly(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage()
		return err
	case err != nil:
		return fmt.Errorf("%s (run with -h for usage)", flagProblem(fs, err))
	}
	return nil
}

// The flag package's parse errors (flag.FlagSet.failf), their flag named -name.
var (
	badValue  = regexp.MustCompile(`^invalid (?:boolean )?value (".*") for (?:flag )?-([^:]+): (.*)$`)
	undefined = regexp.MustCompile(`^flag provided but not defined: -(.+)$`)
	noValue   = regexp.MustCompile(`^flag needs an argument: -(.+)$`)
)

// flagProblem rewrites a parse error of fs as a sentence that names the flag --name
// and says what it wants.
func flagProblem(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := badValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("invalid --%s %s: %s", m[2], m[1], valueProblem(fs.Lookup(m[2]), m[3]))
	}
	if m := undefined.FindStringSubmatch(msg); m != nil {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := closest(m[1], names); s != "" {
			return fmt.Sprintf("unknown flag --%s; did you mean --%s?", m[1], s)
		}
		return fmt.Sprintf("unknown flag --%s", m[1])
	}
	if m := noValue.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("--%s needs a value", m[1])
	}
	return msg
}

// valueProblem says what flag f wants, given the problem its value had ("parse error"
// for any value its type cannot read).
func valueProblem(f *flag.Flag, problem string) string {
	if f == nil || problem != "parse error" {
		return problem
	}
	if _, ok := f.Value.(interface{ IsBoolFlag() bool }); ok {
		return "want true or false"
	}
	switch kind, _ := flag.UnquoteUsage(f); kind {
	case "duration":
		return "want a duration with its unit, such as 500ms, 2s or 1m"
	case "int", "int64", "uint", "uint64":
		return "want a whole number"
	case "float":
		return "want a number"
	}
	return problem
}

// closest is the candidate fewest edits from word, within a third of word's length
// (one edit at least, two at most), or "" if none is that close.
func closest(word string, candidates []string) string {
	best, bestD := "", min(2, max(1, len(word)/3))+1
	for _, c := range candidates {
		if d := editDistance(word, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// parseExit is a subcommand's exit code for a parseQuietly error: 0 after -h, else 2
// with the error on out.
func parseExit(name string, err error, out io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(out, "%s: %v\n", name, err)
	return 2
}
