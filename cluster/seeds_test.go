package cluster

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
)

// fixedLookup answers from a table, and fails for names it does not hold as DNS does.
func fixedLookup(table map[string][]string) LookupHost {
	return func(_ context.Context, host string) ([]string, error) {
		if ips, ok := table[host]; ok {
			return ips, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
}

func TestResolveSeedsExpandsNamesToEveryRecord(t *testing.T) {
	lookup := fixedLookup(map[string][]string{
		"peers.test": {"10.1.0.1", "10.1.0.2", "10.1.0.3"},
		"one.test":   {"10.1.0.2"}, // also a record of peers.test: listed once
	})
	got, err := resolveSeeds(context.Background(), lookup, []string{"10.9.9.9:1", "peers.test:7946", "one.test:7946", "[fd00::1]:7946"}, 7000)
	want := []string{"10.9.9.9:1", "10.1.0.1:7946", "10.1.0.2:7946", "10.1.0.3:7946", "[fd00::1]:7946"}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %v, %v; want %v", got, err, want)
	}
}

// IP seeds are never looked up: a cluster given only addresses depends on no DNS.
func TestResolveSeedsLooksUpNoIP(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]string, error) {
		t.Errorf("looked up %q", host)
		return nil, errors.New("no lookups here")
	}
	got, err := resolveSeeds(context.Background(), lookup, []string{"127.0.0.1:7946", "::1"}, 7000)
	if err != nil || !slices.Equal(got, []string{"127.0.0.1:7946", "[::1]:7000"}) {
		t.Fatalf("got %v, %v; want 127.0.0.1:7946 and [::1]:7000 (a seed without port takes the gossip port)", got, err)
	}
}

// A name that does not resolve (its pods are not up yet) is reported, naming it, and
// the other seeds are still returned.
func TestResolveSeedsReportsNamesWithoutAddress(t *testing.T) {
	lookup := fixedLookup(map[string][]string{"up.test": {"10.1.0.1"}, "empty.test": {}})
	got, err := resolveSeeds(context.Background(), lookup, []string{"later.test:7946", "up.test:7946", "empty.test:7946"}, 7000)
	if !slices.Equal(got, []string{"10.1.0.1:7946"}) {
		t.Fatalf("got %v; want the address of up.test", got)
	}
	if err == nil || !strings.Contains(err.Error(), "later.test") || !strings.Contains(err.Error(), "empty.test") {
		t.Fatalf("got error %v; want one naming later.test and empty.test", err)
	}
}

// The system's resolver, through /etc/hosts: localhost is a loopback address on every
// machine, whatever else (::1) it also lists.
func TestResolveSeedsWithTheSystemResolver(t *testing.T) {
	got, err := resolveSeeds(context.Background(), defaultLookup, []string{"localhost:7946"}, 7000)
	if err != nil || !slices.Contains(got, "127.0.0.1:7946") {
		t.Fatalf("got %v, %v; want 127.0.0.1:7946 among them", got, err)
	}
	for _, a := range got {
		host, port, _ := net.SplitHostPort(a)
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || port != "7946" {
			t.Errorf("localhost:7946 gave %s; want loopback addresses on port 7946", a)
		}
	}
}

func TestPreferFamilyKeepsOwnFamily(t *testing.T) {
	mixed := []string{"10.1.0.1:7946", "[fd00::1]:7946", "10.1.0.2:7946"}
	if got := preferFamily(mixed, "10.1.0.9:7946"); !slices.Equal(got, []string{"10.1.0.1:7946", "10.1.0.2:7946"}) {
		t.Errorf("IPv4 member: got %v; want the IPv4 addresses", got)
	}
	if got := preferFamily(mixed, "[fd00::9]:7946"); !slices.Equal(got, []string{"[fd00::1]:7946"}) {
		t.Errorf("IPv6 member: got %v; want the IPv6 address", got)
	}
	v6 := []string{"[fd00::1]:7946"}
	if got := preferFamily(v6, "10.1.0.9:7946"); !slices.Equal(got, v6) {
		t.Errorf("no address of the member's family: got %v; want them all", got)
	}
}
