package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/reconcilekit/reconcilekit/webhookkit/certs"
)

// The Rotator's permissions, each limited by name (resourceNames) to the
// objects it owns: its Secret, in the operator's namespace only, and the two
// webhook configurations whose CA bundles it injects. A compromised
// operator can neither read nor rewrite any other Secret or webhook
// configuration.
//
// The names are the flag defaults below: the names config/ gives the
// webhook configurations (after its namePrefix "webapp-"), and the Secret
// the Rotator creates. Passing other names, or renaming the objects in
// config/, needs the same change here (then `make manifests`), or the
// Rotator is denied.
//
// list and watch match resourceNames because the Rotator's informers ask
// for one object each (field selector metadata.name=<name>). create cannot
// be limited by name: the apiserver authorizes a POST before the new
// object's name is known. The Rotator creates its Secret when it is
// missing; create lets no one read, overwrite or delete another Secret.
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;list;watch;update,resourceNames=webapp-webhook-server-cert,namespace=webapp-system
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=create,namespace=webapp-system
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch;update,resourceNames=webapp-mutating-webhook-configuration
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;update,resourceNames=webapp-validating-webhook-configuration
//
// The WebApp CRD, for the caBundle of its conversion webhook: the Rotator
// reads it and writes it with update (as it does the webhook
// configurations), limited by name to this one CRD. No other CRD can be read
// or changed.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;update,resourceNames=webapps.apps.example.com

// certFlags choose how the webhook server gets its serving certificate:
// self-managed (the default: webhookkit/certs issues, stores, injects into
// the webhook configurations and the CRD's conversion webhook, and rotates
// it) or external (files mounted from cert-manager or anything
// else, reloaded by controller-runtime's certwatcher).
type certFlags struct {
	mode, dir            string
	service, secret      string
	mutating, validating string
	conversionCRD        string
	extraIPs, extraDNS   string
	rotator              *certs.Rotator
}

func (c *certFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.mode, "webhook-cert-mode", "self-managed", "Webhook serving certificate: self-managed or external.")
	fs.StringVar(&c.dir, "webhook-cert-dir", "", "external mode: directory holding tls.crt and tls.key.")
	fs.StringVar(&c.service, "webhook-service", "webapp-webhook-service", "self-managed mode: the webhook Service the certificate is for.")
	fs.StringVar(&c.secret, "webhook-cert-secret", "webapp-webhook-server-cert", "self-managed mode: the Secret holding the CA and certificate. The generated role allows only the default name (RBAC markers in certs.go).")
	fs.StringVar(&c.mutating, "mutating-webhook-configuration", "webapp-mutating-webhook-configuration", "self-managed mode: configuration to inject the CA bundle into. The generated role allows only the default name (RBAC markers in certs.go).")
	fs.StringVar(&c.validating, "validating-webhook-configuration", "webapp-validating-webhook-configuration", "self-managed mode: configuration to inject the CA bundle into. The generated role allows only the default name (RBAC markers in certs.go).")
	fs.StringVar(&c.conversionCRD, "conversion-crd", webappCRD, "self-managed mode: CRD whose conversion webhook gets the CA bundle; \"\" for none. The generated role allows only the default name (RBAC markers in certs.go).")
	fs.StringVar(&c.extraIPs, "webhook-cert-ips", "", "self-managed mode: comma-separated extra IP SANs, e.g. 127.0.0.1 for a host-process operator.")
	fs.StringVar(&c.extraDNS, "webhook-cert-dns-names", "", "self-managed mode: comma-separated extra DNS SANs.")
}

// tlsOpts builds the Rotator (self-managed mode) before the manager, whose
// webhook server must take its certificates from it.
func (c *certFlags) tlsOpts(namespace string) ([]func(*tls.Config), error) {
	switch c.mode {
	case "external":
		if c.dir == "" {
			return nil, fmt.Errorf("--webhook-cert-dir is required with --webhook-cert-mode=external")
		}
		return nil, nil
	case "self-managed":
	default:
		return nil, fmt.Errorf("--webhook-cert-mode: %q is neither self-managed nor external", c.mode)
	}
	var ips []net.IP
	for _, s := range splitList(c.extraIPs) {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("--webhook-cert-ips: %q is not an IP address", s)
		}
		ips = append(ips, ip)
	}
	rot, err := certs.New(certs.Options{
		Namespace: namespace, SecretName: c.secret, ServiceName: c.service,
		ExtraDNSNames: splitList(c.extraDNS), ExtraIPs: ips,
		MutatingWebhookConfigurations:   []string{c.mutating},
		ValidatingWebhookConfigurations: []string{c.validating},
		ConversionCRDs:                  splitList(c.conversionCRD),
	})
	if err != nil {
		return nil, err
	}
	c.rotator = rot
	return []func(*tls.Config){rot.TLSOpt}, nil
}

// setup starts the Rotator's loops and makes /readyz fail until a valid
// certificate is served, in either mode.
func (c *certFlags) setup(mgr ctrl.Manager) error {
	if c.rotator != nil {
		if err := c.rotator.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	return mgr.AddReadyzCheck("webhook-certs", certs.ReadyCheck(mgr.GetWebhookServer()))
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
