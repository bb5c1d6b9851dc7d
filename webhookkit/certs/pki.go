package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Secret keys. tls.crt and tls.key are those of a kubernetes.io/tls Secret;
// ca.crt is the conventional CA bundle key (also used by cert-manager); ca.key
// holds the private key of the CA that signs new serving certificates.
const (
	keyCert   = corev1.TLSCertKey       // "tls.crt"
	keyKey    = corev1.TLSPrivateKeyKey // "tls.key"
	keyCA     = "ca.crt"
	keyCAKey  = "ca.key"
	clockSkew = 5 * time.Minute // NotBefore is backdated by this to tolerate skewed clocks.
)

// material is the parsed content of the certificate Secret. Any part may be
// missing or unusable; the raw bytes are kept so that an unchanged Secret is
// rewritten byte for byte (no spurious writes).
type material struct {
	caPEM    []byte              // ca.crt: trust bundle, the signer first
	cas      []*x509.Certificate // parsed ca.crt, in order
	caKeyPEM []byte              // ca.key
	signer   *x509.Certificate   // the CA in cas matching ca.key, or nil
	caKey    crypto.Signer       // parsed ca.key, nil unless signer != nil
	certPEM  []byte              // tls.crt
	keyPEM   []byte              // tls.key
	cert     *tls.Certificate    // parsed key pair (Leaf set), or nil
}

// parseMaterial parses Secret data leniently: unusable parts are left nil and
// the returned problems say why.
func parseMaterial(data map[string][]byte) (*material, []error) {
	m := &material{caPEM: data[keyCA], caKeyPEM: data[keyCAKey], certPEM: data[keyCert], keyPEM: data[keyKey]}
	var problems []error
	cas, err := parseCertsPEM(m.caPEM)
	if err != nil {
		problems = append(problems, fmt.Errorf("%s: %w", keyCA, err))
	}
	m.cas = cas
	if len(m.caKeyPEM) > 0 {
		key, err := parseKeyPEM(m.caKeyPEM)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", keyCAKey, err))
		} else {
			for _, ca := range cas {
				if publicKeysEqual(ca.PublicKey, key.Public()) {
					m.signer, m.caKey = ca, key
					break
				}
			}
			if m.signer == nil {
				problems = append(problems, fmt.Errorf("%s matches no certificate in %s", keyCAKey, keyCA))
			}
		}
	}
	if len(m.certPEM) > 0 || len(m.keyPEM) > 0 {
		pair, err := tls.X509KeyPair(m.certPEM, m.keyPEM)
		if err != nil {
			problems = append(problems, fmt.Errorf("%s/%s: %w", keyCert, keyKey, err))
		} else {
			m.cert = &pair
		}
	}
	return m, problems
}

// data returns the Secret data for m.
func (m *material) data() map[string][]byte {
	return map[string][]byte{keyCA: m.caPEM, keyCAKey: m.caKeyPEM, keyCert: m.certPEM, keyKey: m.keyPEM}
}

// equalData reports whether m's four keys equal those in data.
func (m *material) equalData(data map[string][]byte) bool {
	for k, v := range m.data() {
		if !bytes.Equal(v, data[k]) {
			return false
		}
	}
	return true
}

func (m *material) leaf() *x509.Certificate {
	if m == nil || m.cert == nil {
		return nil
	}
	return m.cert.Leaf
}

// parseCertsPEM returns the certificates in a PEM bundle. It is
// cert.ParseCertsPEM (client-go), except that empty input is no error: an
// absent ca.crt or an empty caBundle simply holds no certificates. Non-empty
// input without a certificate is an error; like upstream, only CERTIFICATE
// blocks without PEM headers count.
func parseCertsPEM(b []byte) ([]*x509.Certificate, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	return cert.ParseCertsPEM(b)
}

// parseKeyPEM parses a private key with keyutil.ParsePrivateKeyPEM
// (client-go): the first "PRIVATE KEY" (PKCS #8), "EC PRIVATE KEY" (SEC 1) or
// "RSA PRIVATE KEY" (PKCS #1) block, skipping others such as the
// "EC PARAMETERS" block that `openssl ecparam -genkey` writes first.
func parseKeyPEM(b []byte) (crypto.Signer, error) {
	k, err := keyutil.ParsePrivateKeyPEM(b)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// encodeBundle is cert.EncodeCertificates: one CERTIFICATE block per
// certificate, in order. Writing to a bytes.Buffer cannot fail.
func encodeBundle(cas []*x509.Certificate) []byte {
	b, _ := cert.EncodeCertificates(cas...)
	return b
}

// encodeKeyPEM is keyutil.MarshalPrivateKeyToPEM: SEC 1 "EC PRIVATE KEY" for
// the ECDSA keys the Rotator generates (what cert-manager and kubeadm write
// too). Keys written before by the kit (PKCS #8 "PRIVATE KEY") still parse,
// and an unchanged Secret is never re-encoded (material keeps its bytes).
func encodeKeyPEM(k crypto.Signer) ([]byte, error) {
	return keyutil.MarshalPrivateKeyToPEM(k)
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// newCA creates a self-signed ECDSA P-256 CA valid until notAfter.
func newCA(commonName string, now, notAfter time.Time) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", commonName, now.Unix())},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

// newServingCert creates an ECDSA P-256 serving key pair for dnsNames and ips,
// signed by ca, valid until notAfter. It returns PEM cert and key.
func newServingCert(ca *x509.Certificate, caKey crypto.Signer, dnsNames []string, ips []net.IP, now, notAfter time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating serving key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, nil, err
	}
	cn := "webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing serving certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeBundle([]*x509.Certificate{leaf}), keyPEM, nil
}

// namesMatch reports whether leaf carries exactly dnsNames and ips (in any
// order).
func namesMatch(leaf *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	if !sameStrings(leaf.DNSNames, dnsNames) {
		return false
	}
	a := make([]string, 0, len(leaf.IPAddresses))
	for _, ip := range leaf.IPAddresses {
		a = append(a, ip.String())
	}
	b := make([]string, 0, len(ips))
	for _, ip := range ips {
		b = append(b, ip.String())
	}
	return sameStrings(a, b)
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// signedBy reports whether leaf's signature verifies with any of cas.
func signedBy(leaf *x509.Certificate, cas ...*x509.Certificate) bool {
	for _, ca := range cas {
		if leaf.CheckSignatureFrom(ca) == nil {
			return true
		}
	}
	return false
}
