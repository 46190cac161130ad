package peerauth

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// recheck is how often the certificate files are looked at for changes, at most.
const recheck = time.Second

// certSource holds the certificate and CA of the files, read again when a file's size
// or modification time changes, so operators rotate certificates by replacing files.
// A change that does not load (a half-written file) keeps the previous pair in use.
type certSource struct {
	certFile, keyFile, caFile string

	mu      sync.Mutex
	checked time.Time
	stamps  [3]stamp
	cert    *tls.Certificate
	pool    *x509.CertPool
}

type stamp struct {
	size int64
	mod  time.Time
}

func (s *certSource) current() (*tls.Certificate, *x509.CertPool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cert != nil && time.Since(s.checked) < recheck {
		return s.cert, s.pool, nil
	}
	s.checked = time.Now()
	stamps, err := s.stat()
	if err == nil && s.cert != nil && stamps == s.stamps {
		return s.cert, s.pool, nil
	}
	if err == nil {
		err = s.load(stamps)
	}
	if s.cert == nil {
		return nil, nil, err
	}
	return s.cert, s.pool, nil // the files are being replaced: keep the last good pair
}

func (s *certSource) stat() ([3]stamp, error) {
	var st [3]stamp
	for i, f := range []string{s.certFile, s.keyFile, s.caFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return st, fmt.Errorf("peerauth: %w", err)
		}
		st[i] = stamp{fi.Size(), fi.ModTime()}
	}
	return st, nil
}

func (s *certSource) load(stamps [3]stamp) error {
	cert, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		return fmt.Errorf("peerauth: --tls-cert/--tls-key: %w", err)
	}
	ca, err := os.ReadFile(s.caFile)
	if err != nil {
		return fmt.Errorf("peerauth: --tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return fmt.Errorf("peerauth: --tls-ca %s: no PEM certificate in it", s.caFile)
	}
	s.cert, s.pool, s.stamps = &cert, pool, stamps
	return nil
}
