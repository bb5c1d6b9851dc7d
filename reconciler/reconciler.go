package reconciler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/text"
	"github.com/reconcilekit/reconcilekit/ownership"
)

// PausedAnnotation on an object stops the reconciler from touching it: no
// steps, no finalizer changes, no cleanup, only the Paused condition (written
// once). Remove the annotation to resume. Use it to take an object out of an
// operator's hands during an incident or a manual migration. That holds for
// its deletion too: a paused object that is being deleted keeps the
// finalizers this reconciler would remove, and Paused says so (reason
// [ReasonDeletionPaused], with one Warning event).
const PausedAnnotation = "reconcilekit.io/paused"

// Paused is the condition type that says an object is paused.
const Paused = "Paused"

// Object is what the reconciler works on: a Kubernetes object whose status
// holds conditions. Generate DeepCopy with controller-gen as usual and add
// GetConditions/SetConditions over Status.Conditions.
type Object interface {
	client.Object
	conditions.Setter
}

// Step is one phase of a reconcile pass.
type Step[T Object] struct {
	// Name appears in logs ("step"), metrics ("step" label) and error
	// messages. Required, unique within a reconciler.
	Name string
	// Condition, if set, is the condition type this step owns: True when the
	// step continues, False with the step's reason when it waits or fails.
	// Owned conditions are Ready's dependents unless Options.Ready says
	// otherwise.
	Condition string
	// Run does the step's work on s.Object, a private deep copy. It may
	// change s.Object's status only: a change to spec or metadata (which
	// would never be written) stalls the pass with ReasonInvalidStep. It
	// must be idempotent: it runs on every pass.
	Run func(ctx context.Context, s *Scope[T]) Outcome
}

// Options configure a [Reconciler].
type Options[T Object] struct {
	// Name names the controller in logs, metrics, events (reporting
	// controller) and, unless FieldManager is set, the server-side apply
	// field manager. Required; a Kubernetes qualified name.
	Name string
	// Steps run in order on every pass over a live object.
	Steps []Step[T]
	// Ready lists the conditions Ready depends on, in the order a user
	// should fix them. Default: every step's Condition, in step order.
	// Whatever it lists, a pass that a step stopped is not Ready: a step
	// that must not hold Ready back returns ContinueWith, not Wait or Error.
	Ready []string
	// Finalizer names the finalizer that guards Cleanup (for example
	// "apps.example.com/cleanup"). Required when Cleanup is set, and an
	// error without it: a release that drops Cleanup lists its finalizer in
	// RetiredFinalizers instead.
	Finalizer string
	// RetiredFinalizers names finalizers that earlier releases of the
	// operator added and this one no longer uses (Cleanup dropped, or
	// Finalizer renamed). The reconciler removes them with the same locked
	// patch as its own: from a deleting object at once, so its deletion
	// completes, and from a live object on its next pass (one write, once),
	// so that uninstalling the operator later cannot strand it. Each must
	// be a qualified name other than Finalizer. See docs/finalizer.md.
	RetiredFinalizers []string
	// Cleanup steps run, in order, when the object is being deleted, with
	// the same Scope, counted client, logging, metrics and panic handling as
	// Steps; the finalizer is removed once all of them continue in one
	// pass. They own no condition (Condition must be empty): while cleanup
	// is stopped, Ready=False says why. Each must be idempotent: every pass
	// starts again from the first, also after a crash between a step's
	// success and the finalizer's removal.
	Cleanup []Step[T]
	// CleanupDeadline, if set, makes stuck cleanup warn (CleanupOverdue) on
	// every pass once the object has been deleting for this long.
	CleanupDeadline time.Duration
	// RemoveFinalizerAfterDeadline removes the finalizer once
	// CleanupDeadline has passed although cleanup has not succeeded
	// (FinalizerForceRemoved). It is an explicit policy choice: it unblocks
	// deletion (of a namespace, say) at the price of leaking what the
	// failing step manages.
	RemoveFinalizerAfterDeadline bool
	// Summarize, if set, runs at the end of every pass over a live object,
	// after Ready, Reconciling and Stalled are computed, whatever the steps
	// returned. Use it to derive convenience status fields (a ready flag, a
	// one-line message) from the conditions, so they can never disagree.
	Summarize func(obj T)

	// Client, APIReader, Scheme and Recorder default to the manager's.
	// Set Client to a reconcilertest.Client in tests.
	Client    client.Client
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// FieldManager is the server-side apply field manager for owned
	// objects. Default: Name.
	FieldManager string
	// Schemas finds the schemas of owned custom resources for Scope.Apply
	// (built-in kinds never need it). Default: read from the manager's API
	// server, on first use.
	Schemas *ownership.SchemaCache
}

// Reconciler is a typed, phased reconcile.Reconciler for T. Register it with
// controller-runtime's builder as usual:
//
//	ctrl.NewControllerManagedBy(mgr).For(&v1.WebApp{}).Owns(&appsv1.Deployment{}).Complete(r)
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
			opts.Schemas = ownership.NewSchemaCache(d.OpenAPIV3())
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
	r.summary = conditions.NewReadySummary(ready...)
	if err := validateReady(opts, ready); err != nil {
		return nil, err
	}
	return r, nil
}

// validateReady checks the conditions at New rather than on every pass:
// each condition has one owning step, and Ready depends only on conditions
// a step owns (anything else would never be set, so Ready would never be
// True) and never on itself or the kstatus conditions.
func validateReady[T Object](opts Options[T], ready []string) error {
	var errs []error
	owner := map[string]string{}
	for i, s := range opts.Steps {
		if s.Condition == "" {
			continue
		}
		if prev, dup := owner[s.Condition]; dup {
			errs = append(errs, fmt.Errorf("reconciler: Options.Steps[%d].Condition %q is already owned by step %q", i, s.Condition, prev))
		}
		owner[s.Condition] = s.Name
	}
	for i, c := range ready {
		switch {
		case c == conditions.Ready || c == conditions.Reconciling || c == conditions.Stalled:
			errs = append(errs, fmt.Errorf("reconciler: Options.Ready[%d]: %q cannot be a dependent of Ready", i, c))
		case owner[c] == "":
			errs = append(errs, fmt.Errorf("reconciler: Options.Ready[%d]: no step owns condition %q", i, c))
		}
	}
	return errors.Join(errs...)
}

func validate[T Object](opts Options[T]) error {
	var errs []error
	if opts.Name == "" {
		errs = append(errs, errors.New("reconciler: Options.Name is required"))
	}
	if opts.Client == nil || opts.APIReader == nil || opts.Scheme == nil {
		errs = append(errs, errors.New("reconciler: Options.Client, APIReader and Scheme are required (or pass a manager)"))
	}
	// Step names are one namespace: they label the same metrics and logs.
	seen := map[string]bool{}
	for _, l := range []struct {
		list  string
		steps []Step[T]
	}{{"Steps", opts.Steps}, {"Cleanup", opts.Cleanup}} {
		list := l.list
		for i, s := range l.steps {
			switch {
			case s.Name == "":
				errs = append(errs, fmt.Errorf("reconciler: Options.%s[%d].Name is required", list, i))
			case seen[s.Name]:
				errs = append(errs, fmt.Errorf("reconciler: Options.%s[%d].Name %q is not unique", list, i, s.Name))
			}
			seen[s.Name] = true
			if s.Run == nil {
				errs = append(errs, fmt.Errorf("reconciler: Options.%s[%d].Run (%q) is nil", list, i, s.Name))
			}
			if list == "Cleanup" && s.Condition != "" {
				errs = append(errs, fmt.Errorf("reconciler: Options.Cleanup[%d].Condition: cleanup steps own no condition (Ready says why cleanup is stopped)", i))
			}
		}
	}
	errs = append(errs, validateFinalizers(opts)...)
	return errors.Join(errs...)
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

// Scope is what a step works with during one pass.
type Scope[T Object] struct {
	// Object is this pass's private deep copy of the object. Steps change
	// its status; the reconciler writes it once at the end of the pass.
	Object T
	// Client counts its mutating requests into the
	// reconcilekit_mutating_requests_per_reconcile metric. Reads may be
	// served by the manager's cache, with this pass's own writes laid over
	// it: a Get or List after a write in the same pass returns the written
	// copy when it is newer than the cached one, so a later step never
	// judges an object by a version older than the one this pass applied.
	// Across passes the cache is the source (every write is followed by a
	// watch event, hence by another pass); writes through other clients
	// and deletions are not tracked.
	Client client.Client
	// Recorder emits events as the controller.
	Recorder events.EventRecorder

	applier *ownership.Applier
}

// Apply applies desired, an apply configuration such as
// appsv1ac.Deployment(name, namespace), as an object owned (controlled) by
// s.Object with server-side apply, writing nothing when the live object
// already matches. Later reads through s.Client in this pass return what
// it wrote. See ownership.Applier.Apply. A step that returns its
// *ownership.AdoptionRefusedError as Error stalls the pass (Terminal, reason
// ReasonAdoptionRefused): no retry makes the object adoptable.
func (s *Scope[T]) Apply(ctx context.Context, desired runtime.ApplyConfiguration, opts ...ownership.ApplyOption) (ownership.ApplyResult, error) {
	return s.applier.Apply(ctx, s.Object, desired, opts...)
}

// Prune deletes the objects of list's type controlled by s.Object whose
// names are not in keep. See ownership.Applier.Prune.
func (s *Scope[T]) Prune(ctx context.Context, list client.ObjectList, keep ...string) ([]string, error) {
	return s.applier.Prune(ctx, s.Object, list, keep...)
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

// runSteps runs the steps, marks their conditions and the kstatus
// conditions, and returns the pass's result and error.
func (r *Reconciler[T]) runSteps(ctx context.Context, s *Scope[T], orig T) (ctrl.Result, error) {
	var res ctrl.Result
	var stopped Outcome
	var stoppedBy string
	for _, step := range r.opts.Steps {
		before := snapshotStatus(s.Object)
		out := r.runStep(ctx, step, s)
		if s.Object.GetResourceVersion() != orig.GetResourceVersion() {
			// The step wrote the object itself through the API (another
			// finalizer, an annotation) and s.Object holds the server's
			// answer: that is stored, so it is the new baseline, and the
			// pass's status goes back on top of it.
			rebase(orig, before, s.Object, s.stored(orig))
		}
		if path := changedOutsideStatus(orig, s.Object); path != "" {
			// Only status is written, so the change would be dropped
			// silently; fail loudly instead, naming the step and field.
			copyOutsideStatus(orig, s.Object)
			out = Terminal(ReasonInvalidStep, fmt.Errorf("step %s changed %s; steps may change only the object's status, "+
				"other changes are never written", step.Name, path))
		}
		if err := r.markStep(s.Object, step, out); err != nil {
			return res, err
		}
		if out.after > 0 && (res.RequeueAfter == 0 || out.after < res.RequeueAfter) && out.kind != kindTerminal && out.kind != kindError {
			res.RequeueAfter = out.after
		}
		if out.stops() {
			stopped, stoppedBy = out, step.Name
			break
		}
	}
	obj := s.Object
	// Reconciling or Stalled, and Ready when it would otherwise say True,
	// name the step that stopped the pass.
	msg := fmt.Sprintf("step %s: %s", stoppedBy, stopped.conditionMessage())
	var stepErr error
	switch stopped.kind {
	case kindContinue:
		conditions.Delete(obj, conditions.Reconciling)
		conditions.Delete(obj, conditions.Stalled)
	case kindWait, kindError:
		conditions.Delete(obj, conditions.Stalled)
		if err := conditions.MarkTrue(obj, conditions.Reconciling, stopped.reason, "%s", msg); err != nil {
			return res, err
		}
		if stopped.kind == kindError {
			stepErr = fmt.Errorf("step %s: %w", stoppedBy, stopped.err)
			// controller-runtime ignores a result returned with an error
			// (and warns on every retry); the error's backoff decides.
			res = ctrl.Result{}
		}
	case kindTerminal:
		conditions.Delete(obj, conditions.Reconciling)
		if err := conditions.MarkTrue(obj, conditions.Stalled, stopped.reason, "%s", msg); err != nil {
			return res, err
		}
		if stopped.after > 0 {
			// A failure that can heal by itself: Stalled, and re-checked.
			res = ctrl.Result{RequeueAfter: min(stopped.after, cmp.Or(res.RequeueAfter, stopped.after))}
			break
		}
		stepErr = reconcile.TerminalError(fmt.Errorf("step %s: %w", stoppedBy, stopped.err))
		res = ctrl.Result{}
	}
	if err := r.summary.SetReady(obj); err != nil {
		return res, err
	}
	// Ready always says what is ready: with no dependent to mirror (or one
	// that said nothing), the pass itself is what succeeded.
	if ready := conditions.Get(obj, conditions.Ready); ready != nil && ready.Status == metav1.ConditionTrue && ready.Message == "" {
		if err := conditions.MarkTrue(obj, conditions.Ready, ready.Reason, "all %d steps succeeded", len(r.opts.Steps)); err != nil {
			return res, err
		}
	}
	// The steps after the one that stopped did not run, so their conditions
	// may still say True for an older generation: a pass that did not finish
	// is never Ready, or `kubectl wait --for=condition=Ready` would return
	// before this generation is rolled out.
	if stopped.kind != kindContinue && conditions.IsTrue(obj, conditions.Ready) {
		if err := conditions.MarkFalse(obj, conditions.Ready, stopped.reason, "%s", msg); err != nil {
			return res, err
		}
	}
	if r.opts.Summarize != nil {
		r.opts.Summarize(obj)
	}
	setObservedGeneration(obj)
	return res, stepErr
}

// runStep runs one step with its logger, metrics and panic recovery.
func (r *Reconciler[T]) runStep(ctx context.Context, step Step[T], s *Scope[T]) (out Outcome) {
	log := logf.FromContext(ctx).WithValues("step", step.Name)
	ctx = logf.IntoContext(ctx, log)
	start := time.Now()
	defer func() {
		stepDuration.WithLabelValues(r.opts.Name, step.Name).Observe(time.Since(start).Seconds())
		if p := recover(); p != nil {
			log.Error(fmt.Errorf("panic: %v", p), "step panicked", "stack", string(debug.Stack()))
			out = Error(fmt.Errorf("panic: %v", p)).WithReason(ReasonPanic)
			stepErrors.WithLabelValues(r.opts.Name, step.Name, "panic").Inc()
			return
		}
		switch out.kind {
		case kindError:
			stepErrors.WithLabelValues(r.opts.Name, step.Name, "transient").Inc()
			log.V(1).Info("step failed", "error", out.err.Error())
		case kindTerminal:
			stepErrors.WithLabelValues(r.opts.Name, step.Name, "terminal").Inc()
			log.Info("step failed permanently", "reason", out.reason, "error", out.err.Error())
		case kindWait:
			log.V(1).Info("step waiting", "reason", out.reason, "message", out.message)
		}
	}()
	return stallRefusedAdoption(step.Run(ctx, s))
}

// markStep sets the step's own condition from its outcome.
func (r *Reconciler[T]) markStep(obj T, step Step[T], out Outcome) error {
	if step.Condition == "" {
		return nil
	}
	var err error
	switch out.kind {
	case kindContinue:
		reason := out.reason
		if reason == "" {
			reason = conditions.ReasonSucceeded
		}
		err = conditions.MarkTrue(obj, step.Condition, reason, "%s", out.message)
	default:
		err = conditions.MarkFalse(obj, step.Condition, out.reason, "%s", out.conditionMessage())
	}
	if err != nil {
		return fmt.Errorf("step %s: condition %s: %w", step.Name, step.Condition, err)
	}
	return nil
}

// finish writes status if it changed and emits transition events.
//
// Events are decided against the status the write replaced, not the pass's
// starting copy: a pass that started from a stale cached copy (right after
// our own status write) has its optimistic lock refused, re-reads, and then
// sees that Ready already says what it computed, so it repeats no event.
func (r *Reconciler[T]) finish(ctx context.Context, c client.Client, orig, obj T, passErr error) error {
	replaced, err := writeStatus(ctx, c, r.opts.APIReader, orig, obj)
	if err != nil {
		return err
	}
	r.emitTransitions(replaced, obj, passErr)
	r.emitDeletionPaused(replaced, obj)
	return nil
}

// eventNoteLimit is the longest note events.k8s.io/v1 accepts.
const eventNoteLimit = 1024

// emitTransitions emits at most one event per pass, about Ready, the
// condition a human watching `kubectl get events` cares about: when Ready
// appears or its status flips (Normal, or Warning when the pass failed or
// the object is Stalled), and when it stays not-True for a new reason
// because the pass failed or the object stalled (Warning). Step conditions
// do not get events of their own: Ready already reports the first step that
// is not True, with its reason and message, and an event per condition
// doubled the writes of a converging object for no extra information.
// A failure that repeats with the same reason emits nothing more; its
// retries show in the logs and in controller-runtime's error metrics.
func (r *Reconciler[T]) emitTransitions(orig, obj T, passErr error) {
	if r.opts.Recorder == nil {
		return
	}
	ready := conditions.Get(obj, conditions.Ready)
	if ready == nil {
		return
	}
	warning := ready.Status != metav1.ConditionTrue && (passErr != nil || conditions.IsTrue(obj, conditions.Stalled))
	before := conditions.Get(orig, conditions.Ready)
	switch {
	case before == nil || before.Status != ready.Status:
	case warning && before.Reason != ready.Reason:
	default:
		return
	}
	eventType := corev1.EventTypeNormal
	if warning {
		eventType = corev1.EventTypeWarning
	}
	note := fmt.Sprintf("%s=%s", ready.Type, ready.Status)
	if ready.Message != "" {
		note += ": " + ready.Message
	}
	r.opts.Recorder.Eventf(obj, nil, eventType, ready.Reason, "Reconcile", "%s", text.Truncate(note, eventNoteLimit, "…"))
}
