package sharding

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// SelectCache returns opts changed so that the cache of this replica holds
// only the objects of the ranges it claims (acquiring, owned or draining):
// the objects of the reconciled kind by the range of their UID, and the
// objects of the owned kinds by their [Member.RangeLabel] (objects without it,
// applied before sharding was on, are kept until their owner's pass labels
// them). Memory then splits across the replicas, not only work.
//
// The reconciled kind's lists and watches carry a [ShardSelector], so an
// API server with the ShardedListAndWatch feature gate sends only those
// objects; one without it sends them all and they are dropped as they
// arrive, before the cache stores them. The owned kinds are always dropped
// on arrival: the cache's label selector for them (cache.ByObject) is the
// one controller-runtime sends. When the claimed ranges change, each open
// watch switches in place: it lists the acquired ranges' objects as of the
// last event it passed on and passes them on as additions, passes on the
// given-up ranges' objects as deletions, and watches on from there with the
// new ranges (cachewatch.go), so the cache holds a range's objects before the
// replica owns it. A watch that cannot switch (not yet past its initial
// list, or its resourceVersion compacted) ends as expired, and the informer
// lists again after client-go's backoff.
//
// scheme must know the kinds (it resolves the cache's typed informers);
// call SelectCache after the other changes to opts, since it wraps
// opts.NewInformer.
func (m *Member) SelectCache(opts cache.Options, scheme *runtime.Scheme, reconciled client.Object, owned ...client.Object) (cache.Options, error) {
	m.selected.Store(true)
	sel := &cacheSelection{member: m, scheme: scheme, owned: map[schema.GroupKind]bool{}}
	gvk, err := apiutil.GVKForObject(reconciled, scheme)
	if err != nil {
		return opts, fmt.Errorf("sharding: SelectCache: the reconciled kind: %w", err)
	}
	sel.reconciled = gvk.GroupKind()
	for _, o := range owned {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return opts, fmt.Errorf("sharding: SelectCache: an owned kind: %w", err)
		}
		sel.owned[gvk.GroupKind()] = true
	}
	next := opts.NewInformer
	if next == nil {
		next = toolscache.NewSharedIndexInformer
	}
	opts.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		rangeOf := sel.rangeFuncFor(obj)
		if rangeOf == nil {
			return next(lw, obj, resync, indexers)
		}
		s := m.selecting(lw, obj, rangeOf, sel.isReconciled(obj))
		inf := next(s, obj, resync, indexers)
		s.store = inf.GetStore()
		return inf
	}
	return opts, nil
}

// cacheSelection knows which informers SelectCache restricts.
type cacheSelection struct {
	member     *Member
	scheme     *runtime.Scheme
	reconciled schema.GroupKind
	owned      map[schema.GroupKind]bool
}

func (s *cacheSelection) groupKind(obj runtime.Object) (schema.GroupKind, bool) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Empty() {
		var err error
		if gvk, err = apiutil.GVKForObject(obj, s.scheme); err != nil {
			return schema.GroupKind{}, false
		}
	}
	return gvk.GroupKind(), true
}

func (s *cacheSelection) isReconciled(obj runtime.Object) bool {
	gk, ok := s.groupKind(obj)
	return ok && gk == s.reconciled
}

// rangeFuncFor returns how SelectCache ranges an object of obj's kind, nil
// for a kind it leaves alone: the reconciled kind by its UID, an owned kind
// by its range label (ranged is false without one: kept in every cache).
func (s *cacheSelection) rangeFuncFor(obj runtime.Object) rangeFunc {
	gk, ok := s.groupKind(obj)
	switch {
	case !ok:
		return nil
	case gk == s.reconciled:
		return func(o metav1.Object, ranges int) (int, bool) { return RangeOf(o.GetUID(), ranges), true }
	case s.owned[gk]:
		return s.member.labelledRange
	}
	return nil
}

// rangeFunc returns the range of o among ranges; ranged is false for an
// object that belongs in every replica's cache.
type rangeFunc func(o metav1.Object, ranges int) (r int, ranged bool)
