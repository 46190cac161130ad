// Package certtest makes certificate authorities and the certificates they sign, as PEM
// files, for tests of mutual TLS between nodes and of TLS on the client ports.
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TB is what certtest needs of its caller: a testing.TB, or a tool's stand-in that
// turns Fatal into an error (tools/benchharness).
type TB interface {
	Helper()
	Fatal(args ...any)
}

// CA is a certificate authority of a test.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is the CA certificate's PEM file (what --tls-ca takes).
	File string
}

// Files are one node's PEM files.
type Files struct {
	Cert, Key, CA string
}

// NewCA makes a CA named name, its certificate written in dir.
func NewCA(tb TB, dir, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	tmpl := template(tb, name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, File: filepath.Join(dir, name+"-ca.pem")}
	writePEM(tb, ca.File, "CERTIFICATE", der)
	return ca
}

// Issue writes a certificate for name, signed by ca, and its key in dir (for 127.0.0.1
// and localhost, for use as a server and as a client).
func (ca *CA) Issue(tb TB, dir, name string) Files {
	tb.Helper()
	return ca.issue(tb, dir, name, template(tb, name))
}

// IssueExpired is Issue for a certificate that expired an hour ago (valid for a day
// before that), for tests that it is refused.
func (ca *CA) IssueExpired(tb TB, dir, name string) Files {
	tb.Helper()
	tmpl := template(tb, name)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-25*time.Hour), time.Now().Add(-time.Hour)
	return ca.issue(tb, dir, name, tmpl)
}

// Pool is a pool holding the CA's certificate, for a Go client's RootCAs.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

func (ca *CA) issue(tb TB, dir, name string, tmpl *x509.Certificate) Files {
	tb.Helper()
	key := newKey(tb)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	f := Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem"), CA: ca.File}
	writePEM(tb, f.Cert, "CERTIFICATE", der)
	writePEM(tb, f.Key, "PRIVATE KEY", keyDER)
	return f
}

func newKey(tb TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return key
}

func template(tb TB, name string) *x509.Certificate {
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour)}
}

func writePEM(tb TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// ServerFiles makes a CA named name in dir and a certificate it signs for 127.0.0.1 and
// localhost, for tools that run outside a test (benchmarks): the CA's pool, for a Go
// client's RootCAs, and the files.
func ServerFiles(dir, name string) (f Files, pool *x509.CertPool, err error) {
	defer func() {
		if r := recover(); r != nil {
			failed, ok := r.(toolFailure)
			if !ok {
				panic(r)
			}
			err = failed.err
		}
	}()
	ca := NewCA(toolTB{}, dir, name)
	return ca.Issue(toolTB{}, dir, name+"-server"), ca.Pool(), nil
}

// toolTB is ServerFiles's TB: its Fatal panics with a toolFailure, which ServerFiles
// turns back into an error.
type toolTB struct{}

type toolFailure struct{ err error }

func (toolTB) Helper()           {}
func (toolTB) Fatal(args ...any) { panic(toolFailure{fmt.Errorf("certtest: %s", fmt.Sprint(args...))}) }
