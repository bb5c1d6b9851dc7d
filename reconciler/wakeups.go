package reconciler

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Wake-ups that can only find nothing to do are dropped in the watches
// Builder sets up, before they reach the queue: the watch event of a write
// a pass made itself (causeOwnWrite), and a status update of an owned
// object whose rollout the owner's last pass waited on that leaves it in
// progress (causeRolloutProgress; such updates start one pass per
// Options.RolloutProgressInterval instead). Design and trade-offs:
// docs/reconciler.md, "Wake-ups that find nothing to do".
const (
	causeOwnWrite        = "own-write"
	causeRolloutProgress = "rollout-progress"
)

// maxWritesPerKey bounds the writes remembered per owner; a pass that
// writes more forgets its oldest, whose events then start a pass as usual.
const maxWritesPerKey = 32

// ownWrite is one write a pass made: the object (gk, key) moved from
// resourceVersion prev (the version the write was locked to, or the one
// the caller held; empty for a server-side apply, which names none) to
// answer. While the request is in flight (answer unknown), the update
// events of the object are parked: the watch event of a write can reach
// the informer before its answer reaches the client.
type ownWrite struct {
	gk           schema.GroupKind
	key          client.ObjectKey
	prev, answer string
	inFlight     bool
	parked       []parkedEvent
	// passed is the newest version of the object an event that was not
	// parked (a create) carried while the write was in flight: a write
	// answered with it, or an older one, has had its event.
	passed string
}

// parkedEvent is an update event that arrived while a write of its object
// was in flight.
type parkedEvent struct{ old, new string }

// mine reports whether the update from oldRV to newRV is exactly the
// write: it lands on the answer, coming from the version the write started
// from (when the write named one). An update that keeps its version is a
// resync or relist of an unchanged object, never a write; an apply that
// changed nothing answers with the version it found, which such an update
// would otherwise match.
func (o *ownWrite) mine(oldRV, newRV string) bool {
	return o.answer != "" && o.answer == newRV && oldRV != newRV && (o.prev == "" || o.prev == oldRV)
}

// verdict is what the watch does with an update event.
type verdict int

const (
	startPass verdict = iota // start a pass
	drop                     // the event of our own write
	parkIt                   // decided when the write in flight answers
)

// waited is an owned object a pass stopped waiting on, as Scope.Rollout
// judged it InProgress.
type waited struct {
	gk         schema.GroupKind
	key        client.ObjectKey
	uid        types.UID
	generation int64
}

// wakeups holds, per owner key, the writes its passes made whose watch
// events have not arrived yet, and the owned objects its last pass waited
// on. Both live only while they can match an event: a write until its
// event (or a later one of that object) arrives, the waits until the
// owner's next pass; and both are dropped when the owner is gone. Memory:
// at most maxWritesPerKey writes per owner (a write whose event never
// reaches the watch stays until a later event of its object), and the
// waits of the owners waiting now.
type wakeups struct {
	mu     sync.Mutex
	writes map[types.NamespacedName][]*ownWrite
	waits  map[types.NamespacedName][]waited
	// refresh holds, per owner whose in-progress rollout updates were
	// held back, the timer that queues it once Options.
	// RolloutProgressInterval has passed; a pass that starts first
	// stops it (that pass reads the state the updates carried).
	refresh map[types.NamespacedName]*time.Timer
	// queue is the controller's, once its watches started (wakeupSource):
	// a parked event that turns out not to be ours is queued there.
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
}

func newWakeups() *wakeups {
	return &wakeups{writes: map[types.NamespacedName][]*ownWrite{}, waits: map[types.NamespacedName][]waited{},
		refresh: map[types.NamespacedName]*time.Timer{}}
}

// sending records a write of (gk, key) from prev that the owner's pass is
// about to send; sent completes it.
func (w *wakeups) sending(owner types.NamespacedName, gk schema.GroupKind, key client.ObjectKey, prev string) *ownWrite {
	o := &ownWrite{gk: gk, key: key, prev: prev, inFlight: true}
	w.mu.Lock()
	defer w.mu.Unlock()
	list := append(w.writes[owner], o)
	if len(list) > maxWritesPerKey {
		list = append(list[:0:0], list[len(list)-maxWritesPerKey:]...)
	}
	w.writes[owner] = list
	return o
}

// sent completes o with the resourceVersion of the write's answer ("":
// it failed, or stored nothing) and judges the events parked meanwhile:
// it returns how many were the write's own (dropped) and whether any
// other was, so the owner must be queued.
func (w *wakeups) sent(owner types.NamespacedName, o *ownWrite, answer string) (dropped int, queue bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	o.inFlight, o.answer = false, answer
	if answer == o.prev {
		o.answer = "" // nothing stored, so no event of ours
	}
	consumed := o.answer == ""
	for _, e := range o.parked {
		switch {
		case !consumed && o.mine(e.old, e.new):
			dropped++
			consumed = true
		default:
			queue = true
			if cmp, err := resourceversion.CompareResourceVersion(o.answer, e.new); err == nil && cmp <= 0 {
				consumed = true // its event, if any, came before
			}
		}
	}
	o.parked = nil
	if !consumed && o.passed != "" {
		if cmp, err := resourceversion.CompareResourceVersion(o.answer, o.passed); err == nil && cmp <= 0 {
			consumed = true // its event came while it was in flight
		}
	}
	if consumed {
		w.removeLocked(owner, o)
	}
	return dropped, queue
}

func (w *wakeups) removeLocked(owner types.NamespacedName, o *ownWrite) {
	list := w.writes[owner]
	if i := slices.Index(list, o); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	w.setWrites(owner, list)
}

// ownWrite judges the update of (gk, key) from resourceVersion oldRV to
// newRV: drop when it is exactly a write of the owner's passes (consumed),
// park it while a write of the object is in flight (and a queue can take
// it back; a create, from oldRV "", starts a pass anyway), pass otherwise. Writes the event shows are past (an older or
// the same version, left behind by a relist that merged their events into
// this one) are forgotten.
func (w *wakeups) ownWrite(owner types.NamespacedName, gk schema.GroupKind, key client.ObjectKey, oldRV, newRV string) verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	list, ok := w.writes[owner]
	if !ok {
		return startPass
	}
	var inFlight *ownWrite
	for _, o := range list {
		if o.gk != gk || o.key != key {
			continue
		}
		if !o.inFlight && o.mine(oldRV, newRV) {
			w.removeLocked(owner, o)
			return drop
		}
		if o.inFlight && inFlight == nil {
			inFlight = o
		}
	}
	if inFlight != nil && oldRV != "" && w.queue.Load() != nil {
		inFlight.parked = append(inFlight.parked, parkedEvent{old: oldRV, new: newRV})
		return parkIt
	}
	if inFlight != nil {
		// Not parked (a create starts a pass anyway): sent learns from
		// passed that this event may have been the write's own.
		if cmp, err := resourceversion.CompareResourceVersion(inFlight.passed, newRV); inFlight.passed == "" || (err == nil && cmp < 0) {
			inFlight.passed = newRV
		}
	}
	kept := list[:0]
	for _, o := range list {
		if o.gk == gk && o.key == key && !o.inFlight {
			if cmp, err := resourceversion.CompareResourceVersion(o.answer, newRV); err == nil && cmp <= 0 {
				continue // its event, if any, came before this one
			}
		}
		kept = append(kept, o)
	}
	w.setWrites(owner, kept)
	return startPass
}

// forgetObject drops the completed writes of (gk, key): it was deleted.
func (w *wakeups) forgetObject(owner types.NamespacedName, gk schema.GroupKind, key client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := w.writes[owner][:0]
	for _, o := range w.writes[owner] {
		if o.gk != gk || o.key != key || o.inFlight {
			kept = append(kept, o)
		}
	}
	w.setWrites(owner, kept)
}

func (w *wakeups) setWrites(owner types.NamespacedName, list []*ownWrite) {
	if len(list) == 0 {
		forgetKey(&w.writes, owner)
		return
	}
	w.writes[owner] = list
}

// waitOn records the owned objects the owner's pass ended waiting on,
// replacing any earlier record.
func (w *wakeups) waitOn(owner types.NamespacedName, objs []waited) {
	if len(objs) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits[owner] = objs
}

// waitingOn returns what the owner's last pass saw of (gk, key), if it
// ended waiting on its rollout.
func (w *wakeups) waitingOn(owner types.NamespacedName, gk schema.GroupKind, key client.ObjectKey) (waited, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.waits[owner] {
		if o.gk == gk && o.key == key {
			return o, true
		}
	}
	return waited{}, false
}

// beginPass ends what the owner's last pass waited on: the pass now
// running sees every event until it ends waiting again.
func (w *wakeups) beginPass(owner types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	forgetKey(&w.waits, owner)
	w.stopRefreshLocked(owner)
}

// refreshAfter queues owner after d, unless a pass of it starts first or a
// refresh is already due: the in-progress rollout updates held back since
// its last pass then start one pass, at most d after the first of them.
func (w *wakeups) refreshAfter(owner types.NamespacedName, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, due := w.refresh[owner]; due {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		w.mu.Lock()
		current := w.refresh[owner] == t
		if current {
			forgetKey(&w.refresh, owner)
		}
		w.mu.Unlock()
		if current {
			w.requeue(owner)
		}
	})
	w.refresh[owner] = t
}

func (w *wakeups) stopRefreshLocked(owner types.NamespacedName) {
	if t, ok := w.refresh[owner]; ok {
		t.Stop()
		forgetKey(&w.refresh, owner)
	}
}

// forget drops everything held for the owner: it is gone.
func (w *wakeups) forget(owner types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	forgetKey(&w.waits, owner)
	forgetKey(&w.writes, owner)
	w.stopRefreshLocked(owner)
}

// forgetKey deletes owner from *m, and replaces *m with a new map once it
// is empty: a Go map never gives back the room of its largest size, and a
// fleet-wide rollout grows the wake-up filter's maps and the horizon to an
// entry per owner.
func forgetKey[V any](m *map[types.NamespacedName]V, owner types.NamespacedName) {
	delete(*m, owner)
	if len(*m) == 0 {
		*m = map[types.NamespacedName]V{}
	}
}

// wakeupFilter is the predicate of one watch Builder sets up: T's own
// (owned false; the owner is the object) or that of an owned kind gvk (the
// owner is the object's controller, if of T's kind, as
// handler.EnqueueRequestForOwner maps it). It drops UPDATE events that can
// only start a pass with nothing to do, and counts them; creates, deletes,
// generic events and every other update pass.
type wakeupFilter struct {
	w         *wakeups
	ownerKind schema.GroupKind
	gvk       schema.GroupVersionKind
	owned     bool
	// refresh is Options.RolloutProgressInterval, defaulted; negative:
	// every update starts a pass.
	refresh time.Duration
	skipped map[string]prometheus.Counter
	// seen, in T's watch, is told when the cache holds a pass's own
	// write: the pass that would have dropped its entry does not run.
	seen *horizon
}

func (f *wakeupFilter) predicate() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool { return f.update(e.ObjectOld, e.ObjectNew) },
		CreateFunc: func(e event.CreateEvent) bool {
			// An apply that created the object: its event is this one, which
			// starts a pass as every create does; the write is past.
			if e.Object != nil {
				if owner, ok := f.owner(e.Object); ok {
					f.w.ownWrite(owner, f.gvk.GroupKind(), client.ObjectKeyFromObject(e.Object), "", e.Object.GetResourceVersion())
				}
			}
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			if e.Object != nil {
				if owner, ok := f.owner(e.Object); ok {
					f.w.forgetObject(owner, f.gvk.GroupKind(), client.ObjectKeyFromObject(e.Object))
				}
			}
			return true
		},
	}
}

// update reports whether the update from old to new starts a pass.
func (f *wakeupFilter) update(old, new client.Object) bool {
	if old == nil || new == nil {
		return true
	}
	owner, ok := f.owner(new)
	if !ok {
		return true
	}
	key := client.ObjectKeyFromObject(new)
	switch f.w.ownWrite(owner, f.gvk.GroupKind(), key, old.GetResourceVersion(), new.GetResourceVersion()) {
	case drop:
		if f.seen != nil {
			f.seen.caughtUp(owner, new.GetResourceVersion())
		}
		f.skipped[causeOwnWrite].Inc()
		return false
	case parkIt:
		return false
	}
	if !f.owned || f.refresh < 0 {
		return true
	}
	if _, metadataOnly := new.(*metav1.PartialObjectMetadata); metadataOnly {
		return true // no status to judge: every update would look in progress
	}
	seen, ok := f.w.waitingOn(owner, f.gvk.GroupKind(), key)
	if !ok || seen.uid != new.GetUID() || seen.generation != new.GetGeneration() || !statusOnly(old, new) {
		return true
	}
	if res, err := computeStatus(new, f.gvk); err != nil || res.Status != status.InProgressStatus || f.w.queue.Load() == nil {
		return true
	}
	f.w.refreshAfter(owner, f.refresh)
	f.skipped[causeRolloutProgress].Inc()
	return false
}

// owner returns the key of the object's owner: the object itself in T's
// watch, its controller of T's kind in an owned kind's.
func (f *wakeupFilter) owner(obj client.Object) (types.NamespacedName, bool) {
	if !f.owned {
		return client.ObjectKeyFromObject(obj), true
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != f.ownerKind.Kind {
		return types.NamespacedName{}, false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != f.ownerKind.Group {
		return types.NamespacedName{}, false
	}
	// A cluster-scoped owner's key has no namespace; its record is then
	// never found here and its events pass, which is safe.
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}, true
}

// statusOnly reports whether old and new differ, outside status, in
// nothing a pass acts on: the same object, generation (spec), labels,
// annotations, owner references, finalizers and deletion timestamp.
func statusOnly(old, new client.Object) bool {
	return old.GetUID() == new.GetUID() &&
		old.GetGeneration() == new.GetGeneration() &&
		equality.Semantic.DeepEqual(old.GetLabels(), new.GetLabels()) &&
		equality.Semantic.DeepEqual(old.GetAnnotations(), new.GetAnnotations()) &&
		equality.Semantic.DeepEqual(old.GetOwnerReferences(), new.GetOwnerReferences()) &&
		equality.Semantic.DeepEqual(old.GetFinalizers(), new.GetFinalizers()) &&
		old.GetDeletionTimestamp().Equal(new.GetDeletionTimestamp())
}

// wakeupSource gives wakeups the controller's queue, for the parked events
// that turn out not to be ours; it queues nothing itself.
type wakeupSource struct{ w *wakeups }

func (s wakeupSource) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.w.queue.Store(&q)
	return nil
}

// requeue queues owner: an event parked for it was not its own write's.
func (w *wakeups) requeue(owner types.NamespacedName) {
	if q := w.queue.Load(); q != nil {
		(*q).Add(reconcile.Request{NamespacedName: owner})
	}
}
