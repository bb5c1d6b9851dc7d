package reconciler

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// informerRetry is how often, on average, an informer made by NewInformer
// tries its list or watch again while the API server is away.
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
// server is away (no connection, 503, 429, etcd unavailable) is tried
// again every second or so inside the call, with a log line, until it
// succeeds or the informer stops, so the reflector does not back off for
// it; any other error (TLS, DNS, credentials, a timeout, 403) reaches the
// reflector as before. Pair it with OutageRecovery, which re-runs the
// passes the outage failed. CacheOptions sets it.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	return toolscache.NewSharedIndexInformer(outageListerWatcher{toolscache.ToListerWatcherWithContext(lw), defaultRetrier()}, obj, resync, indexers)
}

// outageListerWatcher waits out an unavailable API server in its calls.
type outageListerWatcher struct {
	lw toolscache.ListerWatcherWithContext
	rt retrier
}

// retrier is what untilAvailable waits on and logs to: the real clock and
// informerLog for NewInformer, a fake clock and a captured log in tests.
type retrier struct {
	clock clock.Clock
	log   logr.Logger
}

func defaultRetrier() retrier { return retrier{clock: clock.RealClock{}, log: informerLog} }

func (o outageListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return o.ListWithContext(context.Background(), opts)
}

func (o outageListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return o.WatchWithContext(context.Background(), opts)
}

func (o outageListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return retryUntilAvailable(ctx, o.rt, func() (runtime.Object, error) { return o.lw.ListWithContext(ctx, opts) })
}

func (o outageListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return retryUntilAvailable(ctx, o.rt, func() (watch.Interface, error) { return o.lw.WatchWithContext(ctx, opts) })
}

// untilAvailable calls call until it returns something other than
// serverAway's errors, or ctx ends (then its last answer).
func untilAvailable[R any](ctx context.Context, call func() (R, error)) (R, error) {
	return retryUntilAvailable(ctx, defaultRetrier(), call)
}

// retryUntilAvailable is untilAvailable on rt's clock and log.
func retryUntilAvailable[R any](ctx context.Context, rt retrier, call func() (R, error)) (R, error) {
	for logged := false; ; {
		r, err := call()
		if err == nil || !serverAway(err) {
			return r, err
		}
		if !logged {
			rt.log.Info("API server unavailable; the informer's list or watch is tried again every second", "error", err.Error())
			logged = true
		}
		timer := rt.clock.NewTimer(informerRetry/2 + rand.N(informerRetry))
		select {
		case <-ctx.Done():
			timer.Stop()
			return r, err
		case <-timer.C():
		}
	}
}

// informerLog is where NewInformer's informers say they wait.
var informerLog = logf.Log.WithName("informer")

// serverAway reports whether err says the API server is not there to
// answer, for the moment: no connection (refused, reset, EOF), 503, 429 (a
// restarting server's answer while its watch cache initialises), etcd
// unavailable. Not a TLS, DNS or credential error, nor a timeout: those
// reach the reflector, which logs them and backs off.
func serverAway(err error) bool {
	switch {
	case errors.Is(err, context.Canceled):
		return false
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err):
		return true
	}
	var status apierrors.APIStatus
	return apierrors.IsInternalError(err) && errors.As(err, &status) &&
		strings.Contains(status.Status().Message, "code = Unavailable")
}
