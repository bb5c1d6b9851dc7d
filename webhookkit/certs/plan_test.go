package certs

import (
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testRotator(t *testing.T, mutate func(*Options)) *Rotator {
	t.Helper()
	o := Options{
		Namespace: "sys", SecretName: "webhook-tls", ServiceName: "webhook",
		ExtraIPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Validity: 30 * time.Minute, RenewBefore: 10 * time.Minute, TrustPropagation: time.Minute,
	}
	if mutate != nil {
		mutate(&o)
	}
	r, err := New(o)
	require.NoError(t, err)
	return r
}

func never(*x509.Certificate) (time.Time, bool) { return time.Time{}, false }

func trustedAt(at time.Time) func(*x509.Certificate) (time.Time, bool) {
	return func(*x509.Certificate) (time.Time, bool) { return at, true }
}

// reparse round-trips m through Secret data, as the next pass would see it.
func reparse(t *testing.T, m *material) *material {
	t.Helper()
	out, problems := parseMaterial(m.data())
	require.Empty(t, problems)
	return out
}

func TestPlanBootstrap(t *testing.T) {
	r := testRotator(t, nil)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	m, wake, reasons, err := r.plan(t0, &material{}, false, never)
	require.NoError(t, err)
	assert.Len(t, reasons, 2, "a CA and a serving certificate")
	m = reparse(t, m)
	require.Len(t, m.cas, 1)
	require.NotNil(t, m.signer)
	leaf := m.leaf()
	require.NotNil(t, leaf)
	assert.ElementsMatch(t, []string{"webhook.sys.svc", "webhook.sys.svc.cluster.local"}, leaf.DNSNames)
	assert.True(t, leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)))
	assert.NoError(t, leaf.CheckSignatureFrom(m.signer))
	assert.False(t, leaf.NotAfter.After(m.signer.NotAfter), "leaf never outlives its CA")
	assert.Equal(t, t0.Add(30*time.Minute), m.signer.NotAfter)
	assert.Equal(t, t0.Add(20*time.Minute), wake, "renew when a third of the validity remains")

	// The leaf verifies for the service name against the bundle.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(m.caPEM)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "webhook.sys.svc", CurrentTime: t0})
	assert.NoError(t, err)

	// Idempotent: a second pass changes nothing, byte for byte.
	again, _, reasons, err := r.plan(t0.Add(time.Minute), m, false, trustedAt(t0))
	require.NoError(t, err)
	assert.Empty(t, reasons)
	assert.True(t, again.equalData(m.data()))
}

func TestPlanStagedRotation(t *testing.T) {
	r := testRotator(t, nil)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m0, _, _, err := r.plan(t0, &material{}, false, never)
	require.NoError(t, err)
	m0 = reparse(t, m0)

	// Inside the renewal window: a new CA joins the bundle in front, the old
	// CA stays, and the serving certificate is kept until the new CA has
	// been trusted for TrustPropagation.
	t1 := t0.Add(21 * time.Minute)
	m1, wake, reasons, err := r.plan(t1, m0, false, never)
	require.NoError(t, err)
	m1 = reparse(t, m1)
	assert.Len(t, reasons, 1)
	require.Len(t, m1.cas, 2)
	assert.Equal(t, m0.signer.Raw, m1.cas[1].Raw, "old CA still trusted")
	assert.Equal(t, m1.cas[0].Raw, m1.signer.Raw, "signer first")
	assert.Equal(t, m0.certPEM, m1.certPEM, "serving certificate kept while the new CA propagates")
	assert.Equal(t, t1.Add(time.Minute), wake)

	// Not yet propagated long enough: still kept.
	m2, wake, reasons, err := r.plan(t1.Add(30*time.Second), m1, false, trustedAt(t1))
	require.NoError(t, err)
	assert.Empty(t, reasons)
	assert.True(t, m2.equalData(m1.data()))
	assert.Equal(t, t1.Add(time.Minute), wake)

	// Propagated: a new serving certificate from the new CA; bundle unchanged.
	t3 := t1.Add(time.Minute)
	m3, wake, reasons, err := r.plan(t3, m1, false, trustedAt(t1))
	require.NoError(t, err)
	m3 = reparse(t, m3)
	assert.Len(t, reasons, 1)
	assert.Equal(t, m1.caPEM, m3.caPEM)
	assert.NotEqual(t, m1.certPEM, m3.certPEM)
	assert.NoError(t, m3.leaf().CheckSignatureFrom(m3.signer))
	assert.Equal(t, t0.Add(30*time.Minute), wake, "next event: the old CA expires and is pruned")

	// The old CA expires: pruned, nothing else changes.
	t4 := t0.Add(30 * time.Minute)
	m4, _, reasons, err := r.plan(t4, m3, false, trustedAt(t1))
	require.NoError(t, err)
	m4 = reparse(t, m4)
	assert.Len(t, reasons, 1)
	require.Len(t, m4.cas, 1)
	assert.Equal(t, m3.signer.Raw, m4.cas[0].Raw)
	assert.Equal(t, m3.certPEM, m4.certPEM)
}

func TestPlanForcedRotationKeepsServing(t *testing.T) {
	r := testRotator(t, nil)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m0, _, _, err := r.plan(t0, &material{}, false, never)
	require.NoError(t, err)
	m0 = reparse(t, m0)

	m1, _, _, err := r.plan(t0.Add(time.Minute), m0, true, never)
	require.NoError(t, err)
	m1 = reparse(t, m1)
	assert.Len(t, m1.cas, 2)
	assert.NotEqual(t, m0.signer.Raw, m1.signer.Raw)
	assert.Equal(t, m0.certPEM, m1.certPEM)
}

func TestPlanReplacesUnusableCertificateAtOnce(t *testing.T) {
	r := testRotator(t, nil)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m0, _, _, err := r.plan(t0, &material{}, false, never)
	require.NoError(t, err)
	m0 = reparse(t, m0)

	// The configured names changed: the certificate is reissued even though
	// the CA is not (yet) known to be trusted, since the old one is useless.
	r2 := testRotator(t, func(o *Options) { o.ExtraDNSNames = []string{"webhook.example.com"} })
	m1, _, _, err := r2.plan(t0.Add(time.Minute), m0, false, never)
	require.NoError(t, err)
	m1 = reparse(t, m1)
	assert.Equal(t, m0.caPEM, m1.caPEM, "same CA")
	assert.Contains(t, m1.leaf().DNSNames, "webhook.example.com")

	// Garbage in every key: start over.
	bad, problems := parseMaterial(map[string][]byte{keyCA: []byte("x"), keyCAKey: []byte("y"), keyCert: []byte("z"), keyKey: []byte("w")})
	assert.NotEmpty(t, problems)
	m2, _, reasons, err := r.plan(t0, bad, false, never)
	require.NoError(t, err)
	assert.Len(t, reasons, 2)
	assert.NotNil(t, reparse(t, m2).leaf())

	// An expired certificate is replaced at once.
	m3, _, _, err := r.plan(t0.Add(31*time.Minute), m0, false, never)
	require.NoError(t, err)
	m3 = reparse(t, m3)
	assert.Len(t, m3.cas, 1, "expired CA pruned, new one issued")
	assert.NoError(t, m3.leaf().CheckSignatureFrom(m3.signer))
}

func TestNewValidatesOptions(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no namespace", Options{SecretName: "s", ServiceName: "w"}, "Namespace and Options.SecretName are required"},
		{"no names", Options{Namespace: "n", SecretName: "s"}, "needs a name"},
		{"renew too late", Options{Namespace: "n", SecretName: "s", ServiceName: "w", Validity: time.Hour, RenewBefore: time.Hour}, "RenewBefore"},
		{"propagation too slow", Options{Namespace: "n", SecretName: "s", ServiceName: "w", Validity: time.Hour, RenewBefore: 10 * time.Minute, TrustPropagation: 6 * time.Minute}, "TrustPropagation"},
		{"negative", Options{Namespace: "n", SecretName: "s", ServiceName: "w", CheckInterval: -1}, "negative"},
		{"empty extra name", Options{Namespace: "n", SecretName: "s", ExtraDNSNames: []string{""}}, "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
	r, err := New(Options{Namespace: "n", SecretName: "s", ServiceName: "w"})
	require.NoError(t, err)
	assert.Equal(t, 90*24*time.Hour, r.opts.Validity)
	assert.Equal(t, 30*24*time.Hour, r.opts.RenewBefore)
	assert.Equal(t, 30*time.Second, r.opts.TrustPropagation)
	assert.Equal(t, time.Minute, r.opts.CheckInterval)
}
