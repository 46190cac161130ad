package certfiles

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leapcount/leapcount/internal/testkit/certtest"
	"github.com/leapcount/leapcount/internal/testkit/wait"
)

var flags = Files{CertFlag: "--c", KeyFlag: "--k", CAFlag: "--ca"}

func newSource(t *testing.T, f certtest.Files, withCA bool) *Source {
	t.Helper()
	files := flags
	files.Cert, files.Key = f.Cert, f.Key
	if withCA {
		files.CA = f.CA
	}
	s, err := New(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// serving is the certificate in use, as DER.
func serving(s *Source) []byte { return s.Current().Cert.Certificate[0] }

// replace writes the bytes of from over to the way tools do: a new file renamed over
// the old one.
func replace(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	tmp := to + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func TestReplacedFilesAreTaken(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "ca")
	f := ca.Issue(t, dir, "a")
	s := newSource(t, f, true)
	before := serving(s)
	g := ca.Issue(t, t.TempDir(), "b")
	replace(t, g.Cert, f.Cert)
	replace(t, g.Key, f.Key)
	wait.For(t, 10*time.Second, func() error {
		if bytes.Equal(serving(s), before) {
			return fmt.Errorf("still the old certificate after %d reloads, %d errors", s.Reloads(), s.Errors())
		}
		return nil
	})
	if s.Current().CAs == nil {
		t.Fatal("the CA bundle was lost in the reload")
	}
}

// TestKubernetesSecretSwapIsTaken lays the files out as a Secret volume does (each
// file a link through "..data", a link to a timestamped directory) and swaps
// "..data" whole, as the kubelet does on an update: no file named by the flags
// changes, only what their links lead to.
func TestKubernetesSecretSwapIsTaken(t *testing.T) {
	mount := t.TempDir()
	ca := certtest.NewCA(t, t.TempDir(), "ca")
	version := func(name string) {
		d := filepath.Join(mount, "..v_"+name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		f := ca.Issue(t, d, "tls")
		if err := os.Rename(f.Cert, filepath.Join(d, "tls.crt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(f.Key, filepath.Join(d, "tls.key")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..v_"+name, filepath.Join(mount, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(mount, "..data_tmp"), filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("1")
	for _, n := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", n), filepath.Join(mount, n)); err != nil {
			t.Fatal(err)
		}
	}
	s := newSource(t, certtest.Files{Cert: filepath.Join(mount, "tls.crt"), Key: filepath.Join(mount, "tls.key")}, false)
	before := serving(s)
	version("2")
	wait.For(t, 10*time.Second, func() error {
		if bytes.Equal(serving(s), before) {
			return fmt.Errorf("still the old certificate after %d reloads, %d errors", s.Reloads(), s.Errors())
		}
		return nil
	})
}

func TestBrokenChangeKeepsThePairInUse(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "ca")
	f := ca.Issue(t, dir, "a")
	s := newSource(t, f, true)
	before := serving(s)
	if err := os.WriteFile(f.Cert, []byte("-----BEGIN CERTIFICATE-----\nhalf"), 0o600); err != nil {
		t.Fatal(err)
	}
	wait.ForTrue(t, 10*time.Second, func() bool { return s.Errors() == 1 })
	if !bytes.Equal(serving(s), before) || s.Reloads() != 0 {
		t.Fatalf("a broken certificate file replaced the pair in use (%d reloads)", s.Reloads())
	}
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "--c/--k") {
		t.Fatalf("Reload of a broken file: %v; want an error naming the flags", err)
	}
	if s.Errors() != 1 {
		t.Fatalf("the same broken bytes counted %d times; want once", s.Errors())
	}
}

func TestNewNamesTheFlagOfABadFile(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, dir, "ca")
	f := ca.Issue(t, dir, "a")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		files Files
		want  string
	}{
		{Files{Cert: filepath.Join(dir, "missing.pem"), Key: f.Key}, "--c: open"},
		{Files{Cert: f.Cert, Key: filepath.Join(dir, "missing.pem")}, "--k: open"},
		{Files{Cert: f.Cert, Key: f.Key, CA: notPEM}, "--ca " + notPEM + ": no PEM certificate"},
		{Files{Cert: f.Cert, Key: ca.Issue(t, t.TempDir(), "b").Key}, "--c/--k: tls: private key does not match"},
	} {
		c.files.CertFlag, c.files.KeyFlag, c.files.CAFlag = flags.CertFlag, flags.KeyFlag, flags.CAFlag
		s, err := New(c.files, nil)
		if err == nil {
			s.Close()
			t.Fatalf("New(%+v) took it", c.files)
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Fatalf("New(%+v): %v; want %q", c.files, err, c.want)
		}
	}
}
