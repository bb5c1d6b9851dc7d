package reconciler

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics, registered in controller-runtime's registry so the manager's
// metrics endpoint serves them next to controller_runtime_reconcile_*.
var (
	stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "reconcilekit_step_duration_seconds",
		Help: "Duration of one reconcile step, by controller and step.",
	}, []string{"controller", "step"})
	stepErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcilekit_step_errors_total",
		Help: "Reconcile step failures, by controller, step and type (transient, terminal, panic).",
	}, []string{"controller", "step", "type"})
	mutatingRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "reconcilekit_mutating_requests_per_reconcile",
		Help: "Mutating API requests (create, update, patch, apply, delete) made by one reconcile pass. " +
			"A converged operator's resyncs sit in the 0 bucket.",
		Buckets: []float64{0, 1, 2, 3, 5, 8, 13, 21},
	}, []string{"controller"})
)

func init() {
	metrics.Registry.MustRegister(stepDuration, stepErrors, mutatingRequests)
}
