package reconciler

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/ownership"
)

// Reconciler is a typed, phased reconcile.Reconciler for T. Register it with
// controller-runtime's builder as usual:
//
//	ctrl.NewControllerManagedBy(mgr).For(&v1.WebApp{}).Owns(&appsv1.Deployment{}).Complete(r)
type Reconciler[T Object] struct {
	opts      Options[T]
	summary   conditions.Summary
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
	// references are the WaitFor steps' watches (ReferenceSources).
	references *references
}

var _ reconcile.Reconciler = &Reconciler[Object]{}

// New builds a Reconciler from opts, taking whatever opts leaves empty from
// mgr (which may be nil when opts sets Client, APIReader and Scheme).
func New[T Object](mgr manager.Manager, opts Options[T]) (*Reconciler[T], error) {
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
			opts.Schemas = ownership.NewSchemas(d.OpenAPIV3())
		}
	}
	if opts.FieldManager == "" {
		opts.FieldManager = opts.Name
	}
	if err := validate(opts); err != nil {
		return nil, err
	}
	r := &Reconciler[T]{opts: opts, newObject: newFunc[T](),
		stalled:        newObjectSet(stalledObjects.WithLabelValues(opts.Name)),
		cleanupOverdue: newObjectSet(cleanupOverdueObjects.WithLabelValues(opts.Name)),
		seen:           newHorizon(),
		outages:        newOutages(probe)}
	ready := opts.Ready
	if ready == nil {
		for _, s := range opts.Steps {
			if s.Condition != "" {
				ready = append(ready, s.Condition)
			}
		}
	}
	r.summary = conditions.NewSummary(ready...)
	if err := validateReady(opts, ready); err != nil {
		return nil, err
	}
	var err error
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

// Reconcile runs one pass for req.
//
// Guarantees:
//   - A missing object ends the pass without error.
//   - A pass never acts on a cached copy older than one an earlier pass
//     saw from the apiserver (its own writes' answers, conflict re-reads):
//     it reads the object from the APIReader instead. So a pass cannot
//     redo, from a stale live copy, what the cleanup of an object already
//     deleted undid.
//   - A paused object (PausedAnnotation) gets Paused=True and nothing else,
//     also while it is being deleted (reason DeletionPaused, one event).
//   - A deleting object runs Cleanup; otherwise the finalizer is ensured
//     before any step runs, so no owned state can be created unguarded.
//   - Steps run in order on a deep copy; Ready, Reconciling, Stalled and
//     status.observedGeneration are computed after them.
//   - Status is written at most once per pass, through the status
//     subresource, only when it changed, and with an optimistic lock: on a
//     conflict the object is re-read and this pass's changes re-applied on
//     top of the other writer's, so neither is lost.
//   - A failing step keeps the status changes of the steps before it.
//   - A pass that a step stopped (Wait, Error, Terminal) is never Ready, even
//     when conditions of later steps, which did not run, are still True.
//   - A panicking step fails the pass with reason Panic, not a crashed
//     manager.
//   - A live object gets at most one event per pass, only when Ready
//     changes (see emitTransitions); a deleting object gets the finalizer
//     package's cleanup events instead, so a failed cleanup is reported once.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (_ ctrl.Result, err error) {
	start := time.Now()
	defer func() { r.outages.observe(req.NamespacedName, start, err) }()
	log := logf.FromContext(ctx).WithValues("controller", r.opts.Name)
	ctx = logf.IntoContext(ctx, log)
	counted := newPassClient(r.opts.Client, r.opts.APIReader)
	defer func() { mutatingRequests.WithLabelValues(r.opts.Name).Observe(float64(counted.mutations())) }()

	obj := r.newObject()
	if err := r.opts.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.stalled.set(req.NamespacedName, false)
			r.cleanupOverdue.set(req.NamespacedName, false)
			r.seen.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting %s: %w", req, err)
	}
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
	// Whatever path the pass takes, obj (changed in place) ends as what it
	// computed and wrote.
	defer func() {
		var finalized []string
		for _, name := range r.managedFinalizers() {
			if !obj.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(obj, name) {
				finalized = append(finalized, name)
			}
		}
		r.seen.record(req.NamespacedName, cachedRV, obj, finalized)
		r.track(req.NamespacedName, obj)
	}()
	orig := obj.DeepCopyObject().(T)
	scope := &Scope[T]{
		Object:   obj,
		Client:   counted,
		Recorder: r.opts.Recorder,
		applier:  &ownership.Applier{Client: counted, APIReader: r.opts.APIReader, Scheme: r.opts.Scheme, FieldManager: r.opts.FieldManager, Schemas: r.opts.Schemas},
	}

	if _, paused := obj.GetAnnotations()[PausedAnnotation]; paused {
		if err := r.markPaused(obj); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.finish(ctx, counted, orig, obj, nil)
	}

	if !obj.GetDeletionTimestamp().IsZero() {
		return r.delete(ctx, scope, orig)
	}
	if len(r.opts.Cleanup) > 0 || len(r.opts.RetiredFinalizers) > 0 {
		changed, err := r.syncFinalizers(ctx, counted, obj)
		if err != nil {
			return ctrl.Result{}, err
		}
		if changed || obj.GetResourceVersion() != orig.GetResourceVersion() {
			// obj is now the server's answer (a write, or the re-read
			// after a conflict with a stale cached copy); nothing of this
			// pass has touched it yet, so it is the new baseline.
			orig = obj.DeepCopyObject().(T)
		}
		if !obj.GetDeletionTimestamp().IsZero() {
			// The re-read showed a deletion the cached copy did not.
			return r.delete(ctx, scope, orig)
		}
	}
	conditions.Delete(obj, Paused)

	res, stepErr := r.runSteps(ctx, scope, orig)
	if err := r.finish(ctx, counted, orig, obj, stepErr); err != nil {
		// A terminal error whose Stalled condition could not be written
		// must be retried: controller-runtime never retries a terminal
		// error, and the condition that explains it would be lost until
		// some unrelated event.
		return ctrl.Result{}, errors.Join(retryable(stepErr), err)
	}
	return res, stepErr
}

// track records the state obj was left in by this pass in the gauges: a
// live object with Stalled=True, and a deleting one whose cleanup still
// holds our finalizer past CleanupDeadline.
func (r *Reconciler[T]) track(key types.NamespacedName, obj T) {
	deleting := !obj.GetDeletionTimestamp().IsZero()
	r.stalled.set(key, !deleting && conditions.IsTrue(obj, conditions.Stalled))
	overdue := deleting && len(r.opts.Cleanup) > 0 && r.opts.CleanupDeadline > 0 &&
		controllerutil.ContainsFinalizer(obj, r.opts.Finalizer) &&
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
