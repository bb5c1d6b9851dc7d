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

func init() {
	metrics.Registry.MustRegister(servedExpiry)
}
