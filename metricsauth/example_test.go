package metricsauth_test

import (
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/metricsauth"
)

// A manager whose metrics only a ServiceAccount allowed to GET /metrics may
// scrape, over HTTPS, as kubebuilder scaffolds it with controller-runtime's
// filter.
func Example() {
	_ = ctrl.Options{
		Metrics: metricsserver.Options{
			BindAddress:    ":8443",
			SecureServing:  true,
			FilterProvider: metricsauth.FilterProvider,
		},
	}
}
