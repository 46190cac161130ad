package fallback

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/testredis"
)

// Each member lists itself and sees the others, newest first; a member that unlists
// itself is gone at once, one that stops renewing is gone once its listing lapses, and
// another cluster's list is apart.
func TestMembersListUnlistAndLapse(t *testing.T) {
	srv, st := startStore(t)
	ctx := context.Background()
	ttl := 700 * time.Millisecond
	m := st.Members("c1", ttl)
	list := func(addr string) []string {
		t.Helper()
		got, err := m.List(ctx, addr)
		if err != nil {
			t.Fatalf("List(%s): %v", addr, err)
		}
		return got
	}
	if got := list("10.0.0.1:7946"); len(got) != 0 {
		t.Fatalf("the first member sees %q; want nobody", got)
	}
	list("10.0.0.2:7946")
	if got := list("10.0.0.3:7946"); !slices.Equal(got, []string{"10.0.0.2:7946", "10.0.0.1:7946"}) {
		t.Fatalf("the third sees %q; want the second and the first, newest first", got)
	}
	if got, _ := st.Members("c2", ttl).List(ctx, "10.0.0.9:7946"); len(got) != 0 {
		t.Fatalf("another cluster's first member sees %q; want nobody", got)
	}
	if err := m.Unlist(ctx, "10.0.0.2:7946"); err != nil {
		t.Fatal(err)
	}
	if got := list("10.0.0.3:7946"); !slices.Equal(got, []string{"10.0.0.1:7946"}) {
		t.Fatalf("after the second unlisted itself the third sees %q", got)
	}
	// Only the third renews: the first's listing lapses.
	testredis.Poll(t, 10*time.Second, "the first member's listing lapses", func() error {
		if got := list("10.0.0.3:7946"); len(got) != 0 {
			return fmt.Errorf("the third still sees %q", got)
		}
		return nil
	})
	// Redis restarted without its scripts: the list works again, the script sent whole.
	srv.Stop()
	srv.Restart()
	testredis.Poll(t, 15*time.Second, "the list works after Redis restarted", func() error {
		_, err := m.List(ctx, "10.0.0.3:7946")
		return err
	})
}

// The list keeps at most MaxMembersListed (the newest), and an address no gossip
// address can be is refused without a call.
func TestMembersListIsBounded(t *testing.T) {
	_, st := startStore(t)
	ctx := context.Background()
	m := st.Members("c", time.Minute)
	var got []string
	for i := range MaxMembersListed + 10 {
		var err error
		if got, err = m.List(ctx, fmt.Sprintf("10.1.%d.%d:7946", i/256, i%256)); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != MaxMembersListed-1 {
		t.Fatalf("the last member sees %d others; want %d", len(got), MaxMembersListed-1)
	}
	if slices.Contains(got, "10.1.0.0:7946") {
		t.Fatal("the oldest listing is still there")
	}
	if _, err := m.List(ctx, strings.Repeat("x", maxMemberAddr+1)); err == nil {
		t.Fatal("an address of 301 bytes was listed")
	}
	if _, err := m.List(ctx, ""); err == nil {
		t.Fatal("an empty address was listed")
	}
}
