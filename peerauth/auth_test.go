package peerauth

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/certtest"
)

func key(b byte, n int) []byte { return []byte(strings.Repeat(string(b), n)) }

func newAuth(t *testing.T, cfg Config) *Auth {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// pair runs a handshake between a dialer and an acceptor over real loopback TCP, sends
// "ping" through the result, and returns both ends' errors.
func pair(t *testing.T, dialer, acceptor *Auth) (dialErr, acceptErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			accepted <- err
			return
		}
		c, err := acceptor.Server(nc)
		if err == nil {
			defer c.Close()
			var b [4]byte
			if _, err = io.ReadFull(c, b[:]); err == nil && string(b[:]) != "ping" {
				err = errors.New("got " + string(b[:]))
			}
		}
		accepted <- err
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, dialErr := dialer.Client(ctx, nc)
	if dialErr == nil {
		defer c.Close()
		_, dialErr = c.Write([]byte("ping"))
	}
	return dialErr, <-accepted
}

func wantOK(t *testing.T, dialer, acceptor *Auth) {
	t.Helper()
	if d, a := pair(t, dialer, acceptor); d != nil || a != nil {
		t.Fatalf("handshake failed: dialer %v; acceptor %v", d, a)
	}
}

// wantRefused checks that the acceptor refuses the dialer, saying why, and returns
// the dialer's error.
func wantRefused(t *testing.T, dialer, acceptor *Auth, why string) error {
	t.Helper()
	d, a := pair(t, dialer, acceptor)
	if !errors.Is(a, ErrRefused) || !strings.Contains(a.Error(), why) {
		t.Fatalf("acceptor: %v; want ErrRefused saying %q", a, why)
	}
	if d == nil {
		t.Fatal("dialer: no error; want one")
	}
	return d
}

func TestNoneModeChecksTheClusterName(t *testing.T) {
	a := newAuth(t, Config{Cluster: "prod"})
	if a.Mode() != ModeNone {
		t.Fatalf("mode %s; want %s", a.Mode(), ModeNone)
	}
	wantOK(t, a, a)
	d := wantRefused(t, newAuth(t, Config{Cluster: "staging"}), a, `cluster name "staging"`)
	if !errors.Is(d, ErrRefused) || !strings.Contains(d.Error(), "refused us") {
		t.Fatalf("dialer: %v; want the acceptor's refusal", d)
	}
}

// A peer of another cluster protocol version is refused, whichever end dials and in
// every mode, and each end logs it once, naming both versions.
func TestPeerOfAnotherProtocolVersionIsRefused(t *testing.T) {
	for _, cfg := range []Config{{Cluster: "c"}, {Cluster: "c", Keys: [][]byte{key('k', 32)}}} {
		var oldLog, newLog bytes.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&oldLog, nil))
		old := newAuth(t, cfg)
		cfg.Logger = slog.New(slog.NewTextHandler(&newLog, nil))
		next := newAuth(t, cfg)
		next.version = ProtocolVersion + 1
		for _, ends := range [][2]*Auth{{next, old}, {old, next}, {next, old}} {
			d, a := pair(t, ends[0], ends[1])
			for _, err := range []error{d, a} {
				var ve *VersionError
				if !errors.As(err, &ve) || !errors.Is(err, ErrRefused) {
					t.Fatalf("%s: got %v; want a VersionError (ErrRefused)", old.Mode(), err)
				}
			}
			for _, e := range []struct {
				err        error
				theirs, us uint8
			}{{d, ends[1].version, ends[0].version}, {a, ends[0].version, ends[1].version}} {
				want := fmt.Sprintf("cluster protocol version %d, this node speaks %d", e.theirs, e.us)
				if !strings.Contains(e.err.Error(), want) {
					t.Errorf("%s: got %q; want it to say %q", old.Mode(), e.err, want)
				}
			}
		}
		wantOK(t, old, newAuth(t, Config{Cluster: cfg.Cluster, Keys: cfg.Keys})) // the same version still gets in
		for _, l := range []struct {
			log        *bytes.Buffer
			theirs, us uint8
		}{{&oldLog, ProtocolVersion + 1, ProtocolVersion}, {&newLog, ProtocolVersion, ProtocolVersion + 1}} {
			want := fmt.Sprintf("refusing peer 127.0.0.1: cluster protocol version %d, this node speaks %d", l.theirs, l.us)
			if got := strings.Count(l.log.String(), want); got != 1 {
				t.Errorf("%s: %q logged %d times; want once (3 connections, one peer). Log:\n%s", old.Mode(), want, got, l.log)
			}
		}
	}
}

// The introduction of version 1 begins "LCPEER1"; a keyless hello of the empty cluster
// name that says another version is refused, naming both, and its peer told why.
func TestIntroductionBytes(t *testing.T) {
	a := newAuth(t, Config{})
	for _, tc := range []struct {
		hello string
		ok    bool
	}{{"LCPEER1\x01\x00\x00", true}, {"LCPEER2\x01\x00\x00", false}, {"LCPEER\x01\x01\x00\x00", false}} {
		srv, cli := net.Pipe()
		go cli.Write([]byte(tc.hello))
		answer := make(chan string, 1)
		go func() {
			b := make([]byte, 64)
			n, _ := io.ReadAtLeast(cli, b, len(magic)+3)
			answer <- string(b[:n])
		}()
		_, err := a.Server(srv)
		got := <-answer
		cli.Close()
		switch {
		case tc.ok && (err != nil || !strings.HasPrefix(got, "LCPEER1\x01")):
			t.Errorf("%q: %v, answered %q; want taken, and a hello of version 1", tc.hello, err, got)
		case !tc.ok && err == nil:
			t.Errorf("%q: taken; want refused", tc.hello)
		}
	}
	srv, cli := net.Pipe()
	go cli.Write([]byte("LCPEER2\x01\x00\x00"))
	refusal := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(cli)
		refusal <- string(b)
	}()
	_, err := a.Server(srv)
	if want := "cluster protocol version 2, this node speaks 1"; !strings.Contains(err.Error(), want) || !strings.Contains(<-refusal, want) {
		t.Fatalf("refused with %v; want the error and the refusal sent to say %q", err, want)
	}
}

func TestKeyMode(t *testing.T) {
	old, cur := key('o', 32), key('n', 16)
	a := newAuth(t, Config{Keys: [][]byte{old}, Cluster: "c"})
	if a.Mode() != ModeKey {
		t.Fatalf("mode %s; want %s", a.Mode(), ModeKey)
	}
	wantOK(t, a, newAuth(t, Config{Keys: [][]byte{old}, Cluster: "c"}))
	wantRefused(t, newAuth(t, Config{Keys: [][]byte{key('x', 32)}, Cluster: "c"}), a, "wrong cluster key")
	// A dialer without the key speaks no TLS: it never gets to say anything.
	if d, acc := pair(t, newAuth(t, Config{Cluster: "c"}), a); d == nil || acc == nil {
		t.Fatalf("a keyless dialer got in: dialer %v, acceptor %v", d, acc)
	}

	// Rotation in README's three steps. 1: the new key is added second; such nodes talk
	// with those that have only the old one, both ways.
	adding := newAuth(t, Config{Keys: [][]byte{old, cur}, Cluster: "c"})
	wantOK(t, adding, a)
	wantOK(t, a, adding)
	// 2: once every node has both, the new one is put first, node by node.
	rotating := newAuth(t, Config{Keys: [][]byte{cur, old}, Cluster: "c"})
	wantOK(t, rotating, adding)
	wantOK(t, adding, rotating)
	// 3: the old key is dropped; a node that still has only the old key is refused.
	rotated := newAuth(t, Config{Keys: [][]byte{cur}, Cluster: "c"})
	wantOK(t, rotated, rotating)
	wantOK(t, rotating, rotated)
	wantRefused(t, rotated, a, "wrong cluster key")
}

func TestBadKeysAreRefusedByNew(t *testing.T) {
	for _, n := range []int{0, 8, 17, 33} {
		if _, err := New(Config{Keys: [][]byte{key('k', n)}}); err == nil {
			t.Errorf("New accepted a key of %d bytes", n)
		}
	}
	if _, err := New(Config{Cluster: strings.Repeat("c", 256)}); err == nil {
		t.Error("New accepted a 256-byte cluster name")
	}
}

func TestCertificateMode(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "cluster")
	files := func(name string) Config {
		f := ca.Issue(t, dir, name)
		return Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA}
	}
	a, b := newAuth(t, files("a")), newAuth(t, files("b"))
	if a.Mode() != ModeCertificates {
		t.Fatalf("mode %s; want %s", a.Mode(), ModeCertificates)
	}
	wantOK(t, a, b)
	wantOK(t, b, a)

	other := certtest.NewCA(t, dir, "other")
	f := other.Issue(t, dir, "stranger")
	stranger := newAuth(t, Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: ca.File}) // trusts our CA
	if d, acc := pair(t, stranger, a); !errors.Is(acc, ErrRefused) || d == nil {
		t.Fatalf("a certificate of another CA got in: dialer %v, acceptor %v", d, acc)
	}
	// Key mode's TLS (no client certificate at all) is refused by mutual TLS.
	if d, acc := pair(t, newAuth(t, Config{Keys: [][]byte{key('k', 16)}}), a); d == nil || acc == nil {
		t.Fatalf("a dialer without a certificate got in: dialer %v, acceptor %v", d, acc)
	}
	if _, err := New(Config{CertFile: f.Cert, CAFile: ca.File}); err == nil {
		t.Fatal("New took --tls-cert and --tls-ca without --tls-key")
	}
}

// TestCertificatesRotateWithoutRestart replaces a node's files with ones of a new CA:
// it is refused by the old cluster and taken by the new one, without a new Auth.
func TestCertificatesRotateWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "old")
	f := ca.Issue(t, dir, "a")
	a := newAuth(t, Config{CertFile: f.Cert, KeyFile: f.Key, CAFile: f.CA})
	oldPeer := newAuth(t, func() Config {
		g := ca.Issue(t, dir, "b")
		return Config{CertFile: g.Cert, KeyFile: g.Key, CAFile: g.CA}
	}())
	wantOK(t, a, oldPeer)

	nca := certtest.NewCA(t, t.TempDir(), "new")
	g := nca.Issue(t, dir, "a2")
	newPeer := newAuth(t, func() Config {
		h := nca.Issue(t, dir, "c")
		return Config{CertFile: h.Cert, KeyFile: h.Key, CAFile: h.CA}
	}())
	for _, mv := range [][2]string{{g.Cert, f.Cert}, {g.Key, f.Key}, {nca.File, f.CA}} {
		b, err := os.ReadFile(mv[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(mv[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, acc := pair(t, newPeer, a)
		if d == nil && acc == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replaced files were not taken: dialer %v, acceptor %v", d, acc)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d, acc := pair(t, oldPeer, a); d == nil || acc == nil {
		t.Fatalf("a peer of the old CA still got in: dialer %v, acceptor %v", d, acc)
	}
}

// TestRelayedProofIsRefused: a man in the middle without the key terminates TLS with
// both ends and relays their introductions byte for byte. The proofs are bound to each
// TLS session, so the acceptor refuses.
func TestRelayedProofIsRefused(t *testing.T) {
	k := [][]byte{key('k', 32)}
	dialer, acceptor := newAuth(t, Config{Keys: k}), newAuth(t, Config{Keys: k})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mitm, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mitm.Close()
	accepted := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			_, err = acceptor.Server(nc)
		}
		accepted <- err
	}()
	go func() { // the relay: its own TLS towards each end, bytes copied between them
		in, err := mitm.Accept()
		if err != nil {
			return
		}
		mine := newAuth(t, Config{Keys: [][]byte{key('m', 32)}}) // any key: only its TLS is used
		up := tls.Server(in, mine.server)
		out, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		down := tls.Client(out, mine.client)
		go io.Copy(down, up)
		io.Copy(up, down)
	}()
	nc, err := net.Dial("tcp", mitm.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, derr := dialer.Client(context.Background(), nc)
	aerr := <-accepted
	if !errors.Is(aerr, ErrRefused) || derr == nil {
		t.Fatalf("the relayed handshake got in: dialer %v, acceptor %v", derr, aerr)
	}
}

// TestHandshakeCostsAnOutsiderLittle: garbage, silence and a huge claimed length each
// end the handshake (within its timeout for silence) without reading past the intro.
func TestHandshakeCostsAnOutsiderLittle(t *testing.T) {
	for _, tc := range []struct {
		name string
		send string
	}{
		{"garbage", "GET / HTTP/1.1\r\n\r\n"},
		{"silence", ""},
		{"rpc frame", "\xff\xff\xff\xff\x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAuth(t, Config{Cluster: "c", Timeout: 300 * time.Millisecond})
			srv, cli := net.Pipe()
			defer cli.Close()
			go cli.Write([]byte(tc.send))
			start := time.Now()
			if _, err := a.Server(srv); err == nil {
				t.Fatal("handshake succeeded")
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Fatalf("handshake took %v; want about its 300ms timeout at most", took)
			}
		})
	}
}
