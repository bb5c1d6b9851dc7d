package reconciler_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// newInformerCurrent is the bound under test below. It is made of
// NewInformer's longest wait between two tries (1.5 times informerRetry:
// 1.5 s), and a margin of 18.5 s for the list, the watch and the Widget's
// event on a loaded machine; it stays under the 25.6 s the reflector
// waits at least after outageFailures failures, so an informer left to the
// reflector's backoff still fails the test.
const (
	outageFailures     = 6
	newInformerCurrent = 20 * time.Second
)

// A manager's cache reaches the API server through a proxy the test takes
// down until the Widget informer's list or watch has failed six times,
// which puts client-go's reflector 25.6 to 51.2 s away from its next try
// (800 ms doubling, jitter up to as much again). With
// reconciler.NewInformer the informer waits the outage out inside the call
// instead, and holds a Widget created once the proxy is back within
// newInformerCurrent.
func TestNewInformerIsCurrentSoonAfterAnOutage(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	proxy := startProxy(t, env.Config.Host)
	var failures atomic.Int32
	mgr, err := ctrl.NewManager(proxy.config(), ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{NewInformer: func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			if _, ok := obj.(*testv1.Widget); ok {
				lw = countFailures{toolscache.ToListerWatcherWithContext(lw), &failures}
			}
			return reconciler.NewInformer(lw, obj, resync, idx)
		}}})
	require.NoError(t, err)
	ctx := testenv.RunManager(t, mgr)
	seen := func(name string) bool {
		return mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &testv1.Widget{}) == nil
	}
	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: ns}}))
	require.Eventually(t, func() bool { return seen("before") }, time.Minute, 10*time.Millisecond, "the cache never held a Widget through the proxy")

	proxy.down()
	// Six failures take NewInformer six seconds or so, and the reflector
	// alone its backoffs (0.8 + 1.6 + ... + 12.8 s, up to twice that with
	// the jitter) and the failing calls: more than a minute was seen. A
	// safety net, so that such an informer fails the bound below, which
	// says why.
	require.Eventually(t, func() bool { return failures.Load() >= outageFailures }, 3*time.Minute, 10*time.Millisecond,
		"the Widget informer's list or watch did not fail %d times with the API server unreachable", outageFailures)
	proxy.up()
	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: ns}}))
	require.Eventually(t, func() bool { return seen("after") }, newInformerCurrent, 10*time.Millisecond,
		"the cache did not hold a Widget created after the outage within %v: its informer is backing off", newInformerCurrent)
}

// countFailures counts the failed lists and watches of a ListerWatcher.
type countFailures struct {
	lw       toolscache.ListerWatcherWithContext
	failures *atomic.Int32
}

func (c countFailures) List(opts metav1.ListOptions) (runtime.Object, error) {
	return c.ListWithContext(context.Background(), opts)
}

func (c countFailures) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return c.WatchWithContext(context.Background(), opts)
}

func (c countFailures) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	o, err := c.lw.ListWithContext(ctx, opts)
	if err != nil {
		c.failures.Add(1)
	}
	return o, err
}

func (c countFailures) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := c.lw.WatchWithContext(ctx, opts)
	if err != nil {
		c.failures.Add(1)
	}
	return w, err
}
