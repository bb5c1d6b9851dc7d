package reconciler

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
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
	// The two gauges below are what an alert needs and a counter cannot
	// give: a terminal error is counted once (controller-runtime does not
	// retry it), so "errors in the last N minutes" forgets a Stalled object
	// after N minutes and keeps alerting N minutes after it was fixed. A
	// gauge of the objects in the state is 1 exactly while one is.
	stalledObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reconcilekit_stalled_objects",
		Help: "Live objects whose last pass left Stalled=True (a terminal error: they wait for a human or a spec change), by controller.",
	}, []string{"controller"})
	cleanupOverdueObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reconcilekit_cleanup_overdue_objects",
		Help: "Deleting objects whose cleanup has not finished CleanupDeadline after their deletion, by controller.",
	}, []string{"controller"})
	// A pass that made no mutating request found nothing to do (or could
	// not do it); many of them against few changes is a self-triggered
	// loop or wake-ups worth filtering.
	noopPasses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcilekit_noop_passes_total",
		Help: "Reconcile passes that made no mutating request, by controller.",
	}, []string{"controller"})
	skippedWakeups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcilekit_skipped_wakeups_total",
		Help: "Watch events dropped because the pass they would start can find nothing to do, by controller and cause " +
			"(own-write: the event of a write the kit made; rollout-progress: an owned object's rollout the owner waits on is still in progress, held back for at most one pass per RolloutProgressInterval).",
	}, []string{"controller", "cause"})
	// What the passes wrote, and what the comparison spared: an apply that
	// found the live object matching sends nothing.
	applies = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcilekit_applies_total",
		Help: "Owned objects applied with Scope.Apply, by controller, kind and result " +
			"(created, updated, unchanged: the live object already matched and nothing was sent).",
	}, []string{"controller", "kind", "result"})
	statusWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcilekit_status_writes_total",
		Help: "Status writes of the reconciled objects, by controller: a pass writes status only when it changed.",
	}, []string{"controller"})
)

func init() {
	metrics.Registry.MustRegister(stepDuration, stepErrors, mutatingRequests, stalledObjects, cleanupOverdueObjects, noopPasses, skippedWakeups,
		applies, statusWrites)
}

// objectSet counts the objects in one state for a gauge: membership is by
// key, so an object seen in the state by many passes counts once, and one
// that leaves it (or is gone) stops counting.
type objectSet struct {
	mu    sync.Mutex
	keys  map[types.NamespacedName]struct{}
	gauge prometheus.Gauge
}

// newObjectSet sets the gauge to 0 at once: the series exists from the
// start, so an alert or dashboard sees 0, not "no data".
func newObjectSet(g prometheus.Gauge) *objectSet {
	g.Set(0)
	return &objectSet{keys: map[types.NamespacedName]struct{}{}, gauge: g}
}

func (s *objectSet) set(key types.NamespacedName, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in {
		s.keys[key] = struct{}{}
	} else {
		delete(s.keys, key)
	}
	s.gauge.Set(float64(len(s.keys)))
}
