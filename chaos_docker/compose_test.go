//go:build chaos

package chaosdocker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// commandTimeout bounds every docker and compose command.
const commandTimeout = 3 * time.Minute

// compose runs Compose on the repository's docker-compose.yml (and override files of
// this directory) under the suite's project, with the suite's variables.
type compose struct {
	argv []string
	env  []string
}

// composeCommand is Compose v2 ("docker compose") where it is installed, else v1
// ("docker-compose"), as in the Makefile.
var composeCommand = sync.OnceValue(func() []string {
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	return []string{"docker-compose"}
})

// newCompose runs Compose with the overrides (files of this directory) after the
// repository's file, and env (KEY=value) added to this process's environment.
func newCompose(overrides []string, env ...string) *compose {
	root, err := filepath.Abs("..")
	if err != nil {
		panic(err)
	}
	argv := append(append([]string(nil), composeCommand()...), "-p", project, "-f", filepath.Join(root, "docker-compose.yml"))
	for _, o := range overrides {
		argv = append(argv, "-f", filepath.Join(root, "chaos_docker", o))
	}
	return &compose{argv: argv, env: append(os.Environ(), env...)}
}

func (c *compose) run(args ...string) (string, error) {
	return command(c.env, append(append([]string(nil), c.argv...), args...)...)
}

// must runs a Compose command and fails the test if it fails.
func (c *compose) must(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// teardown removes the project's containers (node4's too), network and volumes; it
// kills first, as nothing of a finished scenario needs a graceful stop.
func (c *compose) teardown() {
	c.run("--profile", "scale", "kill")
	if _, err := c.run("--profile", "scale", "down", "-v", "--remove-orphans"); err != nil {
		fmt.Fprintf(os.Stderr, "chaos_docker: teardown: %v\n", err)
	}
}

// docker runs the docker CLI and fails the test if it fails.
func docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := command(nil, append([]string{"docker"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// command runs argv (with env, or this process's environment when nil) within
// commandTimeout and returns its output, trimmed.
func command(env []string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
