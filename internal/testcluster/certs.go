package testcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"
)

// Certs is a throwaway CA with certificates it signed for 127.0.0.1 (good
// for server and client auth), and the pool of an unrelated CA.
type Certs struct {
	CAPool  *x509.CertPool
	Server  tls.Certificate
	Client  tls.Certificate
	Foreign *x509.CertPool
}

// NewCerts makes a CA and two leaf certificates for loopback.
func NewCerts(t testing.TB) Certs {
	t.Helper()
	ca, caKey := newCA(t)
	other, _ := newCA(t)
	c := Certs{CAPool: x509.NewCertPool(), Foreign: x509.NewCertPool()}
	c.CAPool.AddCert(ca)
	c.Foreign.AddCert(other)
	c.Server = leafCert(t, ca, caKey, 2)
	c.Client = leafCert(t, ca, caKey, 3)
	return c
}

// PeerTLS is the mutual-TLS config every node of a test cluster uses.
func (c Certs) PeerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.Server}, RootCAs: c.CAPool, ClientCAs: c.CAPool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}

func newCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leasehold test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

func leafCert(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, serial int64) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leasehold"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
