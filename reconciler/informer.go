package reconciler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// How an informer made by NewInformer waits for the API server.
//
// An API server that is away (no connection: restarting, or the network
// between) is tried again every informerRetry or so, however long it
// lasts: that is what NewInformer is for, an informer current again a
// second after the server is back, where the reflector's own backoff
// would keep it waiting up to a minute.
//
// An API server that answers, but pushes back (429 Too Many Requests from
// API Priority and Fairness, 503 Service Unavailable from an aggregated
// API whose backend is down, or any answer carrying a Retry-After), is
// backed off from instead: retrying it every second adds load where the
// server asked for less, and a 503 that persists does not come back any
// sooner for it. The wait starts at informerBackoffInitial and doubles at
// each consecutive pushback up to informerBackoffCap, each wait up to
// informerBackoffJitter as long again at random, so that the informers of
// many operators throttled at once do not come back in step; and it is
// never shorter than the Retry-After the server sent (jittered the same
// way), however long, as client-go's REST client honours it. The backoff
// belongs to one list or watch call: the next call, made once this one
// returned, starts again from informerBackoffInitial.
const (
	// informerRetry is the average wait between two tries while the API
	// server is away (half as long to half as long again, at random).
	informerRetry = time.Second

	// informerBackoffInitial is the first wait after a pushback, the
	// outage's retry period: a brief pushback (a restarting server answers
	// 429 with Retry-After: 1 while its watch cache initialises) is tried
	// again as soon as before, and only one that persists waits longer.
	informerBackoffInitial = time.Second
	// informerBackoffCap is the reflector's own cap (client-go's
	// defaultBackoffMax): throttled for good, an informer tries no more
	// often than client-go's would, and learns that the throttling ended
	// at most 45 s late (the cap plus its jitter), where a longer cap
	// would leave the cache stale longer for little relief to the server.
	informerBackoffCap = 30 * time.Second
	// informerBackoffJitter is how much longer than the backoff a wait
	// may be, at random, as a fraction of it.
	informerBackoffJitter = 0.5
	// informerLogEvery is how often a failure that goes on is logged
	// again once its wait stopped doubling: an outage from its first
	// failure on, a pushback from when its backoff reached the cap.
	informerLogEvery = 5 * time.Minute
)

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
// server is away (connection refused or reset, EOF, etcd unavailable) is
// tried again every second or so inside the call until it succeeds or the
// informer stops, so the reflector does not back off for it.
//
// A list or watch the API server pushes back on is tried again inside the
// call too, but backing off: a 429 (API Priority and Fairness throttling,
// once client-go's REST client has spent its own Retry-After retries), a
// 503 (an aggregated API that is unavailable), or any answer with a
// Retry-After waits at least the Retry-After, and consecutive ones wait
// 1 s doubling to 30 s, each up to half as long again at random. Every
// such wait is logged when it starts, at each doubling and then every
// five minutes while it lasts, with the informer's type, the error, the
// failures so far and the next wait; the requests themselves are counted
// by client-go's rest_client_requests_total{code="429"} (or "503"), which
// the manager's metrics endpoint serves. Any other error (TLS, DNS,
// credentials, a timeout, 403) reaches the reflector as before. Pair it
// with OutageRecovery, which re-runs the passes the outage failed.
// CacheOptions sets it.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	rt := defaultRetrier()
	rt.log = rt.log.WithValues("type", informerType(obj))
	return toolscache.NewSharedIndexInformer(outageListerWatcher{toolscache.ToListerWatcherWithContext(lw), rt}, obj, resync, indexers)
}

// informerType names the objects an informer holds, for its log lines:
// their kind when obj says it (unstructured and metadata-only informers),
// their Go type otherwise.
func informerType(obj runtime.Object) string {
	if obj == nil {
		return "unknown"
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); !gvk.Empty() {
		return gvk.String()
	}
	return fmt.Sprintf("%T", obj)
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
// serverAway's errors, or ctx ends (then its last answer, unwrapped: the
// reflector tells errors apart by their type).
func untilAvailable[R any](ctx context.Context, call func() (R, error)) (R, error) {
	return retryUntilAvailable(ctx, defaultRetrier(), call)
}

// retryUntilAvailable is untilAvailable on rt's clock and log, waiting as
// the constants above say.
func retryUntilAvailable[R any](ctx context.Context, rt retrier, call func() (R, error)) (R, error) {
	backoff := wait.Backoff{
		Duration: informerBackoffInitial,
		Factor:   2,
		Jitter:   informerBackoffJitter,
		Steps:    math.MaxInt32, // until the cap, which sets it to 0
		Cap:      informerBackoffCap,
	}
	var (
		failures     int
		firstFailure time.Time
		lastLog      time.Time
		lastKind     awayKind
		lastBackoff  time.Duration
	)
	for {
		r, err := call()
		if err == nil {
			return r, nil
		}
		kind := awayKindOf(err)
		if kind == notAway {
			return r, err
		}
		now := rt.clock.Now()
		failures++
		if failures == 1 {
			firstFailure = now
		}
		var delay time.Duration
		newStep := failures == 1 || kind != lastKind
		if kind == awayDown {
			delay = informerRetry/2 + rand.N(informerRetry)
		} else {
			if backoff.Duration != lastBackoff {
				newStep = true // the first pushback, or the wait doubled
				lastBackoff = backoff.Duration
			}
			delay = backoff.Step()
			if s, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(s)*time.Second > delay {
				delay = wait.Jitter(time.Duration(s)*time.Second, informerBackoffJitter)
			}
		}
		if newStep || now.Sub(lastLog) >= informerLogEvery {
			rt.log.Info(kind.message(), "error", err.Error(), "failures", failures,
				"for", now.Sub(firstFailure).Round(time.Second).String(), "retryIn", delay.Round(100*time.Millisecond).String())
			lastLog = now
		}
		lastKind = kind
		timer := rt.clock.NewTimer(delay)
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

// awayKind sorts the errors of a list or watch by how untilAvailable
// waits them out.
type awayKind int

const (
	// notAway errors reach the reflector at once.
	notAway awayKind = iota
	// awayDown: the API server is not there to answer. Tried again
	// every informerRetry or so.
	awayDown
	// awayThrottled: a 429, or another answer with a Retry-After. Backed
	// off from, never sooner than the Retry-After.
	awayThrottled
	// awayUnavailable: a 503 without a Retry-After. Backed off from.
	awayUnavailable
)

func (k awayKind) message() string {
	switch k {
	case awayDown:
		return "API server unreachable; the informer's list or watch is tried again every second"
	case awayThrottled:
		return "API server throttles the informer's list or watch (429) or asks it to retry later; it is tried again after the Retry-After or a backoff doubling to 30s, whichever is longer"
	default:
		return "API server unavailable (503); the informer's list or watch is tried again after a backoff doubling to 30s"
	}
}

// serverAway reports whether err says the API server is not there to
// answer, or not willing to, for the moment: untilAvailable waits it out.
func serverAway(err error) bool { return awayKindOf(err) != notAway }

// awayKindOf sorts err. awayDown: no connection (refused, reset, EOF),
// etcd unavailable. awayThrottled: 429 (API Priority and Fairness, or a
// restarting server's answer while its watch cache initialises), or any
// other answer carrying a Retry-After. awayUnavailable: 503. Not a TLS, DNS or
// credential error, nor a timeout: those reach the reflector, which logs
// them and backs off.
func awayKindOf(err error) awayKind {
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return notAway
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return awayDown
	case apierrors.IsTooManyRequests(err):
		return awayThrottled
	}
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		return awayThrottled
	}
	if apierrors.IsServiceUnavailable(err) {
		return awayUnavailable
	}
	var status apierrors.APIStatus
	if apierrors.IsInternalError(err) && errors.As(err, &status) &&
		strings.Contains(status.Status().Message, "code = Unavailable") {
		return awayDown
	}
	return notAway
}
