package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
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
// It performs a TLS handshake with the server's own listener, so it checks
// what clients actually receive rather than what should be on disk.
//
// Caveats:
//   - For servers other than controller-runtime's *webhook.DefaultServer only
//     the server's StartedChecker is consulted (the address is unknown).
//   - It does not verify the chain: the kit cannot know which CA bundle the
//     apiserver uses; it checks that a certificate is served and is within
//     its validity period.
func ReadyCheck(server webhook.Server) healthz.Checker {
	started := server.StartedChecker()
	return func(req *http.Request) error {
		if err := started(req); err != nil {
			return err
		}
		ds, ok := server.(*webhook.DefaultServer)
		if !ok || ds.Options.Port < 0 {
			return nil
		}
		// Options are read only after StartedChecker succeeded: the server
		// set its defaults before reporting itself started.
		addr := net.JoinHostPort(ds.Options.Host, strconv.Itoa(ds.Options.Port))
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
		now := time.Now()
		if leaf := peer[0]; now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
			return fmt.Errorf("webhook server certificate (serial %s) is valid from %s to %s, not now",
				leaf.SerialNumber, leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
		}
		return nil
	}
}
