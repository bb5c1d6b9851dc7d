package reconciler

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reconcilekit/reconcilekit/ownership"
)

// SetupWithManager registers r with mgr as the controller Options.Name,
// reconciling T, watching every kind in Options.Owns (a change to an owned
// object, its rollout's progress or a deletion, starts a pass for its
// owner), the objects WaitFor steps name ([Reconciler.ReferenceSources]),
// and re-queueing the objects whose passes failed while the API server was
// unavailable ([Reconciler.OutageRecovery]). A controller that
// needs more watches calls [Reconciler.Builder] instead.
func (r *Reconciler[T]) SetupWithManager(mgr manager.Manager) error {
	return r.Builder(mgr).Complete(r)
}

// Builder returns the controller builder SetupWithManager completes:
// Named(Options.Name), For(T), with Cleanup Watches(T,
// r.DeletedWithFinalizer()), Owns each of Options.Owns, and
// WatchesRawSource for each of r.ReferenceSources() and
// r.OutageRecovery(). Add watches (an object a spec names, a shared
// object) and options to it, then Complete(r).
//
// The For and Owns watches drop the update events that can only start a
// pass with nothing to do, counted in reconcilekit_skipped_wakeups_total:
// the event of a write the reconciler's own pass made (the state it
// carries is the one that pass computed), and an owned object's status
// update while the rollout its owner waits on is still in progress (held
// back: at most one pass per Options.RolloutProgressInterval). Creates, deletes and every other update
// start a pass as before. docs/reconciler.md, "Wake-ups that find nothing
// to do".
//
// With Options.Shard, the For and Owns watches also drop the events of
// objects in ranges this replica does not own, a source queues the
// objects of each range it acquires, and the controller runs without
// leader election (controller.Options.NeedLeaderElection false: a later
// WithOptions must keep it so).
func (r *Reconciler[T]) Builder(mgr manager.Manager) *builder.Builder {
	r.exportZeroCounters()
	b := builder.ControllerManagedBy(mgr).Named(r.opts.Name).
		For(r.newObject(), builder.WithPredicates(append(r.shardFilter(false), r.wakeupFilter(r.newObject(), false)...)...))
	if len(r.opts.Cleanup) > 0 {
		b = b.Watches(r.newObject(), r.DeletedWithFinalizer())
	}
	for _, o := range r.opts.Owns {
		b = b.Owns(o, builder.WithPredicates(append(r.shardFilter(true), r.wakeupFilter(o, true)...)...))
	}
	if r.opts.Shard != nil {
		b = b.WatchesRawSource(shardSource[T]{r: r}).
			WithOptions(controller.Options{NeedLeaderElection: new(false)})
	}
	for _, src := range r.ReferenceSources() {
		b = b.WatchesRawSource(src)
	}
	if r.filtering.Load() {
		b = b.WatchesRawSource(wakeupSource{w: r.wakeups})
	}
	return b.WatchesRawSource(r.OutageRecovery())
}

// rolloutProgressInterval is Options.RolloutProgressInterval, defaulted.
func (r *Reconciler[T]) rolloutProgressInterval() time.Duration {
	if r.opts.RolloutProgressInterval == 0 {
		return DefaultRolloutProgressInterval
	}
	return r.opts.RolloutProgressInterval
}

// wakeupFilter returns the predicate that drops the wake-ups with nothing
// to do from the watch of obj's kind (T's, or an owned kind's), and turns
// the recording they need on; none when the scheme does not know the
// kinds (the builder then fails on them anyway).
func (r *Reconciler[T]) wakeupFilter(obj client.Object, owned bool) []predicate.Predicate {
	self, err := apiutil.GVKForObject(r.newObject(), r.opts.Scheme)
	if err != nil {
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, r.opts.Scheme)
	if err != nil {
		return nil
	}
	r.kind = self.GroupKind()
	r.filtering.Store(true)
	f := &wakeupFilter{w: r.wakeups, ownerKind: r.kind, gvk: gvk, owned: owned, refresh: r.rolloutProgressInterval(),
		skipped: map[string]prometheus.Counter{
			causeOwnWrite:        skippedWakeups.WithLabelValues(r.opts.Name, causeOwnWrite),
			causeRolloutProgress: skippedWakeups.WithLabelValues(r.opts.Name, causeRolloutProgress),
		}}
	if !owned {
		f.seen = r.seen
	}
	return []predicate.Predicate{f.predicate()}
}

// exportZeroCounters creates the controller's counters at zero, so that a
// dashboard's rate() over them has a series (and an alert on an increase
// sees the first one) before anything has counted.
func (r *Reconciler[T]) exportZeroCounters() {
	noopPasses.WithLabelValues(r.opts.Name)
	statusWrites.WithLabelValues(r.opts.Name)
	for _, gk := range r.owned {
		for _, res := range []ownership.ApplyResult{ownership.Created, ownership.Updated, ownership.Unchanged} {
			applies.WithLabelValues(r.opts.Name, gk.Kind, strings.ToLower(string(res)))
		}
	}
	for _, steps := range [][]Step[T]{r.opts.Steps, r.opts.Cleanup} {
		for _, s := range steps {
			for _, typ := range []string{"transient", "terminal", "panic"} {
				stepErrors.WithLabelValues(r.opts.Name, s.Name, typ)
			}
		}
	}
}
