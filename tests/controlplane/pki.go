package main

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

// pki is what the API server and its clients need: one CA signing the serving certificate and
// the client certificates (the API server trusts it with --client-ca-file), and the key pair
// that signs and verifies ServiceAccount tokens.
type pki struct {
	dir                 string
	ca, caKey           string
	serving, servingKey string
	admin, adminKey     string
	saKey, saPub        string
	caCert              *x509.Certificate
	caSigner            *ecdsa.PrivateKey
}

// The names a pod reaches the API server by, and the loopback the tests use.
var servingNames = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local"}
var servingIPs = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}

func newPKI(dir string) (*pki, error) {
	p := &pki{dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "controlplane-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	p.caCert, _ = x509.ParseCertificate(der)
	p.caSigner = key
	if p.ca, p.caKey, err = p.write("ca", der, key); err != nil {
		return nil, err
	}
	if p.serving, p.servingKey, err = p.issue("apiserver", "kube-apiserver", nil, false); err != nil {
		return nil, err
	}
	// what kubeadm's admin.conf holds: a member of system:masters
	if p.admin, p.adminKey, err = p.issue("admin", "kubernetes-admin", []string{"system:masters"}, true); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	p.saKey = filepath.Join(dir, "sa.key")
	p.saPub = filepath.Join(dir, "sa.pub")
	keyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.saKey, "EC PRIVATE KEY", keyDER); err != nil {
		return nil, err
	}
	if err := writePEM(p.saPub, "PUBLIC KEY", pubDER); err != nil {
		return nil, err
	}
	return p, nil
}

// issue signs a serving certificate (client false) or a client certificate whose common name
// and organizations are the user and groups the API server sees.
func (p *pki) issue(stem, commonName string, organizations []string, client bool) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return "", "", err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName, Organization: organizations},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		template.DNSNames, template.IPAddresses = servingNames, servingIPs
	}
	der, err := x509.CreateCertificate(rand.Reader, template, p.caCert, &key.PublicKey, p.caSigner)
	if err != nil {
		return "", "", err
	}
	return p.write(stem, der, key)
}

func (p *pki) write(stem string, der []byte, key *ecdsa.PrivateKey) (string, string, error) {
	certPath, keyPath := filepath.Join(p.dir, stem+".crt"), filepath.Join(p.dir, stem+".key")
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER); err != nil {
		return "", "", err
	}
	return certPath, keyPath, nil
}

func writePEM(path, kind string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
