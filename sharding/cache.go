package sharding

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// SelectCache returns opts changed so that the cache of this replica holds
// only the objects of the ranges it claims (acquiring, owned or draining):
// the objects of the reconciled kind by the range of their UID, and the
// objects of the owned kinds by their [RangeLabel] (objects without it,
// applied before sharding was on, are kept until their owner's pass labels
// them). Memory then splits across the replicas, not only work.
//
// The reconciled kind's lists and watches carry a [ShardSelector], so an
// API server with the ShardedListAndWatch feature gate sends only those
// objects; one without it sends them all and they are dropped as they
// arrive, before the cache stores them. The owned kinds are always dropped
// on arrival: the cache's label selector for them (cache.ByObject) is the
// one controller-runtime sends. When the claimed ranges change, the open
// watches end with an expired resourceVersion and the informers list again
// with the new ranges: objects of a range given up leave the cache as
// deletions, those of a range acquired arrive as additions.
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
		if keep := sel.filterFor(obj); keep != nil {
			lw = m.selecting(lw, keep, sel.isReconciled(obj))
		}
		return next(lw, obj, resync, indexers)
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

// filterFor returns whether an object of obj's kind belongs in the cache
// given the claimed ranges, nil for a kind SelectCache leaves alone.
func (s *cacheSelection) filterFor(obj runtime.Object) func(o metav1.Object, claimed []bool) bool {
	gk, ok := s.groupKind(obj)
	switch {
	case !ok:
		return nil
	case gk == s.reconciled:
		return func(o metav1.Object, claimed []bool) bool {
			return claimed[RangeOf(o.GetUID(), len(claimed))]
		}
	case s.owned[gk]:
		return func(o metav1.Object, claimed []bool) bool {
			r, labelled := labelledRange(o, len(claimed))
			return !labelled || claimed[r]
		}
	}
	return nil
}

// labelledRange reads o's RangeLabel; labelled is false without a valid one.
func labelledRange(o metav1.Object, ranges int) (r int, labelled bool) {
	v, ok := o.GetLabels()[RangeLabel]
	if !ok {
		return 0, false
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n < 0 || n >= ranges || fmt.Sprint(n) != v {
		return 0, false
	}
	return n, true
}

// selectingLW is a ListerWatcher that lists and watches only what keep
// accepts under the claimed ranges, and ends its watches when they change.
type selectingLW struct {
	inner      toolscache.ListerWatcherWithContext
	member     *Member
	keep       func(o metav1.Object, claimed []bool) bool
	shardByUID bool

	mu      sync.Mutex
	watches map[*selectedWatch]struct{}
}

// selecting wraps lw for one informer and registers it for claim changes.
func (m *Member) selecting(lw toolscache.ListerWatcher, keep func(metav1.Object, []bool) bool, shardByUID bool) *selectingLW {
	s := &selectingLW{
		inner: toolscache.ToListerWatcherWithContext(lw), member: m, keep: keep, shardByUID: shardByUID,
		watches: map[*selectedWatch]struct{}{},
	}
	m.onClaimsChange(s.claimsChanged)
	return s
}

// options returns opts with the shard selector of the claimed ranges, and
// the claimed ranges as a set.
func (s *selectingLW) options(opts metav1.ListOptions) (metav1.ListOptions, []bool, error) {
	claimed := s.member.claimed()
	if s.shardByUID {
		var ranges []int
		for r, c := range claimed {
			if c {
				ranges = append(ranges, r)
			}
		}
		// The API server refuses an empty range: with none claimed, ask
		// for the single hash 0, which keep drops should an object have it.
		sel := fmt.Sprintf("shardRange(object.metadata.uid, '0x%016x', '0x%016x')", 0, 1)
		if len(ranges) > 0 {
			var err error
			if sel, err = ShardSelector(len(claimed), ranges); err != nil {
				return opts, nil, err
			}
		}
		opts.ShardSelector = sel
	}
	return opts, claimed, nil
}

// List lists with the claimed ranges' selector and drops what keep refuses.
func (s *selectingLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	opts, claimed, err := s.options(opts)
	if err != nil {
		return nil, err
	}
	list, err := s.inner.ListWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, fmt.Errorf("sharding: reading a list: %w", err)
	}
	kept := items[:0]
	for _, item := range items {
		if o, err := meta.Accessor(item); err == nil && s.keep(o, claimed) {
			kept = append(kept, item)
		}
	}
	if len(kept) < len(items) {
		if err := meta.SetList(list, kept); err != nil {
			return nil, fmt.Errorf("sharding: filtering a list: %w", err)
		}
	}
	return list, nil
}

// WatchWithContext watches with the claimed ranges' selector; the watch
// ends with an expired resourceVersion when the claimed ranges change.
func (s *selectingLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts, claimed, err := s.options(opts)
	if err != nil {
		return nil, err
	}
	inner, err := s.inner.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	w := &selectedWatch{inner: inner, keep: s.keep, claimed: claimed, out: make(chan watch.Event), stop: make(chan struct{}), expire: make(chan struct{})}
	s.mu.Lock()
	s.watches[w] = struct{}{}
	s.mu.Unlock()
	go func() {
		w.run()
		s.mu.Lock()
		delete(s.watches, w)
		s.mu.Unlock()
	}()
	// A change between reading the claims and registering the watch
	// would otherwise be missed.
	if !slices.Equal(claimed, s.member.claimed()) {
		w.expireOnce()
	}
	return w, nil
}

// List and Watch serve callers without a context.
func (s *selectingLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), opts)
}

func (s *selectingLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), opts)
}

func (s *selectingLW) claimsChanged() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watches {
		w.expireOnce()
	}
}

// selectedWatch passes on the events keep accepts. An object that leaves
// the selection (an owned object labelled with another replica's range)
// is passed on as deleted, so that the cache forgets it. When expired, it
// sends an Expired error, after which the informer lists again.
type selectedWatch struct {
	inner   watch.Interface
	keep    func(metav1.Object, []bool) bool
	claimed []bool
	out     chan watch.Event

	stopOnce, expireOnceDo sync.Once
	stop, expire           chan struct{}
}

func (w *selectedWatch) run() {
	defer close(w.out)
	defer w.inner.Stop()
	send := func(e watch.Event) bool {
		select {
		case w.out <- e:
			return true
		case <-w.stop:
			return false
		}
	}
	for {
		select {
		case <-w.stop:
			return
		case <-w.expire:
			status := apierrors.NewResourceExpired("sharding: the claimed ranges changed; list again").Status()
			send(watch.Event{Type: watch.Error, Object: &status})
			return
		case e, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			if e.Type == watch.Added || e.Type == watch.Modified || e.Type == watch.Deleted {
				o, err := meta.Accessor(e.Object)
				if err == nil && !w.keep(o, w.claimed) {
					if e.Type != watch.Modified {
						continue
					}
					e.Type = watch.Deleted
				}
			}
			if !send(e) {
				return
			}
		}
	}
}

func (w *selectedWatch) expireOnce() { w.expireOnceDo.Do(func() { close(w.expire) }) }

// Stop ends the watch.
func (w *selectedWatch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// ResultChan returns the events.
func (w *selectedWatch) ResultChan() <-chan watch.Event { return w.out }

var (
	_ toolscache.ListerWatcherWithContext = &selectingLW{}
	_ toolscache.ListerWatcher            = &selectingLW{}
)
