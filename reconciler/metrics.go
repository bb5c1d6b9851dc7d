package reconciler

import (
	"context"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// countingClient counts the mutating requests of one pass.
type countingClient struct {
	client.Client
	n *atomic.Int64
}

func newCountingClient(c client.Client) *countingClient {
	return &countingClient{Client: c, n: new(atomic.Int64)}
}

func (c *countingClient) mutations() int64 { return c.n.Load() }

func (c *countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.n.Add(1)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return &countingWriter{SubResourceWriter: c.Client.Status(), n: c.n}
}

func (c *countingClient) SubResource(sub string) client.SubResourceClient {
	sr := c.Client.SubResource(sub)
	return countingSubResource{SubResourceReader: sr, countingWriter: &countingWriter{SubResourceWriter: sr, n: c.n}}
}

type countingWriter struct {
	client.SubResourceWriter
	n *atomic.Int64
}

func (w *countingWriter) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	w.n.Add(1)
	return w.SubResourceWriter.Create(ctx, obj, sub, opts...)
}

func (w *countingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	w.n.Add(1)
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

func (w *countingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.n.Add(1)
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (w *countingWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	w.n.Add(1)
	return w.SubResourceWriter.Apply(ctx, obj, opts...)
}

// countingSubResource reads through and counts writes like countingWriter.
type countingSubResource struct {
	client.SubResourceReader
	*countingWriter
}
