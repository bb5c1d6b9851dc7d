package certs

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// servedExpiry is when the certificate a Rotator serves expires, registered
// in controller-runtime's registry so the manager's metrics endpoint serves
// it. The Rotator renews RenewBefore ahead of that, so an alert on
// "expires within less than RenewBefore/2" means renewal has been failing
// for a while (no leader, RBAC, an invalid Secret the leader cannot fix) and
// admission will fail closed when it passes. Externally managed
// certificates are not covered: cert-manager exports
// certmanager_certificate_expiration_timestamp_seconds for those.
var servedExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "reconcilekit_webhook_certificate_expiration_timestamp_seconds",
	Help: "Expiry (Unix time) of the webhook serving certificate this replica serves, by Secret (namespace/name).",
}, []string{"secret"})

// missingTarget is 1 for each injection target (a webhook configuration or
// CRD named in Options) that the leader found missing at its last look, 0
// once it exists. A missing target does not hold up rotation; the gauge is
// for an alert on a misnamed or deleted configuration, whose webhooks the
// apiserver then does not call at all. Only the leader sets it.
var missingTarget = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "reconcilekit_webhook_ca_injection_target_missing",
	Help: "1 if the webhook configuration or CRD (kind, name) whose CA bundle the Rotator of a Secret (namespace/name) keeps did not exist at the leader's last check, else 0.",
}, []string{"secret", "kind", "name"})

func init() {
	metrics.Registry.MustRegister(servedExpiry, missingTarget)
}
