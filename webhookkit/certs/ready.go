package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// ReadyCheck returns a readiness check for the manager
// (mgr.AddReadyzCheck("webhook-certs", certs.ReadyCheck(mgr.GetWebhookServer())))
// that fails until the webhook server is started and presents a certificate
// that is currently valid. It works the same in both modes: with a [Rotator]
// (no certificate until the Secret is loaded) and with externally mounted
// certificates (cert-manager: certwatcher reloads the files, the check sees
// whatever is served now).
//
// Why not just server.StartedChecker()? controller-runtime's
// DefaultServer.StartedChecker already dials the server's listener over TLS,
// so it fails while no certificate can be served (a Rotator that has not
// loaded the Secret yet fails the handshake). But it skips verification and
// discards the peer certificate: an expired certificate (a Rotator whose
// leader cannot renew, an issuer that stopped renewing) keeps it healthy
// while the apiserver rejects every call. ReadyCheck adds exactly that
// check, the served leaf's validity period, and does not repeat
// StartedChecker's handshake: StartedChecker gates the check only until it
// first succeeds (a DefaultServer never becomes un-started), after which
// ReadyCheck's own handshake is the only one per probe.
//
// Caveats:
//   - For servers other than controller-runtime's *webhook.DefaultServer only
//     the server's StartedChecker is consulted (the address is unknown).
//   - It does not verify the chain: the kit cannot know which CA bundle the
//     apiserver uses; it checks that a certificate is served and is within
//     its validity period.
//   - A [Rotator]'s missing injection target does not make a replica
//     unready: it serves every configuration that exists, and leaving the
//     webhook Service would fail those too. The gauge
//     reconcilekit_webhook_ca_injection_target_missing reports it.
func ReadyCheck(server webhook.Server) healthz.Checker {
	startedChecker := server.StartedChecker()
	ds, ok := server.(*webhook.DefaultServer)
	if !ok {
		return startedChecker
	}
	var started atomic.Bool
	return func(req *http.Request) error {
		if !started.Load() {
			if err := startedChecker(req); err != nil {
				return err
			}
			started.Store(true)
		}
		// Options are read only after StartedChecker succeeded once: the
		// server set its defaults before reporting itself started, and does
		// not change them afterwards.
		if ds.Options.Port < 0 {
			return nil
		}
		return checkServed(net.JoinHostPort(ds.Options.Host, strconv.Itoa(ds.Options.Port)), time.Now())
	}
}

// checkServed performs a TLS handshake with addr and reports whether the
// served leaf certificate is valid at now.
func checkServed(addr string, now time.Time) error {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	// InsecureSkipVerify: only the served certificate's dates are
	// inspected; no data is exchanged over this connection.
	conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // see above
	if err != nil {
		return fmt.Errorf("webhook server %s serves no certificate: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()
	peer := conn.ConnectionState().PeerCertificates
	if len(peer) == 0 {
		return errors.New("webhook server presented no certificate")
	}
	if leaf := peer[0]; now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return fmt.Errorf("webhook server certificate (serial %s) is valid from %s to %s, not now",
			leaf.SerialNumber, leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
	}
	return nil
}
