package reconciler

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/fastpath"
	"github.com/reconcilekit/reconcilekit/ownership"
)

// Reconciler is a typed, phased reconcile.Reconciler for T. Register it with
// [Reconciler.SetupWithManager], which watches T and Options.Owns, or add
// watches to [Reconciler.Builder].
type Reconciler[T Object] struct {
	opts      Options[T]
	summary   conditions.ReadySummary
	newObject func() T
	// stalled and overdue feed reconcilekit_stalled_objects and
	// reconcilekit_cleanup_overdue_objects.
	stalled, cleanupOverdue *objectSet
	// seen holds, per key, what passes saw of the object ahead of the
	// cache; a pass never acts on an older cached copy.
	seen *horizon
	// outages re-queues what failed while the API server was unavailable
	// (OutageRecovery).
	outages *outages
	// owned is Options.Owns, resolved.
	owned ownedKinds
	// bypassed holds objects deleted with the finalizer still on them
	// until their cleanup has run (DeletedWithFinalizer).
	bypassed *bypassed[T]
	// references are the WaitFor steps' watches (ReferenceSources).
	references *references
	// wakeups holds what the watches Builder sets up need to drop the
	// events that can only start a pass with nothing to do; filtering
	// says Builder set them up (otherwise nothing is recorded), and kind
	// is T's group and kind, resolved there.
	wakeups   *wakeups
	filtering atomic.Bool
	kind      schema.GroupKind
	// applier is every pass's Applier, but for its client (WithClient): what
	// it learns (the objects found matching, the kinds' scopes) outlives
	// the pass.
	applier *ownership.Applier
}

var _ reconcile.Reconciler = &Reconciler[Object]{}

// New builds a Reconciler from opts, taking whatever opts leaves empty from
// mgr (which may be nil when opts sets Client, APIReader and Scheme).
func New[T Object](mgr manager.Manager, opts Options[T]) (*Reconciler[T], error) {
	if err := fastpath.Err(); err != nil {
		return nil, fmt.Errorf("reconciler: %w", err)
	}
	var probe func(context.Context) error
	if mgr != nil {
		var err error
		if probe, err = readyzProbe(mgr.GetConfig(), mgr.GetHTTPClient()); err != nil {
			return nil, fmt.Errorf("reconciler: API server readiness probe: %w", err)
		}
		if opts.Client == nil {
			opts.Client = mgr.GetClient()
		}
		if opts.APIReader == nil {
			opts.APIReader = mgr.GetAPIReader()
		}
		if opts.Scheme == nil {
			opts.Scheme = mgr.GetScheme()
		}
		if opts.Recorder == nil {
			opts.Recorder = mgr.GetEventRecorder(opts.Name)
		}
		if opts.Schemas == nil {
			d, err := discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
			if err != nil {
				return nil, fmt.Errorf("reconciler: discovery client for owned custom resources' schemas: %w", err)
			}
			opts.Schemas = ownership.NewSchemaCache(d.OpenAPIV3())
		}
	}
	if opts.FieldManager == "" {
		opts.FieldManager = opts.Name
	}
	if err := validate(opts); err != nil {
		return nil, err
	}
	if err := checkContract[T](); err != nil {
		return nil, err
	}
	owned, err := resolveOwns(opts.Owns, opts.Scheme)
	if err != nil {
		return nil, err
	}
	r := &Reconciler[T]{opts: opts, newObject: newFunc[T](),
		stalled:        newObjectSet(stalledObjects.WithLabelValues(opts.Name)),
		cleanupOverdue: newObjectSet(cleanupOverdueObjects.WithLabelValues(opts.Name)),
		seen:           newHorizon(),
		outages:        newOutages(probe),
		bypassed:       newBypassed[T](),
		wakeups:        newWakeups(),
		owned:          owned,
		applier: &ownership.Applier{Client: opts.Client, APIReader: opts.APIReader, Scheme: opts.Scheme,
			FieldManager: opts.FieldManager, Schemas: opts.Schemas}}
	ready := opts.ReadyDependsOn
	if ready == nil {
		for _, s := range opts.Steps {
			if s.Condition != "" {
				ready = append(ready, s.Condition)
			}
		}
	}
	r.summary = conditions.NewReadySummary(ready...).WithReadyReason(opts.ReadyReason, opts.ReadyMessage)
	if err := validateReady(opts, ready); err != nil {
		return nil, err
	}
	if r.references, err = resolveReferences(mgr, &r.opts, r.newObject); err != nil {
		return nil, err
	}
	return r, nil
}

// newFunc returns a constructor for the struct T points to, so user code
// never writes one.
func newFunc[T Object]() func() T {
	var zero T
	t := reflect.TypeOf(zero)
	if t == nil || t.Kind() != reflect.Pointer {
		panic(fmt.Sprintf("reconciler: type parameter must be a pointer to a struct, got %v", t))
	}
	elem := t.Elem()
	return func() T { return reflect.New(elem).Interface().(T) }
}

// Reconcile runs one pass for req: it reads the object (never a cached
// copy older than one an earlier pass saw), marks a paused object Paused and
// stops, runs the cleanup steps of a deleting object, or ensures the
// finalizer and runs the steps on a private copy; then it derives Ready,
// Reconciling, Stalled and status.observedGeneration and writes status at
// most once, only when it changed, with an optimistic lock that loses
// neither this pass's changes nor another writer's. A missing object ends the
// pass without error, a panicking step fails it with reason Panic, and at
// most one event is emitted, when Ready changes. The full list of
// guarantees is in docs/reconciler.md, "Guarantees".
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (_ ctrl.Result, err error) {
	start := time.Now()
	defer func() { r.outages.observe(req.NamespacedName, start, err) }()
	log := logf.FromContext(ctx).WithValues("controller", r.opts.Name)
	ctx = logf.IntoContext(ctx, log)
	counted := newPassClient(r.opts.Client, r.opts.APIReader)
	defer func() {
		n := counted.mutations()
		mutatingRequests.WithLabelValues(r.opts.Name).Observe(float64(n))
		if n == 0 {
			noopPasses.WithLabelValues(r.opts.Name).Inc()
		}
	}()
	r.wakeups.beginPass(req.NamespacedName)
	if r.filtering.Load() {
		counted.tracker = r.trackWrites(req.NamespacedName)
	}

	obj := r.newObject()
	if err := r.opts.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.stalled.set(req.NamespacedName, false)
			r.cleanupOverdue.set(req.NamespacedName, false)
			r.seen.forget(req.NamespacedName)
			r.wakeups.forget(req.NamespacedName)
			if last, ok := r.bypassed.take(req.NamespacedName); ok {
				counted.tracker = nil // nothing is left to wake
				// The last state has the UID that places it in a range; a
				// replica that does not own it drops it (the owner's watch
				// recorded it too).
				ctx, end, mine := r.beginShard(ctx, last)
				if !mine {
					return ctrl.Result{}, nil
				}
				defer end()
				return r.cleanupBypassed(ctx, req.NamespacedName, last, counted)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting %s: %w", req, err)
	}
	if earlier, ok := r.bypassed.takeEarlier(req.NamespacedName, obj.GetUID()); ok {
		// The object was re-created under its name before the pass that
		// cleans up after its deleted predecessor: that cleanup runs first
		// (steps keyed by the name would otherwise undo this object's
		// work), and this object's pass waits until it has.
		if res, err := r.cleanupEarlier(ctx, req.NamespacedName, earlier, counted); err != nil || res.RequeueAfter > 0 {
			return res, err
		}
	}
	ctx, end, mine := r.beginShard(ctx, obj)
	if !mine {
		log.V(1).Info("another replica owns this object's shard range; no pass")
		return ctrl.Result{}, nil
	}
	defer end()
	cachedRV := obj.GetResourceVersion()
	if seen, behind := r.seen.behind(req.NamespacedName, obj); behind {
		log.V(1).Info("cache is behind an earlier pass; reading the object from the API server", "cached", cachedRV, "seen", seen)
		obj = r.newObject()
		if err := r.opts.APIReader.Get(ctx, req.NamespacedName, obj); err != nil {
			// Gone: the entry stays until the cache says so too, or the
			// next pass would act on the same stale copy.
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		counted.record(obj)
	}
	p := newPass(req.NamespacedName, obj, cachedRV)
	// Whatever path the pass takes, what it left of the object is recorded.
	defer func() {
		p.record(r.seen, r.managedFinalizers())
		r.track(req.NamespacedName, p.obj)
	}()
	scope := r.scope(obj, counted)

	if _, paused := obj.GetAnnotations()[PausedAnnotation]; paused {
		if err := r.markPaused(obj); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.finish(ctx, counted, p, nil)
	}

	if !obj.GetDeletionTimestamp().IsZero() {
		return r.delete(ctx, scope, p)
	}
	if len(r.opts.Cleanup) > 0 || len(r.opts.RetiredFinalizers) > 0 {
		changed, err := r.syncFinalizers(ctx, counted, obj)
		if err != nil {
			return ctrl.Result{}, err
		}
		p.adopt(changed)
		if !obj.GetDeletionTimestamp().IsZero() {
			// The re-read showed a deletion the cached copy did not.
			return r.delete(ctx, scope, p)
		}
	}
	conditions.Delete(obj, Paused)

	res, stepErr := r.runSteps(ctx, scope, p)
	if err := r.finish(ctx, counted, p, stepErr); err != nil {
		// A terminal error whose Stalled condition could not be written
		// must be retried: controller-runtime never retries a terminal
		// error, and the condition that explains it would be lost until
		// some unrelated event.
		return ctrl.Result{}, errors.Join(retryable(stepErr), err)
	}
	if r.filtering.Load() && r.rolloutProgressInterval() >= 0 {
		r.wakeups.waitOn(req.NamespacedName, p.waits)
	}
	return res, stepErr
}

// trackWrites returns the passClient tracker that records the writes of
// the pass for owner whose watch events Builder's watches drop: of T
// itself, and of owned kinds controlled by the owner.
func (r *Reconciler[T]) trackWrites(owner types.NamespacedName) func(schema.GroupVersionKind, client.Object, string) func(client.Object) {
	skipped := skippedWakeups.WithLabelValues(r.opts.Name, causeOwnWrite)
	return func(gvk schema.GroupVersionKind, obj client.Object, prev string) func(client.Object) {
		gk := gvk.GroupKind()
		if !r.ownedBy(owner, gk, obj) {
			return func(client.Object) {}
		}
		generation := obj.GetGeneration()
		w := r.wakeups.sending(owner, gk, client.ObjectKeyFromObject(obj), prev)
		return func(answer client.Object) {
			rv := ""
			// A pass never changes T's spec: an answer of another
			// generation carries someone else's change (a mutating
			// webhook defaulting on update) that the steps did not see,
			// so its event is not the pass's to drop.
			if answer != nil && (gk != r.kind || answer.GetGeneration() == generation) {
				rv = answer.GetResourceVersion()
			}
			dropped, queue := r.wakeups.sent(owner, w, rv)
			if dropped > 0 {
				skipped.Add(float64(dropped))
				if gk == r.kind {
					r.seen.caughtUp(owner, rv)
				}
			}
			if queue {
				r.wakeups.requeue(owner)
			}
		}
	}
}

// ownedBy reports whether obj, of kind gk, is owner itself or an object of
// an owned kind that owner controls: the objects whose events Builder's
// watches map to owner.
func (r *Reconciler[T]) ownedBy(owner types.NamespacedName, gk schema.GroupKind, obj client.Object) bool {
	if gk == r.kind {
		return client.ObjectKeyFromObject(obj) == owner
	}
	if r.owned.check(gk) != nil || obj.GetNamespace() != owner.Namespace {
		return false
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != r.kind.Kind || ref.Name != owner.Name {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == r.kind.Group
}

// scope is the Scope of a pass on obj through the pass's client.
func (r *Reconciler[T]) scope(obj T, counted *passClient) *Scope[T] {
	return &Scope[T]{
		Object:     obj,
		Client:     counted,
		APIReader:  r.opts.APIReader,
		Recorder:   r.opts.Recorder,
		applier:    r.applier.WithClient(counted),
		owned:      r.owned,
		controller: r.opts.Name,
		rangeLabel: r.rangeLabel(obj),
	}
}

// track records the state obj was left in by this pass in the gauges: a
// live object with Stalled=True, and a deleting one whose cleanup still
// holds our finalizer past CleanupDeadline.
func (r *Reconciler[T]) track(key types.NamespacedName, obj T) {
	deleting := !obj.GetDeletionTimestamp().IsZero()
	r.stalled.set(key, !deleting && conditions.IsTrue(obj, conditions.Stalled))
	overdue := deleting && r.opts.CleanupDeadline > 0 && r.guardsCleanup(obj) &&
		time.Since(obj.GetDeletionTimestamp().Time) > r.opts.CleanupDeadline
	r.cleanupOverdue.set(key, overdue)
}

// retryable returns err without its reconcile.TerminalError marking (the
// step's error that TerminalError wraps, so errors.Is and errors.As still
// reach its cause).
func retryable(err error) error {
	if err == nil || !errors.Is(err, reconcile.TerminalError(nil)) {
		return err
	}
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return errors.New(err.Error())
}
