package kubebed

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

// pki is the key material the API server needs, written under a bed's
// directory: a self-signed serving certificate for the loopback address
// (which clients trust as their CA) and the key pair that signs and
// verifies service-account tokens.
type pki struct {
	certFile, keyFile    string
	saKeyFile, saPubFile string
	caPEM                []byte
}

// newPKI generates the bed's keys into dir.
func newPKI(dir string, ip net.IP) (*pki, error) {
	p := &pki{
		certFile:  filepath.Join(dir, "serving.crt"),
		keyFile:   filepath.Join(dir, "serving.key"),
		saKeyFile: filepath.Join(dir, "sa.key"),
		saPubFile: filepath.Join(dir, "sa.pub"),
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the serving key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubebed-apiserver"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{ip},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeKey(p.keyFile, key); err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.certFile, p.caPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing the serving certificate: %w", err)
	}
	return p, p.writeServiceAccountKeys()
}

// writeServiceAccountKeys generates the token-signing key pair.
func (p *pki) writeServiceAccountKeys() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the service-account key: %w", err)
	}
	if err := writeKey(p.saKeyFile, key); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encoding the service-account public key: %w", err)
	}
	if err := os.WriteFile(p.saPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return fmt.Errorf("writing the service-account public key: %w", err)
	}
	return nil
}

// writeKey writes key as a PEM EC private key to path, readable by the
// owner only.
func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}
