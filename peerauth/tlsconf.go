package peerauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"time"

	"github.com/leapcount/leapcount/internal/certfiles"
)

// errForeignCertificate: the peer's certificate does not chain to the cluster CA.
var errForeignCertificate = errors.New("certificate not signed by the cluster CA (--tls-ca)")

// certificateConfigs are mutual TLS's: both ends present the certificate of the files
// and require one that chains to the CA. Host names are not checked (see the package
// documentation), which is why verification is done by hand (verifyChain) rather than
// by crypto/tls, which checks the name. The files are watched by src (read again when
// they change; Auth.Close stops that).
func certificateConfigs(certFile, keyFile, caFile string, log *slog.Logger) (server, client *tls.Config, src *certfiles.Source, err error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, nil, nil, fmt.Errorf("peerauth: mutual TLS needs --tls-cert, --tls-key and --tls-ca together")
	}
	src, err = certfiles.New(certfiles.Files{Cert: certFile, Key: keyFile, CA: caFile,
		CertFlag: "--tls-cert", KeyFlag: "--tls-key", CAFlag: "--tls-ca"}, log)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("peerauth: %w", err)
	}
	verify := func(cs tls.ConnectionState) error {
		return verifyChain(cs.PeerCertificates, src.Current().CAs)
	}
	server = &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return src.Current().Cert, nil
		},
		VerifyConnection: verify,
	}
	client = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // verifyChain does it, without the host name
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return src.Current().Cert, nil
		},
		VerifyConnection: verify,
	}
	return server, client, src, nil
}

// verifyChain checks that the peer's certificate chains to a CA of pool, for any use.
func verifyChain(certs []*x509.Certificate, pool *x509.CertPool) error {
	if len(certs) == 0 {
		return fmt.Errorf("%w: no certificate", errForeignCertificate)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	if err != nil {
		return fmt.Errorf("%w: %w", errForeignCertificate, err)
	}
	return nil
}

// throwawayConfigs are ModeKey's: TLS 1.3 for its encryption, with a self-signed
// certificate made now and never checked; the key proof authenticates.
func throwawayConfigs() (server, client *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "leapcount peer"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.AddDate(20, 0, 0)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	server = &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}}
	client = &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true} // the key proof authenticates
	return server, client, nil
}
