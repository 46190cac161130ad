// Package certfiles keeps a TLS certificate, its key and (optionally) a CA bundle read
// from PEM files, and reads them again when the files change, so that certificates
// rotate without a restart: the cluster plane's (--tls-cert, package peerauth) and the
// client ports' (--client-tls-cert) alike.
//
// A Source loads the files once when made, then watches their directories (fsnotify):
// watching the directory, not the file, sees a file replaced by a rename and a
// Kubernetes Secret mount, whose files are links through a "..data" link that is
// swapped whole. Every second it also compares the files' sizes and times, for file
// systems whose changes fsnotify does not see (some network and container mounts).
// A change that does not load (a half-written file, a key that does not match the
// certificate) is logged and the pair in use stays: handshakes never see a broken one.
package certfiles

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Files names the PEM files of a Source, and the flags that set them (for errors).
type Files struct {
	Cert, Key string // required
	CA        string // optional: "" means no CA bundle (Pair.CAs is nil)
	// Flags name Cert, Key and CA in errors and logs, e.g. "--tls-cert".
	CertFlag, KeyFlag, CAFlag string
}

// Pair is one reading of the files.
type Pair struct {
	Cert *tls.Certificate
	CAs  *x509.CertPool // nil when Files.CA is ""
}

// Poll is how often the files' sizes and times are compared, besides fsnotify's events.
const Poll = time.Second

// settle is how long the files must be left alone after an event before they are
// read: a tool writes the certificate and then the key, and reading between the two
// would log a mismatch that fixes itself a moment later.
const settle = 50 * time.Millisecond

// Source holds the pair in use; Current is safe from any goroutine and never waits.
type Source struct {
	files Files
	log   *slog.Logger
	cur   atomic.Pointer[Pair]

	mu       sync.Mutex // guards what the reload loop and Reload share
	loaded   [32]byte   // digest of the bytes of the pair in use
	failed   [32]byte   // digest of the last bytes that did not load (logged once)
	reloaded atomic.Int64
	errs     atomic.Int64

	stop chan struct{}
	done chan struct{}
}

// New reads the files and starts watching them; its error names the flag of the
// file that is missing or wrong. Close stops the watching.
func New(files Files, log *slog.Logger) (*Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{files: files, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	raw, err := s.read()
	if err == nil {
		err = s.swap(raw)
	}
	if err != nil {
		return nil, err
	}
	w := s.watcher()
	go s.loop(w)
	return s, nil
}

// Current is the pair in use.
func (s *Source) Current() *Pair { return s.cur.Load() }

// Reloads is how many times the files were read again and a new pair taken.
func (s *Source) Reloads() int64 { return s.reloaded.Load() }

// Errors is how many changes of the files did not load (the pair in use stayed).
func (s *Source) Errors() int64 { return s.errs.Load() }

// Close stops watching the files; Current goes on answering the last pair.
func (s *Source) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// Reload reads the files now and takes them if they changed and load; it returns the
// load's error (the pair in use stays then). The watcher calls it; so may anyone.
func (s *Source) Reload() error {
	raw, err := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		if raw.digest() == s.loaded {
			return nil
		}
		err = s.swapLocked(raw)
	}
	if err != nil {
		s.noteFailure(raw.digest(), err)
		return err
	}
	s.reloaded.Add(1)
	s.log.Info("TLS files reloaded", "cert", s.files.Cert)
	return nil
}

// noteFailure counts and logs a change that did not load, once for the same bytes: the
// poll would otherwise log it every second until the files are fixed.
func (s *Source) noteFailure(digest [32]byte, err error) {
	if digest == s.failed {
		return
	}
	s.failed = digest
	s.errs.Add(1)
	s.log.Error("TLS files not reloaded: the certificate in use stays", "cert", s.files.Cert, "err", err)
}

// rawFiles is the bytes of the files, as read at once.
type rawFiles struct{ cert, key, ca []byte }

func (r rawFiles) digest() [32]byte {
	h := sha256.New()
	for _, b := range [][]byte{r.cert, r.key, r.ca} {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d
}

func (s *Source) read() (rawFiles, error) {
	var r rawFiles
	var err error
	if r.cert, err = os.ReadFile(s.files.Cert); err != nil {
		return r, fmt.Errorf("%s: %w", s.files.CertFlag, err)
	}
	if r.key, err = os.ReadFile(s.files.Key); err != nil {
		return r, fmt.Errorf("%s: %w", s.files.KeyFlag, err)
	}
	if s.files.CA != "" {
		if r.ca, err = os.ReadFile(s.files.CA); err != nil {
			return r, fmt.Errorf("%s: %w", s.files.CAFlag, err)
		}
	}
	return r, nil
}

func (s *Source) swap(raw rawFiles) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.swapLocked(raw)
}

// swapLocked parses raw and, if it is a good pair, makes it the one in use.
func (s *Source) swapLocked(raw rawFiles) error {
	cert, err := tls.X509KeyPair(raw.cert, raw.key)
	if err != nil {
		return fmt.Errorf("%s/%s: %w", s.files.CertFlag, s.files.KeyFlag, err)
	}
	p := &Pair{Cert: &cert}
	if s.files.CA != "" {
		p.CAs = x509.NewCertPool()
		if !p.CAs.AppendCertsFromPEM(raw.ca) {
			return fmt.Errorf("%s %s: no PEM certificate in it", s.files.CAFlag, s.files.CA)
		}
	}
	s.cur.Store(p)
	s.loaded = raw.digest()
	return nil
}

// watcher watches the files' directories; nil if fsnotify cannot (the poll remains).
func (s *Source) watcher() *fsnotify.Watcher {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		s.log.Warn("TLS files: no file notifications, looking for changes every second instead", "err", err)
		return nil
	}
	for _, dir := range s.dirs() {
		if err := w.Add(dir); err != nil {
			s.log.Warn("TLS files: cannot watch a directory, looking for changes every second instead", "dir", dir, "err", err)
		}
	}
	return w
}

// dirs are the directories of the files, each once.
func (s *Source) dirs() []string {
	var out []string
	for _, f := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if f == "" {
			continue
		}
		d := filepath.Dir(f)
		if !contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// loop reloads after fsnotify's events have settled, and on each poll whose file
// stamps differ from the last.
func (s *Source) loop(w *fsnotify.Watcher) {
	defer close(s.done)
	var events chan fsnotify.Event
	var errs chan error
	if w != nil {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	poll := time.NewTicker(Poll)
	defer poll.Stop()
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	stamps := s.stamps()
	for {
		select {
		case <-s.stop:
			return
		case <-events:
			quiet.Reset(settle)
		case err := <-errs:
			s.log.Warn("TLS files: file notification error", "err", err)
		case <-quiet.C:
			stamps = s.stamps()
			s.Reload()
		case <-poll.C:
			if st := s.stamps(); !bytes.Equal(st, stamps) {
				stamps = st
				s.Reload()
			}
		}
	}
}

// stamps are the files' sizes and modification times (links followed), or the error of
// the first that cannot be looked at.
func (s *Source) stamps() []byte {
	var b []byte
	for _, f := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if f == "" {
			continue
		}
		fi, err := os.Stat(f)
		if err != nil {
			return append(b, err.Error()...)
		}
		b = fmt.Appendf(b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return b
}
