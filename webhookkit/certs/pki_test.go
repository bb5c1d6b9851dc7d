package certs

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// The PEM helpers are client-go's (util/cert, util/keyutil); these pin what
// the kit relies on: every key encoding the kit or cert-manager writes parses,
// including the PKCS #8 keys older kit versions wrote, and an absent ca.crt
// is no problem while a present but useless one is.
func TestParseKeyPEM(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	pkcs8 := func(k any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		require.NoError(t, err)
		return der
	}
	sec1, err := x509.MarshalECPrivateKey(ec)
	require.NoError(t, err)
	params := pemBlock("EC PARAMETERS", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07})

	encoded, err := encodeKeyPEM(ec)
	require.NoError(t, err)
	block, _ := pem.Decode(encoded)
	require.NotNil(t, block)
	assert.Equal(t, "EC PRIVATE KEY", block.Type, "keyutil.MarshalPrivateKeyToPEM writes SEC 1")

	for name, in := range map[string][]byte{
		"kit encoding (SEC 1)":            encoded,
		"older kit encoding (PKCS #8 EC)": pemBlock("PRIVATE KEY", pkcs8(ec)),
		"openssl ecparam -genkey":         append(params, pemBlock("EC PRIVATE KEY", sec1)...),
		"PKCS #1 RSA":                     pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey)),
		"PKCS #8 RSA":                     pemBlock("PRIVATE KEY", pkcs8(rsaKey)),
		"PKCS #8 Ed25519":                 pemBlock("PRIVATE KEY", pkcs8(ed)),
	} {
		t.Run(name, func(t *testing.T) {
			k, err := parseKeyPEM(in)
			require.NoError(t, err)
			assert.NotNil(t, k.Public())
		})
	}
	for name, in := range map[string][]byte{
		"empty":      nil,
		"not PEM":    []byte("y"),
		"a cert":     pemBlock("CERTIFICATE", []byte{1, 2, 3}),
		"bad DER":    pemBlock("EC PRIVATE KEY", []byte{1, 2, 3}),
		"mislabeled": pemBlock("RSA PRIVATE KEY", sec1),
	} {
		t.Run("rejects "+name, func(t *testing.T) {
			_, err := parseKeyPEM(in)
			assert.Error(t, err)
		})
	}
}

func TestParseCertsPEM(t *testing.T) {
	now := time.Now()
	ca1, _, err := newCA("a", now, now.Add(time.Hour))
	require.NoError(t, err)
	ca2, _, err := newCA("b", now, now.Add(time.Hour))
	require.NoError(t, err)
	bundle := encodeBundle([]*x509.Certificate{ca1, ca2})
	assert.Equal(t, append(pemBlock("CERTIFICATE", ca1.Raw), pemBlock("CERTIFICATE", ca2.Raw)...), bundle)

	got, err := parseCertsPEM(bundle)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.True(t, got[0].Equal(ca1) && got[1].Equal(ca2), "order kept")

	for _, empty := range [][]byte{nil, {}, []byte("\n")} {
		got, err := parseCertsPEM(empty)
		assert.NoError(t, err, "an empty bundle is no error")
		assert.Empty(t, got)
	}
	_, err = parseCertsPEM([]byte("x"))
	assert.Error(t, err, "non-empty input without a certificate")
	_, err = parseCertsPEM(pemBlock("CERTIFICATE", []byte{1, 2, 3}))
	assert.Error(t, err)
}

func TestParseMaterialNamesTheKey(t *testing.T) {
	_, problems := parseMaterial(map[string][]byte{})
	assert.Empty(t, problems, "a new Secret has nothing to repair")

	_, problems = parseMaterial(map[string][]byte{keyCA: []byte("x"), keyCAKey: []byte("y")})
	require.Len(t, problems, 2)
	assert.ErrorContains(t, problems[0], "ca.crt: ")
	assert.ErrorContains(t, problems[1], "ca.key: ")
}
