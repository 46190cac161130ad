package rlsapi

import (
	"strings"
	"testing"

	"github.com/leapcount/leapcount/limits"
)

// Counter keys are stable across releases (README, Counting): a cluster upgraded in
// place keeps its counts. These are the keys of the format's first release.
func TestCounterKeysAreStable(t *testing.T) {
	long := strings.Repeat("v", 300)
	for _, c := range []struct {
		domain  string
		entries []limits.Entry
		shared  []string
		limit   int
		want    string
	}{
		{"d", []limits.Entry{{Key: "user", Value: "u1"}}, nil, 0, "rls:d:user=u1"},
		{"envoy", []limits.Entry{{Key: "a", Value: "1"}, {Key: "b", Value: "x:y"}}, nil, 1, "rls:envoy:a=1,b=x%3Ay#1"},
		{"d", []limits.Entry{{Key: "path", Value: "/api/1"}}, []string{"/api/*"}, 0, "rls:d:path=/api/*"},
		{"d:1", []limits.Entry{{Key: "k=", Value: "a b%,#é"}}, nil, 2, "rls:d%3A1:k%3D=a%20b%25%2C%23%C3%A9#2"},
		{"d", []limits.Entry{{Key: "k", Value: long}}, nil, 0, "rls:h:817c1be04e510f9c"},
	} {
		if got := CounterKey(c.domain, c.entries, c.shared, c.limit, 256); got != c.want {
			t.Errorf("CounterKey(%q, %v, %v, %d) = %q; want %q", c.domain, c.entries, c.shared, c.limit, got, c.want)
		}
	}
}
