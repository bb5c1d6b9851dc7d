package sharding

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics, registered in controller-runtime's registry so the manager's
// metrics endpoint serves them. Every replica exports its own view; the
// scrape adds the pod.
var (
	rangesOwned = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reconcilekit_shard_ranges_owned",
		Help: "Ranges this replica owns (takes new passes for), by group.",
	}, []string{"group"})
	liveMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reconcilekit_shard_members",
		Help: "Live replicas this replica sees in its group, itself included while its lease is fresh, by group.",
	}, []string{"group"})
	handoffs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "reconcilekit_shard_handoffs_total",
		Help: "Ranges this replica acquired (began owning) or released (ended its last pass of and unclaimed), by group and direction.",
	}, []string{"group", "direction"})
	serverFiltering = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "reconcilekit_shard_server_filtering",
		Help: "1 when the API server filters this replica's selected cache by shard (feature gate ShardedListAndWatch), " +
			"0 when the cache drops the other ranges' objects as they arrive, by group. Absent without a selected cache.",
	}, []string{"group"})
	handoffWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "reconcilekit_shard_handoff_wait_seconds",
		Help: "Time from a range being assigned to this replica until it owned it: the previous owner's drain, or its " +
			"lease expiry when it died, plus one claim round. About the time the range had no owner.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 10),
	}, []string{"group"})
)

func init() {
	metrics.Registry.MustRegister(rangesOwned, liveMembers, handoffs, handoffWait, serverFiltering)
}
