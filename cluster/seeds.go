package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
)

// LookupHost resolves a host name to its addresses, one string per A or AAAA record,
// as (*net.Resolver).LookupHost does. Config.LookupHost takes one, so that tests can
// answer for names no DNS server knows.
type LookupHost func(ctx context.Context, host string) ([]string, error)

// resolveSeeds turns seeds into gossip addresses (ip:port): an IP is kept as it is,
// and a host name becomes one address per record it resolves to, every one with the
// seed's port (or defPort when the seed has none). That is what makes a Kubernetes
// headless Service name a seed list of its own: it has one A record per pod.
//
// The addresses come back in the seeds' order, without duplicates. err names each
// seed that gave no address (it did not resolve, or has no record); the others are
// still returned, so one missing name does not stop the join of the rest.
func resolveSeeds(ctx context.Context, lookup LookupHost, seeds []string, defPort int) ([]string, error) {
	var out []string
	var errs []error
	seen := make(map[string]bool)
	for _, s := range seeds {
		host, port, err := splitSeed(s, defPort)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ips := []string{host}
		if net.ParseIP(host) == nil {
			ips, err = lookup(ctx, host)
			if err == nil && len(ips) == 0 {
				err = errors.New("no address")
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("seed %q: %w", s, err))
				continue
			}
		}
		for _, ip := range ips {
			if a := net.JoinHostPort(ip, port); !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out, errors.Join(errs...)
}

// splitSeed splits host:port, or takes a seed without a port as a host on defPort
// (memberlist's rule: the port this member gossips on).
func splitSeed(s string, defPort int) (host, port string, err error) {
	host, port, err = net.SplitHostPort(s)
	if err != nil {
		host, port = s, strconv.Itoa(defPort)
	}
	if p, perr := strconv.ParseUint(port, 10, 16); host == "" || perr != nil || p == 0 {
		return "", "", fmt.Errorf("seed %q: want host:port", s)
	}
	return host, port, nil
}

// preferFamily keeps the addresses of self's IP family (IPv4 or IPv6), when there are
// any. A dual-stack name lists each member twice, once per family, while members
// advertise (and are listed under) one address: the other family's addresses would
// never match a member this node sees, so every re-join would contact every member
// again through them.
func preferFamily(addrs []string, self string) []string {
	v4 := isIPv4(self)
	var out []string
	for _, a := range addrs {
		if isIPv4(a) == v4 {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return addrs
	}
	return out
}

func isIPv4(hostport string) bool {
	host, _, _ := net.SplitHostPort(hostport)
	ip := net.ParseIP(host)
	return ip != nil && ip.To4() != nil
}
