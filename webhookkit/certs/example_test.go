package certs_test

import (
	"crypto/tls"
	"fmt"
	"net"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/reconcilekit/reconcilekit/webhookkit/certs"
)

// Self-managed certificates: the Rotator must be built before the manager so
// that the webhook server takes its certificates from it.
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
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		WebhookServer: webhook.NewServer(webhook.Options{TLSOpts: []func(*tls.Config){rot.TLSOpt}}),
	})
	if err == nil {
		err = rot.SetupWithManager(mgr)
	}
	if err == nil {
		err = mgr.AddReadyzCheck("webhook-certs", certs.ReadyCheck(mgr.GetWebhookServer()))
	}
	fmt.Println(err)
}

// External certificates (cert-manager): controller-runtime's certwatcher
// reloads the mounted files; the kit only adds the readiness check.
func ExampleReadyCheck() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		WebhookServer: webhook.NewServer(webhook.Options{CertDir: "/etc/webhook/certs"}),
	})
	if err == nil {
		err = mgr.AddReadyzCheck("webhook-certs", certs.ReadyCheck(mgr.GetWebhookServer()))
	}
	fmt.Println(err)
}
