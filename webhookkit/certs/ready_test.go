package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// servingPair returns a key pair for 127.0.0.1 valid from notBefore to
// notAfter (backdated by clockSkew, as every certificate the kit issues).
func servingPair(t *testing.T, notBefore, notAfter time.Time) *tls.Certificate {
	t.Helper()
	ca, caKey, err := newCA("test", notBefore, notAfter)
	require.NoError(t, err)
	certPEM, keyPEM, err := newServingCert(ca, caKey, nil, []net.IP{net.IPv4(127, 0, 0, 1)}, notBefore, notAfter)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return &pair
}

// TestReadyCheckAddsValidityToStartedChecker shows why ReadyCheck exists next
// to controller-runtime's StartedChecker: both fail before the server starts
// and while no certificate can be served, but only ReadyCheck fails while an
// expired certificate is served. After the first success ReadyCheck costs one
// TLS handshake per probe (StartedChecker's is not repeated).
func TestReadyCheckAddsValidityToStartedChecker(t *testing.T) {
	var (
		served     atomic.Pointer[tls.Certificate]
		handshakes atomic.Int64
	)
	getCert := func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		handshakes.Add(1)
		if c := served.Load(); c != nil {
			return c, nil
		}
		return nil, errors.New("no certificate yet")
	}
	srv := webhook.NewServer(webhook.Options{
		Host: "127.0.0.1", Port: freePort(t),
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.GetCertificate = getCert }},
	})
	started, ready := srv.StartedChecker(), ReadyCheck(srv)

	assert.ErrorContains(t, started(nil), "not been started")
	assert.ErrorContains(t, ready(nil), "not been started")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	require.Eventually(t, func() bool {
		_ = started(nil)
		return handshakes.Load() > 0
	}, 10*time.Second, 10*time.Millisecond, "the listener answers handshakes")

	// Started, but no certificate: both fail (the handshake does).
	assert.ErrorContains(t, started(nil), "not reachable")
	assert.ErrorContains(t, ready(nil), "not reachable")

	// A valid certificate: both pass, ReadyCheck with one handshake a probe.
	now := time.Now()
	served.Store(servingPair(t, now, now.Add(time.Hour)))
	require.NoError(t, started(nil))
	require.NoError(t, ready(nil))
	before := handshakes.Load()
	require.NoError(t, ready(nil))
	require.NoError(t, ready(nil))
	assert.Equal(t, int64(2), handshakes.Load()-before, "one handshake per ReadyCheck probe")

	// An expired certificate: StartedChecker still passes, ReadyCheck fails.
	served.Store(servingPair(t, now.Add(-2*time.Hour), now.Add(-time.Hour)))
	assert.NoError(t, started(nil), "StartedChecker does not look at the certificate")
	assert.ErrorContains(t, ready(nil), "not now")

	// A certificate not yet valid (beyond the backdating): likewise.
	served.Store(servingPair(t, now.Add(time.Hour), now.Add(2*time.Hour)))
	assert.NoError(t, started(nil))
	assert.ErrorContains(t, ready(nil), "not now")

	// Renewed: ready again.
	served.Store(servingPair(t, now, now.Add(time.Hour)))
	assert.NoError(t, ready(nil))
}

// A disabled webhook server (Port -1) is ready once the manager starts it.
func TestReadyCheckDisabledServer(t *testing.T) {
	srv := webhook.NewServer(webhook.Options{Port: -1})
	ready := ReadyCheck(srv)
	assert.NoError(t, ready(nil))
	require.NoError(t, srv.Start(context.Background()))
	assert.NoError(t, ready(nil))
}
