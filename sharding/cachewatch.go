package sharding

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// selectingLW is a ListerWatcher that lists and watches only the objects of
// the claimed ranges (and the unranged ones), for one informer of a cache
// that SelectCache restricts.
//
// When the claims change, its watch switches to the new ranges in place
// (selectedWatch.switchClaims) rather than ending: an ended watch makes
// client-go's reflector list everything again after its backoff, which
// starts at 0.8 s and doubles with each claims change within two minutes
// (up to 30 s), so during a scale-up the cache lagged the claims by many
// seconds and the new owner's passes found its owned objects missing.
type selectingLW struct {
	inner      toolscache.ListerWatcherWithContext
	member     *Member
	example    runtime.Object // the informer's object type
	rangeOf    rangeFunc
	shardByUID bool
	// store is the informer's: a range given up is passed on as the
	// deletion of the objects it holds. Set once the informer exists.
	store toolscache.Store

	mu      sync.Mutex
	watches map[*selectedWatch]struct{}
	// known maps the key of each object passed on to the informer to its
	// range (unranged: -1): what leaves the cache when a range is given
	// up, and the only objects whose move out of the claimed ranges is
	// passed on as a deletion.
	known map[string]int
}

// unranged is known's range of an object that has none.
const unranged = -1

// selecting wraps lw for one informer of example's kind and registers it
// for claim changes.
func (m *Member) selecting(lw toolscache.ListerWatcher, example runtime.Object, rangeOf rangeFunc, shardByUID bool) *selectingLW {
	s := &selectingLW{
		inner: toolscache.ToListerWatcherWithContext(lw), member: m, example: example, rangeOf: rangeOf, shardByUID: shardByUID,
		watches: map[*selectedWatch]struct{}{}, known: map[string]int{},
	}
	m.onClaimsChange(s.claimsChanged)
	return s
}

// keeps reports whether o belongs in a cache that claims claimed, and its
// range when it has one.
func (s *selectingLW) keeps(o metav1.Object, claimed []bool) (r int, ranged, keep bool) {
	r, ranged = s.rangeOf(o, len(claimed))
	return r, ranged, !ranged || claimed[r]
}

// selectRanges returns opts asking the API server for the objects of the
// ranges in set only, as far as it can: the reconciled kind by the shard
// selector of their UIDs (with none, the single hash 0, since the API
// server refuses an empty range); an owned kind, when asked for some
// ranges only, by its range label (Member.RangeLabel). Whatever the server sends is filtered again.
func (s *selectingLW) selectRanges(opts metav1.ListOptions, set []bool, byLabel bool) (metav1.ListOptions, error) {
	var ranges []int
	for r, in := range set {
		if in {
			ranges = append(ranges, r)
		}
	}
	switch {
	case s.shardByUID && len(ranges) == 0:
		opts.ShardSelector = fmt.Sprintf("shardRange(object.metadata.uid, '0x%016x', '0x%016x')", 0, 1)
	case s.shardByUID:
		sel, err := ShardSelector(len(set), ranges)
		if err != nil {
			return opts, err
		}
		opts.ShardSelector = sel
	case byLabel && opts.LabelSelector == "":
		sel, err := s.member.LabelSelector(ranges)
		if err != nil {
			return opts, err
		}
		opts.LabelSelector = sel.String()
	}
	return opts, nil
}

// ListWithContext lists the claimed ranges' objects; the informer's cache
// is replaced by them, and so is what the watches know.
func (s *selectingLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	claimed := s.member.claimed()
	opts, err := s.selectRanges(opts, claimed, false)
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
	known := map[string]int{}
	for _, item := range items {
		o, err := meta.Accessor(item)
		if err != nil {
			continue
		}
		if r, ranged, keep := s.keeps(o, claimed); keep {
			kept = append(kept, item)
			known[keyOf(o)] = knownRange(r, ranged)
		}
	}
	if len(kept) < len(items) {
		if err := meta.SetList(list, kept); err != nil {
			return nil, fmt.Errorf("sharding: filtering a list: %w", err)
		}
	}
	s.mu.Lock()
	s.known = known
	s.mu.Unlock()
	return list, nil
}

// WatchWithContext watches the claimed ranges' objects; the watch switches
// to the new ranges when the claims change.
func (s *selectingLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	claimed := s.member.claimed()
	sel, err := s.selectRanges(opts, claimed, false)
	if err != nil {
		return nil, err
	}
	inner, err := s.inner.WatchWithContext(ctx, sel)
	if err != nil {
		return nil, err
	}
	w := &selectedWatch{
		lw: s, ctx: ctx, opts: opts, inner: inner, claimed: claimed,
		out: make(chan watch.Event), stop: make(chan struct{}), reselect: make(chan struct{}, 1),
	}
	initial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if !initial && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		w.rv = opts.ResourceVersion // it goes on from there: it can switch in place
	}
	s.mu.Lock()
	if initial {
		s.known = map[string]int{} // the informer's cache becomes what this watch sends
	}
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
		w.claimsChanged()
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
		w.claimsChanged()
	}
}

// knownRange is known's value for an object of range r.
func knownRange(r int, ranged bool) int {
	if !ranged {
		return unranged
	}
	return r
}

// passedOn records an event the informer received.
func (s *selectingLW) passedOn(typ watch.EventType, o metav1.Object, r int, ranged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if typ == watch.Deleted {
		delete(s.known, keyOf(o))
		return
	}
	s.known[keyOf(o)] = knownRange(r, ranged) // an owned object may lose its label
}

// isKnown reports whether the informer holds the object under key.
func (s *selectingLW) isKnown(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.known[key]
	return ok
}

// forget removes and returns the objects known in the ranges of released.
func (s *selectingLW) forget(released []bool) []knownObject {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []knownObject
	for k, r := range s.known {
		if r != unranged && released[r] {
			gone = append(gone, knownObject{k, r})
			delete(s.known, k)
		}
	}
	slices.SortFunc(gone, func(a, b knownObject) int { return strings.Compare(a.key, b.key) })
	return gone
}

// knownObject is an object passed on to the informer: its key and range.
type knownObject struct {
	key string
	rng int
}

// keyOf is the informer's key of o.
func keyOf(o metav1.Object) string {
	if ns := o.GetNamespace(); ns != "" {
		return ns + "/" + o.GetName()
	}
	return o.GetName()
}

// selectedWatch passes on the events of the claimed ranges' objects. An
// object the informer holds that leaves them (an owned object labelled with
// another replica's range) is passed on as deleted, so that the cache
// forgets it; the events of an object it never held are dropped, whatever
// their type (passed on as deletions, they reached the handlers as deletions
// of live objects: client-go's RealFIFO delivers a deletion of an object
// its store lacks).
type selectedWatch struct {
	lw   *selectingLW
	ctx  context.Context
	opts metav1.ListOptions // as the informer asked

	// Owned by run.
	inner   watch.Interface
	claimed []bool
	// rv is the resourceVersion up to which the events were passed on;
	// empty while the watch sends its initial events.
	rv string

	out      chan watch.Event
	reselect chan struct{}
	stopOnce sync.Once
	stop     chan struct{}
}

func (w *selectedWatch) run() {
	defer close(w.out)
	defer func() { w.inner.Stop() }()
	for {
		select {
		case <-w.stop:
			return
		case <-w.reselect:
			if !w.switchClaims() {
				return
			}
		case e, ok := <-w.inner.ResultChan():
			if !ok || !w.pass(e) {
				return
			}
		}
	}
}

// send passes e on; false when the informer stopped the watch.
func (w *selectedWatch) send(e watch.Event) bool {
	select {
	case w.out <- e:
		return true
	case <-w.stop:
		return false
	}
}

// pass passes on an event of the API server's watch, if it concerns the
// claimed ranges.
func (w *selectedWatch) pass(e watch.Event) bool {
	o, err := meta.Accessor(e.Object)
	if err != nil || e.Type == watch.Error {
		return w.send(e)
	}
	rv := o.GetResourceVersion()
	if e.Type == watch.Bookmark {
		if w.rv != "" || o.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			w.rv = rv
		}
		return w.send(e)
	}
	if w.rv != "" {
		w.rv = rv
	}
	r, ranged, keep := w.lw.keeps(o, w.claimed)
	if !keep {
		if !w.lw.isKnown(keyOf(o)) {
			return true
		}
		e.Type = watch.Deleted
	}
	if !w.send(e) {
		return false
	}
	w.lw.passedOn(e.Type, o, r, ranged)
	return true
}

// switchClaims moves the watch to the ranges claimed now: it passes on the
// acquired ranges' objects as of w.rv as additions and the released ranges'
// as deletions, then a bookmark at w.rv (the additions carry older
// resourceVersions, and the informer resumes from the last one it saw),
// and watches on from w.rv. A watch still sending its initial events, or
// whose resourceVersion the API server no longer has, ends as expired
// instead, and the informer lists again.
func (w *selectedWatch) switchClaims() bool {
	claims := w.lw.member.claimed()
	if slices.Equal(claims, w.claimed) {
		return true
	}
	if w.rv == "" {
		return w.expire("the claimed ranges changed during the initial list")
	}
	acquired, released := make([]bool, len(claims)), make([]bool, len(claims))
	for r := range claims {
		acquired[r] = claims[r] && !w.claimed[r]
		released[r] = w.claimed[r] && !claims[r]
	}
	var added []runtime.Object
	if slices.Contains(acquired, true) {
		opts, err := w.lw.selectRanges(metav1.ListOptions{ResourceVersion: w.rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact}, acquired, true)
		if err != nil {
			return w.expire(err.Error())
		}
		list, err := w.lw.inner.ListWithContext(w.ctx, opts)
		if err != nil {
			return w.expire(fmt.Sprintf("listing the acquired ranges at resourceVersion %s: %v", w.rv, err))
		}
		items, err := meta.ExtractListWithAlloc(list)
		if err != nil {
			return w.expire(fmt.Sprintf("reading a list: %v", err))
		}
		for _, item := range items {
			if o, err := meta.Accessor(item); err == nil {
				if r, ranged := w.lw.rangeOf(o, len(claims)); ranged && acquired[r] {
					added = append(added, item)
				}
			}
		}
	}
	opts := w.opts
	opts.ResourceVersion, opts.ResourceVersionMatch, opts.SendInitialEvents = w.rv, "", nil
	opts, err := w.lw.selectRanges(opts, claims, false)
	if err != nil {
		return w.expire(err.Error())
	}
	inner, err := w.lw.inner.WatchWithContext(w.ctx, opts)
	if err != nil {
		return w.expire(fmt.Sprintf("watching from resourceVersion %s: %v", w.rv, err))
	}
	w.inner.Stop()
	w.inner, w.claimed = inner, claims

	for _, item := range added {
		o, _ := meta.Accessor(item)
		r, ranged, _ := w.lw.keeps(o, claims)
		if !w.send(watch.Event{Type: watch.Added, Object: item}) {
			return false
		}
		w.lw.passedOn(watch.Added, o, r, ranged)
	}
	for _, k := range w.lw.forget(released) {
		if !w.send(watch.Event{Type: watch.Deleted, Object: w.lastState(k.key, k.rng)}) {
			return false
		}
	}
	return w.send(watch.Event{Type: watch.Bookmark, Object: w.atRV()})
}

// lastState returns the informer's copy of the object under key, or, when
// the informer has not stored it yet, a stand-in with its namespace, name
// and the range label of the range given up (which places an owned
// object; a reconciled object is placed by its UID, which the stand-in
// lacks, and it carries no finalizer, so nothing waits on its deletion),
// with resourceVersion w.rv.
func (w *selectedWatch) lastState(key string, rng int) runtime.Object {
	var obj runtime.Object
	if w.lw.store != nil {
		if o, ok, err := w.lw.store.GetByKey(key); err == nil && ok {
			obj, _ = o.(runtime.Object)
		}
	}
	if obj == nil {
		obj = w.lw.example.DeepCopyObject()
		ns, name, _ := toolscache.SplitMetaNamespaceKey(key)
		if o, err := meta.Accessor(obj); err == nil {
			o.SetNamespace(ns)
			o.SetName(name)
			o.SetLabels(map[string]string{w.lw.member.rangeLabel: strconv.Itoa(rng)})
		}
	} else {
		obj = obj.DeepCopyObject()
	}
	if o, err := meta.Accessor(obj); err == nil {
		o.SetResourceVersion(w.rv)
	}
	return obj
}

// atRV returns an empty object of the informer's kind at w.rv, for a
// bookmark.
func (w *selectedWatch) atRV() runtime.Object {
	obj := w.lw.example.DeepCopyObject()
	if o, err := meta.Accessor(obj); err == nil {
		o.SetResourceVersion(w.rv)
	}
	return obj
}

// expire ends the watch with an Expired error, after which the informer
// lists again.
func (w *selectedWatch) expire(why string) bool {
	w.lw.member.log.V(1).Info("a selected cache lists again", "reason", why)
	status := apierrors.NewResourceExpired("sharding: " + why + "; list again").Status()
	w.send(watch.Event{Type: watch.Error, Object: &status})
	return false
}

// claimsChanged asks run to switch the watch to the claimed ranges.
func (w *selectedWatch) claimsChanged() {
	select {
	case w.reselect <- struct{}{}:
	default:
	}
}

// Stop ends the watch.
func (w *selectedWatch) Stop() { w.stopOnce.Do(func() { close(w.stop) }) }

// ResultChan returns the events.
func (w *selectedWatch) ResultChan() <-chan watch.Event { return w.out }

var (
	_ toolscache.ListerWatcherWithContext = &selectingLW{}
	_ toolscache.ListerWatcher            = &selectingLW{}
)
