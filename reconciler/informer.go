package reconciler

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// informerRetry is how often an informer made by NewInformer tries its
// list or watch again while the API server is unavailable.
const informerRetry = time.Second

// NewInformer is a cache.Options.NewInformer (client-go's
// NewSharedIndexInformer otherwise) for informers that are current again
// about a second after an API server outage. An informer's reflector backs
// off when its list or watch fails: 800 ms doubling to between 30 and 60
// s, reset only after two minutes without a failure, and not configurable
// through controller-runtime. After an outage with a few restarts its
// informers learn of the objects created and changed in the meantime up
// to a minute late, and nothing reconciles them before they do (make
// chaos scenario 2: new WebApps first reconciled 41 s after the last
// restart). With NewInformer, a list or watch that fails because the API
// server is unavailable (IsAPIServerUnavailable) is tried again every
// second inside the call, until it succeeds or the informer stops, so the
// reflector never sees the failure and never backs off; any other error
// reaches it as before. Pair it with OutageRecovery, which re-runs the
// passes the outage failed. CacheOptions sets it.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(outageListerWatcher{toolscache.ToListerWatcherWithContext(lw)}, obj, resync, indexers)
}

// outageListerWatcher waits out an unavailable API server in its calls.
type outageListerWatcher struct {
	lw toolscache.ListerWatcherWithContext
}

func (o outageListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return o.ListWithContext(context.Background(), opts)
}

func (o outageListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return o.WatchWithContext(context.Background(), opts)
}

func (o outageListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return untilAvailable(ctx, func() (runtime.Object, error) { return o.lw.ListWithContext(ctx, opts) })
}

func (o outageListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return untilAvailable(ctx, func() (watch.Interface, error) { return o.lw.WatchWithContext(ctx, opts) })
}

// untilAvailable calls call until it returns something other than the API
// server's unavailability, or ctx ends (then its last answer).
func untilAvailable[R any](ctx context.Context, call func() (R, error)) (R, error) {
	for {
		r, err := call()
		if err == nil || !IsAPIServerUnavailable(err) {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, err
		case <-time.After(informerRetry):
		}
	}
}
