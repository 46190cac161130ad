package testredis

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStartAnswersPingWithPersistenceOff(t *testing.T) {
	s := Start(t)
	if got := s.Do(t, "PING"); got != "PONG" {
		t.Fatalf("PING = %v; want PONG", got)
	}
	c := s.Client(t)
	for param, want := range map[string]string{"save": "", "appendonly": "no"} {
		got, err := c.ConfigGet(context.Background(), param).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got[param] != want {
			t.Errorf("CONFIG GET %s = %q; want %q", param, got[param], want)
		}
	}
	if want := "redis://127.0.0.1:" + strconv.Itoa(s.Port()) + "/0"; s.URL() != want {
		t.Errorf("URL() = %q; want %q", s.URL(), want)
	}
}

func TestStopRestartKeepsPortAndForgetsData(t *testing.T) {
	s := Start(t)
	s.Do(t, "SET", "k", "v")
	port := s.Port()
	s.Stop()
	if err := ping(s.Addr(), 200*time.Millisecond); err == nil {
		t.Fatal("PING answered after Stop")
	}
	s.Stop() // stopping twice is harmless
	s.Restart()
	if s.Port() != port {
		t.Fatalf("port after Restart = %d; want %d", s.Port(), port)
	}
	if got := s.Do(t, "GET", "k"); got != nil {
		t.Fatalf("GET k after restart = %v; want nil (no persistence)", got)
	}
}

func TestPauseTimesOutResumeAnswers(t *testing.T) {
	s := Start(t)
	s.Pause()
	err := ping(s.Addr(), 100*time.Millisecond)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING while paused: %v; want a timeout", err)
	}
	s.Resume()
	Poll(t, 5*time.Second, "PING after Resume", func() error { return ping(s.Addr(), 200*time.Millisecond) })
}

func TestPollReportsLastError(t *testing.T) {
	n := 0
	err := PollErr(20*time.Millisecond, func() error { n++; return errors.New("not yet") })
	if err == nil || n < 2 {
		t.Fatalf("PollErr = %v after %d calls; want an error after several calls", err, n)
	}
	if err := PollErr(time.Second, func() error { return nil }); err != nil {
		t.Fatalf("PollErr = %v; want nil", err)
	}
}

func TestClusterOfThree(t *testing.T) {
	nodes := StartCluster(t, 3)
	ctx := context.Background()
	c := nodes[0].Client(t)
	got, err := c.ClusterKeySlot(ctx, "a{tag}b").Result()
	if err != nil {
		t.Fatal(err)
	}
	want, err := c.ClusterKeySlot(ctx, "tag").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("slot of a{tag}b = %d; want %d (the slot of tag)", got, want)
	}
	if u := ClusterURL(nodes); strings.Count(u, "addr=") != 2 {
		t.Fatalf("ClusterURL = %q; want two addr params", u)
	}
}

func TestSentinelKnowsMaster(t *testing.T) {
	m := Start(t)
	s := StartSentinel(t, m, "mymaster")
	got, err := s.Client(t).Do(context.Background(), "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster").StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1", strconv.Itoa(m.Port())}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("master addr = %v; want %v", got, want)
	}
}

func TestMissingBinaryIsReported(t *testing.T) {
	if _, ok := findBinary("/nonexistent/redis-server", "no-such-redis-server-binary"); ok {
		t.Fatal("findBinary found a binary that does not exist")
	}
	if p, ok := findBinary("/nonexistent/redis-server", "redis-server"); !ok || p == "" {
		t.Fatalf("findBinary(redis-server on PATH) = %q, %v; want it found", p, ok)
	}
	if !strings.Contains(MissingMessage, "scripts/ensure-redis.sh") {
		t.Fatalf("MissingMessage %q does not name scripts/ensure-redis.sh", MissingMessage)
	}
}
