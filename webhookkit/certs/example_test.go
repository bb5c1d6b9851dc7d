package certs_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/reconcilekit/reconcilekit/webhookkit/certs"
)

// Self-managed certificates: the Rotator must be built before the manager so
// that the webhook server takes its certificates from it. Until the started
// manager has loaded the Secret the server has no certificate to present, so
// every TLS handshake fails, and the readiness check fails with it. New
// refuses options that cannot work: a certificate without a name, or a
// rotation that would let the old certificate expire.
func ExampleNew() {
	rot, err := certs.New(certs.Options{
		Namespace: "widgets-system", SecretName: "webhook-tls", ServiceName: "widgets-webhook",
		ExtraIPs:                        []net.IP{net.IPv4(127, 0, 0, 1)}, // for `make run` against a kind cluster
		MutatingWebhookConfigurations:   []string{"widgets-mutating"},
		ValidatingWebhookConfigurations: []string{"widgets-validating"},
	})
	if err != nil {
		panic(err)
	}
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // ctrl.GetConfigOrDie() in main; never contacted here
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer: webhook.NewServer(webhook.Options{TLSOpts: []func(*tls.Config){rot.TLSOpt}}),
	})
	if err != nil {
		panic(err)
	}
	ready := certs.ReadyCheck(mgr.GetWebhookServer())
	err = errors.Join(rot.SetupWithManager(mgr), mgr.AddReadyzCheck("webhook-certs", ready))
	fmt.Println("setup:", err)
	// mgr.Start(ctrl.SetupSignalHandler()) in main.

	// A handshake asks the Rotator for the certificate (TLSOpt set the
	// server's GetCertificate), and /readyz runs the check:
	var server tls.Config
	rot.TLSOpt(&server)
	_, err = server.GetCertificate(&tls.ClientHelloInfo{ServerName: "widgets-webhook.widgets-system.svc"})
	fmt.Println("handshake:", err)
	fmt.Println("ready:", ready(nil))

	_, err = certs.New(certs.Options{Namespace: "widgets-system", SecretName: "webhook-tls"})
	fmt.Println(err)
	_, err = certs.New(certs.Options{Namespace: "widgets-system", SecretName: "webhook-tls", ServiceName: "widgets-webhook",
		Validity: 24 * time.Hour, RenewBefore: time.Hour, TrustPropagation: time.Hour})
	fmt.Println(err)
	// Output:
	// setup: <nil>
	// handshake: webhookkit/certs: no serving certificate loaded yet from Secret widgets-system/webhook-tls
	// ready: webhook server has not been started yet
	// webhookkit/certs: set Options.ServiceName, ExtraDNSNames or ExtraIPs: the certificate needs a name
	// webhookkit/certs: Options.TrustPropagation 1h0m0s must be at most RenewBefore/2 (30m0s) so the old certificate is replaced before it expires
}

// External certificates (cert-manager): controller-runtime's certwatcher
// reloads the mounted files; the kit only adds the readiness check, which
// keeps the manager unready until the webhook server has started and
// presents a currently valid certificate.
func ExampleReadyCheck() {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // ctrl.GetConfigOrDie() in main; never contacted here
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer: webhook.NewServer(webhook.Options{CertDir: "/etc/webhook/certs"}),
	})
	if err != nil {
		panic(err)
	}
	ready := certs.ReadyCheck(mgr.GetWebhookServer())
	fmt.Println("setup:", mgr.AddReadyzCheck("webhook-certs", ready))
	// mgr.Start(ctrl.SetupSignalHandler()) in main.

	// The check as /readyz runs it before the manager has started the server:
	fmt.Println("ready:", ready(nil))
	// Output:
	// setup: <nil>
	// ready: webhook server has not been started yet
}
