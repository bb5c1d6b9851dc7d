package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// value sums the samples of a counter, gauge or untyped family.
func value(fams map[string]*dto.MetricFamily, name string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	sum := 0.0
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

// apiserverVerbs maps apiserver_request_total's verb label to Key verbs.
var apiserverVerbs = map[string]string{
	"GET": "get", "LIST": "list", "WATCH": "watch", "POST": "create", "PUT": "update",
	"PATCH": "patch", "APPLY": "apply", "DELETE": "delete", "DELETECOLLECTION": "deletecollection",
}

// ServerCounts is apiserver_request_total summed over codes, scopes and
// versions, by Key.
type ServerCounts map[Key]int

// Sub returns s minus before.
func (s ServerCounts) Sub(before ServerCounts) ServerCounts {
	out := ServerCounts{}
	for k, n := range s {
		if d := n - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// ScrapeAPIServer reads apiserver_request_total from the apiserver's
// /metrics endpoint (the caller needs get on the /metrics non-resource
// URL; an admin kubeconfig has it).
func ScrapeAPIServer(ctx context.Context, rc rest.Interface) (ServerCounts, error) {
	body, err := rc.Get().AbsPath("/metrics").Do(ctx).Raw()
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's /metrics: %w", err)
	}
	fams, err := parseMetrics(strings.NewReader(string(body)))
	if err != nil {
		return nil, fmt.Errorf("parsing the apiserver's /metrics: %w", err)
	}
	f := fams["apiserver_request_total"]
	if f == nil {
		return nil, fmt.Errorf("the apiserver's /metrics has no apiserver_request_total")
	}
	out := ServerCounts{}
	for _, m := range f.GetMetric() {
		verb, ok := apiserverVerbs[label(m, "verb")]
		if !ok || label(m, "resource") == "" || label(m, "dry_run") != "" {
			continue
		}
		k := Key{Verb: verb, Group: label(m, "group"), Resource: label(m, "resource"), Subresource: label(m, "subresource")}
		out[k] += int(m.GetCounter().GetValue())
	}
	return out, nil
}

// OperatorStats are the figures read from an operator's controller-runtime
// metrics endpoint.
type OperatorStats struct {
	// Reconciles is controller_runtime_reconcile_total, all controllers and
	// results.
	Reconciles float64
	// Busy is workqueue_depth plus controller_runtime_active_workers: 0
	// when nothing is queued or running.
	Busy float64
	// GCCycles counts completed GC cycles; HeapLive is the heap marked live
	// by the last one (runtime/metrics /gc/heap/live:bytes), that is the
	// heap right after a GC.
	GCCycles float64
	HeapLive float64
	// HeapAllocs is the bytes allocated on the heap so far
	// (/gc/heap/allocs:bytes): over a window, what the operator's work
	// allocated, which its GC then had to collect.
	HeapAllocs float64
	// RangesOwned is reconcilekit_shard_ranges_owned: the hash ranges a
	// sharded replica owns (0 unsharded).
	RangesOwned float64
	// ReconcileTime is controller_runtime_reconcile_time_seconds, summed
	// over the operator's controllers.
	ReconcileTime Histogram
}

// Histogram is a Prometheus histogram: cumulative counts by upper bound
// (+Inf included).
type Histogram struct {
	Bounds []float64
	Counts []float64
}

func histogram(fams map[string]*dto.MetricFamily, name string) Histogram {
	var h Histogram
	f := fams[name]
	if f == nil {
		return h
	}
	for _, m := range f.GetMetric() {
		hm := m.GetHistogram()
		if hm == nil {
			continue
		}
		if h.Bounds == nil {
			for _, b := range hm.GetBucket() {
				h.Bounds = append(h.Bounds, b.GetUpperBound())
			}
			h.Bounds = append(h.Bounds, math.Inf(1))
			h.Counts = make([]float64, len(h.Bounds))
		}
		if len(hm.GetBucket())+1 != len(h.Bounds) {
			continue // different buckets: not summable (never the case for one metric)
		}
		for i, b := range hm.GetBucket() {
			h.Counts[i] += float64(b.GetCumulativeCount())
		}
		h.Counts[len(h.Counts)-1] += float64(hm.GetSampleCount())
	}
	return h
}

// Sub returns h minus before (the observations in between).
func (h Histogram) Sub(before Histogram) Histogram {
	out := Histogram{Bounds: h.Bounds, Counts: make([]float64, len(h.Counts))}
	for i := range h.Counts {
		out.Counts[i] = h.Counts[i]
		if i < len(before.Counts) {
			out.Counts[i] -= before.Counts[i]
		}
	}
	return out
}

// Count is the number of observations.
func (h Histogram) Count() float64 {
	if len(h.Counts) == 0 {
		return 0
	}
	return h.Counts[len(h.Counts)-1]
}

// Quantile estimates the q-quantile as Prometheus' histogram_quantile
// does: linear interpolation inside the bucket that holds it (the lowest
// bucket from 0; a quantile in +Inf is the highest finite bound). NaN
// without observations.
func (h Histogram) Quantile(q float64) float64 {
	total := h.Count()
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	for i, c := range h.Counts {
		if c < rank {
			continue
		}
		if math.IsInf(h.Bounds[i], 1) {
			if i == 0 {
				return math.NaN()
			}
			return h.Bounds[i-1]
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = h.Bounds[i-1], h.Counts[i-1]
		}
		if c == below {
			return h.Bounds[i]
		}
		return lo + (h.Bounds[i]-lo)*(rank-below)/(c-below)
	}
	return h.Bounds[len(h.Bounds)-1]
}

func scrapeOperator(ctx context.Context, url string) (OperatorStats, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return OperatorStats{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return OperatorStats{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return OperatorStats{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	fams, err := parseMetrics(resp.Body)
	if err != nil {
		return OperatorStats{}, fmt.Errorf("parsing %s: %w", url, err)
	}
	if fams["go_gc_heap_live_bytes"] == nil {
		return OperatorStats{}, fmt.Errorf("%s has no go_gc_heap_live_bytes (controller-runtime's Go collector)", url)
	}
	return OperatorStats{
		Reconciles:  value(fams, "controller_runtime_reconcile_total"),
		Busy:        value(fams, "workqueue_depth") + value(fams, "controller_runtime_active_workers"),
		GCCycles:    value(fams, "go_gc_cycles_total_gc_cycles_total"),
		HeapLive:    value(fams, "go_gc_heap_live_bytes"),
		HeapAllocs:  value(fams, "go_gc_heap_allocs_bytes_total"),
		RangesOwned: value(fams, "reconcilekit_shard_ranges_owned"),

		ReconcileTime: histogram(fams, "controller_runtime_reconcile_time_seconds"),
	}, nil
}
