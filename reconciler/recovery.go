package reconciler

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// IsAPIServerUnavailable reports whether err says the API server could not
// be reached or could not serve the request for want of its storage: no
// answer at all (connection refused or reset, EOF, a client-side timeout:
// any transport error, which client-go returns as a *url.Error), 503
// Service Unavailable, a 504 timeout, or a 500 from etcd ("etcdserver: …",
// gRPC Unavailable). A 429 is not one: the server answered and asked for
// backoff. Neither is a webhook's failure, which the server reports as a
// 500 naming the webhook.
func IsAPIServerUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch {
		case apierrors.IsServiceUnavailable(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
			return true
		case apierrors.IsInternalError(err):
			msg := status.Status().Message
			return strings.Contains(msg, "etcdserver:") || strings.Contains(msg, "code = Unavailable")
		}
		return false
	}
	var transport *url.Error
	return errors.As(err, &transport) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// probeInterval is how often the outage recovery asks the API server
// whether it is ready while it is not; probeTimeout bounds one probe.
const (
	probeInterval = time.Second
	probeTimeout  = 5 * time.Second
)

// releaseInterval is the least time between two recoveries that forget
// one key's backoff. A /readyz that flaps (ready a second, then not)
// released every parked key at each flap, its backoff forgotten, so the
// keys retried at the flap's pace, all at once, against a server that
// could not serve them; between two releases a key now retries on its own
// backoff, and stays parked for the next recovery after the interval.
const releaseInterval = 30 * time.Second

// outages tracks the keys whose last pass failed because the API server
// was unavailable, and re-queues them when a probe sees it ready again.
// See docs/reconciler.md, "Recovery after an API server outage".
type outages struct {
	// probe answers nil when the API server is ready (or answers, but
	// will not say: 401, 403, 404).
	probe   func(context.Context) error
	running atomic.Bool

	mu sync.Mutex
	// parked holds, per key, when its failed pass started.
	parked map[types.NamespacedName]time.Time
	// released holds, per key, when a recovery last released it, for
	// releaseInterval.
	released map[types.NamespacedName]time.Time
	// down says the last probe found the API server unavailable;
	// recovered is when a probe last found it ready after one that did not.
	down      bool
	recovered time.Time
	wake      chan struct{}
}

func newOutages(probe func(context.Context) error) *outages {
	return &outages{probe: probe, parked: map[types.NamespacedName]time.Time{}, released: map[types.NamespacedName]time.Time{},
		wake: make(chan struct{}, 1)}
}

// readyzProbe asks the API server cfg reaches for /readyz through client.
func readyzProbe(cfg *rest.Config, client *http.Client) (func(context.Context) error, error) {
	d, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, client)
	if err != nil {
		return nil, err
	}
	rc := d.RESTClient()
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		err := rc.Get().AbsPath("/readyz").Do(ctx).Error()
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}, nil
}

// observe records the end of a pass over key that started at start. A
// pass that fails while the last probe found the API server not ready is
// parked whatever its error: a server that is starting answers 403 until
// its authorizer has synced, 404 until its APIs are installed, and such a
// key must not keep the backoff its outage built up.
func (o *outages) observe(key types.NamespacedName, start time.Time, err error) {
	if !o.running.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err == nil || errors.Is(err, reconcile.TerminalError(nil)) || !o.down && !IsAPIServerUnavailable(err) {
		delete(o.parked, key)
		return
	}
	o.parked[key] = start
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// OutageRecovery returns a source to register with the controller that
// runs r, with the builder's WatchesRawSource. It makes recovery after an
// API server outage paced by the work rather than by the outage: a pass
// that fails because the API server is unavailable (IsAPIServerUnavailable)
// climbs controller-runtime's per-object exponential backoff like any
// failure (up to 1000 s by default), so every object that failed during
// the outage would otherwise wait out a delay as long as the outage itself.
// With the source, once a probe of the API server's /readyz finds it ready
// again after it was not, each such object's backoff is forgotten and the
// object is queued at once; the controller's workers bound how many run at a
// time. Objects that fail for any other reason, or only after the recovery,
// keep their backoff. It needs r built with a manager (New(mgr, ...)), and
// serves one controller. Like every WatchesRawSource source, it is not
// filtered by builder.WithEventFilter predicates.
func (r *Reconciler[T]) OutageRecovery() source.Source {
	return &outageSource{o: r.outages}
}

type outageSource struct{ o *outages }

// Start runs the probe loop until ctx ends.
func (s *outageSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	if s.o.probe == nil {
		return errors.New("reconciler: OutageRecovery needs a Reconciler built with a manager (New(mgr, ...)) to probe its API server")
	}
	if !s.o.running.CompareAndSwap(false, true) {
		return errors.New("reconciler: OutageRecovery is already started; a Reconciler serves one controller")
	}
	go s.o.run(ctx, q)
	return nil
}

// run probes the API server whenever a key is parked, every probeInterval
// while it is unavailable, and releases the parked keys it can.
func (o *outages) run(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	log := logf.FromContext(ctx).WithName("outage-recovery")
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	for {
		o.mu.Lock()
		down := o.down
		o.mu.Unlock()
		if !down {
			select {
			case <-ctx.Done():
				return
			case <-o.wake:
			}
		}
		err := o.probe(ctx)
		if ctx.Err() != nil {
			return
		}
		released, waiting, recovered := o.settle(err, time.Now())
		switch {
		case err != nil && !down:
			log.Info("API server unavailable; objects that fail for it wait for it, not for their backoff", "error", err.Error(), "waiting", waiting)
		case recovered:
			log.Info("API server ready again; re-queuing the objects that failed while it was not", "objects", len(released))
		}
		for _, key := range released {
			req := reconcile.Request{NamespacedName: key}
			q.Forget(req)
			q.Add(req)
		}
		// At most one probe per interval, however often keys park.
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// settle records what a probe at now found and returns the keys to
// release: with the API server ready, those whose failed pass started
// before the last recovery, so in an outage a probe saw, and that no
// recovery released within releaseInterval. A pass that started after it
// failed for its own reasons and keeps its backoff.
func (o *outages) settle(probeErr error, now time.Time) (released []types.NamespacedName, waiting int, recovered bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if probeErr != nil {
		o.down = true
		return nil, len(o.parked), false
	}
	if o.down {
		o.down, o.recovered, recovered = false, now, true
	}
	for key, at := range o.released {
		if now.Sub(at) >= releaseInterval {
			delete(o.released, key)
		}
	}
	for key, start := range o.parked {
		if _, recent := o.released[key]; start.Before(o.recovered) && !recent {
			released = append(released, key)
			delete(o.parked, key)
			o.released[key] = now
		}
	}
	return released, len(o.parked), recovered
}
