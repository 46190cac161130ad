//go:build chaos

// Package chaosdocker is the container chaos suite (`make chaos`): the compose cluster
// of docker-compose.yml (Redis and three nodes from the images `make image` builds:
// real containers, real sockets), loaded through every node's published RESP port, and
// broken with one Docker fault per scenario: kill, pause, partition (network
// disconnect), Redis stopped, Redis with its data lost, a fourth node joining and
// leaving, a rolling restart, and a node with a skewed clock. Every op is recorded as
// ok, failed or unknown (packages faultload and history), and every counter is checked
// through every node against what README's Guarantees allow for that fault.
//
// It runs under its own compose project (leapcount-chaos) on host ports prefixed 1
// (18080..., 16380...), so a `make up` cluster is left alone, and it tears its cluster
// down (containers and Redis's volume) after each scenario, on an interrupt, and at the
// start of a run (what an earlier run killed by a timeout left behind).
//
// The build tag keeps it out of `go test ./...`: it needs Docker and the images.
package chaosdocker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// project is the compose project of the suite's clusters.
const project = "leapcount-chaos"

func TestMain(m *testing.M) {
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos_docker: docker info failed (%v): the suite needs Docker\n%s", err, out)
		os.Exit(1)
	}
	if err := describeImages(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos_docker: %v (make chaos builds the images first)\n", err)
		os.Exit(1)
	}
	redis.SetLogger(quiet{}) // a dial refused by a killed node is an outcome the load records, not news
	dc := newCompose(nil)
	dc.teardown() // what an interrupted run may have left
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "chaos_docker: %v: tearing the cluster down\n", s)
		dc.teardown()
		os.Exit(1)
	}()
	code := m.Run()
	dc.teardown()
	os.Exit(code)
}

// describeImages prints which images the clusters run (docker-compose.yml's variables
// LEAPCOUNT_IMAGE and REDIS_IMAGE, or its defaults), so a stale one shows; nothing can
// be pulled here, so a missing one is an error at once.
func describeImages() error {
	for _, v := range [][2]string{{"LEAPCOUNT_IMAGE", "leapcount/node:local"}, {"REDIS_IMAGE", "leapcount/redis:local"}} {
		image := os.Getenv(v[0])
		if image == "" {
			image = v[1]
		}
		out, err := command(nil, "docker", "image", "inspect", "-f", "{{.Id}} built {{.Created}}", image)
		if err != nil {
			return fmt.Errorf("image %s (%s): %v", image, v[0], err)
		}
		fmt.Printf("chaos_docker: %s %s\n", image, out)
	}
	return nil
}

// seed is LEAPCOUNT_CHAOS_SEED, or the clock; it picks the load's keys and nodes.
func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("LEAPCOUNT_CHAOS_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("LEAPCOUNT_CHAOS_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (LEAPCOUNT_CHAOS_SEED replays the load)", s)
	return s
}

// quiet is a go-redis logger that drops everything.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
