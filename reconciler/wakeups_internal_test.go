package reconciler

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

var (
	widgetGK     = schema.GroupKind{Group: "test.reconcilekit.io", Kind: "Widget"}
	deploymentGK = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	ownerKey     = types.NamespacedName{Namespace: "ns", Name: "w"}
	objKey       = client.ObjectKey{Namespace: "ns", Name: "w"}
)

func testFilter(w *wakeups, owned bool) *wakeupFilter {
	gvk := schema.GroupVersionKind{Group: "test.reconcilekit.io", Version: "v1", Kind: "Widget"}
	if owned {
		gvk = appsv1.SchemeGroupVersion.WithKind("Deployment")
	}
	return &wakeupFilter{w: w, ownerKind: widgetGK, gvk: gvk, owned: owned, refresh: time.Hour, skipped: map[string]prometheus.Counter{
		causeOwnWrite:        prometheus.NewCounter(prometheus.CounterOpts{Name: "own"}),
		causeRolloutProgress: prometheus.NewCounter(prometheus.CounterOpts{Name: "rollout"}),
	}}
}

// deployment is the owner's Deployment at resourceVersion rv, generation 2,
// with status st.
func deployment(rv string, st appsv1.DeploymentStatus) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "d-uid", ResourceVersion: rv, Generation: 2,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "test.reconcilekit.io/v1", Kind: "Widget", Name: "w", UID: "w-uid", Controller: ptr.To(true)}}},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status: st,
	}
}

var (
	inProgress1 = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1}
	inProgress2 = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2}
	current     = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}
	failed = appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}}
)

func TestWakeupFilterRolloutProgress(t *testing.T) {
	waiting := waited{gk: deploymentGK, key: objKey, uid: "d-uid", generation: 2}
	for name, tc := range map[string]struct {
		old, new *appsv1.Deployment
		waits    []waited
		refresh  time.Duration
		pass     bool
	}{
		"in progress, status only":   {old: deployment("10", inProgress1), new: deployment("11", inProgress2), waits: []waited{waiting}},
		"current":                    {old: deployment("10", inProgress1), new: deployment("11", current), waits: []waited{waiting}, pass: true},
		"failed":                     {old: deployment("10", inProgress1), new: deployment("11", failed), waits: []waited{waiting}, pass: true},
		"nobody waits":               {old: deployment("10", inProgress1), new: deployment("11", inProgress2), pass: true},
		"every event (negative)":     {old: deployment("10", inProgress1), new: deployment("11", inProgress2), waits: []waited{waiting}, refresh: -1, pass: true},
		"another object waited on":   {old: deployment("10", inProgress1), new: deployment("11", inProgress2), waits: []waited{{gk: deploymentGK, key: client.ObjectKey{Namespace: "ns", Name: "other"}, uid: "x", generation: 2}}, pass: true},
		"another generation waited":  {old: deployment("10", inProgress1), new: deployment("11", inProgress2), waits: []waited{{gk: deploymentGK, key: objKey, uid: "d-uid", generation: 1}}, pass: true},
		"recreated":                  {old: deployment("10", inProgress1), new: deployment("11", inProgress2), waits: []waited{{gk: deploymentGK, key: objKey, uid: "old-uid", generation: 2}}, pass: true},
		"spec changed":               {old: with(deployment("10", inProgress1), func(d *appsv1.Deployment) { d.Generation = 1 }), new: deployment("11", inProgress2), waits: []waited{waiting}, pass: true},
		"label changed":              {old: deployment("10", inProgress1), new: with(deployment("11", inProgress2), func(d *appsv1.Deployment) { d.Labels = map[string]string{"a": "b"} }), waits: []waited{waiting}, pass: true},
		"annotation changed":         {old: deployment("10", inProgress1), new: with(deployment("11", inProgress2), func(d *appsv1.Deployment) { d.Annotations = map[string]string{"a": "b"} }), waits: []waited{waiting}, pass: true},
		"finalizer added":            {old: deployment("10", inProgress1), new: with(deployment("11", inProgress2), func(d *appsv1.Deployment) { d.Finalizers = []string{"f"} }), waits: []waited{waiting}, pass: true},
		"deleting":                   {old: deployment("10", inProgress1), new: with(deployment("11", inProgress2), func(d *appsv1.Deployment) { d.DeletionTimestamp = &metav1.Time{} }), waits: []waited{waiting}, pass: true},
		"owner references changed":   {old: deployment("10", inProgress1), new: with(deployment("11", inProgress2), func(d *appsv1.Deployment) { d.OwnerReferences[0].UID = "new" }), waits: []waited{waiting}, pass: true},
		"controlled by another kind": {old: deployment("10", inProgress1), new: with(deployment("11", inProgress2), func(d *appsv1.Deployment) { d.OwnerReferences[0].Kind = "Gadget" }), waits: []waited{waiting}, pass: true},
		"not controlled":             {old: deployment("10", inProgress1), new: with(deployment("11", inProgress2), func(d *appsv1.Deployment) { d.OwnerReferences = nil }), waits: []waited{waiting}, pass: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := withQueue(newWakeups())
			w.waitOn(ownerKey, tc.waits)
			f := testFilter(w, true)
			if tc.refresh != 0 {
				f.refresh = tc.refresh
			}
			assert.Equal(t, tc.pass, f.update(tc.old, tc.new))
			w.forget(ownerKey) // no refresh left running
		})
	}
}

// An owned kind watched metadata-only (Options.Owns lists a
// metav1.PartialObjectMetadata) carries no status: kstatus would judge
// every update of a Deployment in progress, the one that ends its rollout
// too, and the owner would wait forever.
func TestWakeupFilterRolloutProgressMetadataOnly(t *testing.T) {
	w := newWakeups()
	w.waitOn(ownerKey, []waited{{gk: deploymentGK, key: objKey, uid: "d-uid", generation: 2}})
	meta := func(rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: deployment(rv, current).ObjectMeta}
	}
	assert.True(t, testFilter(w, true).update(meta("10"), meta("11")), "the rollout may have ended: the event cannot say")
}

func with[O any](o O, mutate func(O)) O {
	mutate(o)
	return o
}

// The record of what a pass waited on ends when the owner's next pass
// begins, or when the owner is gone.
func TestWaitsEndWithTheNextPass(t *testing.T) {
	w := withQueue(newWakeups())
	f := testFilter(w, true)
	waiting := []waited{{gk: deploymentGK, key: objKey, uid: "d-uid", generation: 2}}
	w.waitOn(ownerKey, waiting)
	assert.False(t, f.update(deployment("10", inProgress1), deployment("11", inProgress2)))
	w.beginPass(ownerKey)
	assert.True(t, f.update(deployment("11", inProgress1), deployment("12", inProgress2)))
	w.waitOn(ownerKey, waiting)
	w.forget(ownerKey)
	assert.True(t, f.update(deployment("12", inProgress1), deployment("13", inProgress2)))
	assert.Empty(t, w.waits)
	assert.Empty(t, w.refresh)
}

// withQueue gives w a controller queue, as wakeupSource does once the
// controller starts, and returns w.
func withQueue(w *wakeups) *wakeups {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	w.queue.Store(&q)
	return w
}

// In-progress updates held back start one pass RolloutProgressInterval
// after the first of them, unless a pass of the owner starts first; a
// filter whose controller has no queue yet holds nothing back.
func TestRolloutProgressRefresh(t *testing.T) {
	waiting := []waited{{gk: deploymentGK, key: objKey, uid: "d-uid", generation: 2}}
	t.Run("one pass for the updates held back", func(t *testing.T) {
		w := withQueue(newWakeups())
		f := testFilter(w, true)
		f.refresh = 50 * time.Millisecond
		w.waitOn(ownerKey, waiting)
		for i := range 3 {
			assert.False(t, f.update(deployment(fmt.Sprint(10+i), inProgress1), deployment(fmt.Sprint(11+i), inProgress2)))
		}
		q := *w.queue.Load()
		assert.Eventually(t, func() bool { return q.Len() == 1 }, 5*time.Second, time.Millisecond, "the owner is queued once")
		assert.Empty(t, w.refresh)
	})
	t.Run("a pass that starts first stops it", func(t *testing.T) {
		w := withQueue(newWakeups())
		f := testFilter(w, true)
		w.waitOn(ownerKey, waiting)
		assert.False(t, f.update(deployment("10", inProgress1), deployment("11", inProgress2)))
		timer := w.refresh[ownerKey]
		w.beginPass(ownerKey)
		assert.False(t, timer.Stop(), "stopped by the pass")
		assert.Empty(t, w.refresh)
	})
	t.Run("without a queue every update starts a pass", func(t *testing.T) {
		w := newWakeups()
		w.waitOn(ownerKey, waiting)
		assert.True(t, testFilter(w, true).update(deployment("10", inProgress1), deployment("11", inProgress2)))
		assert.Empty(t, w.refresh)
	})
}

func widget(rv string) *appsv1.Deployment {
	// The For watch's filter only reads metadata: any object will do.
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", ResourceVersion: rv}}
}

func TestWakeupFilterOwnWrites(t *testing.T) {
	t.Run("a create's event that arrives before the apply's answer", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, true)
		o := w.sending(ownerKey, deploymentGK, objKey, "")
		assert.True(t, f.predicate().Create(event.CreateEvent{Object: deployment("5", current)}), "a create starts a pass")
		dropped, queue := w.sent(ownerKey, o, "5")
		assert.Zero(t, dropped)
		assert.False(t, queue)
		assert.Empty(t, w.writes, "its event came: nothing left to wait for")
	})
	t.Run("a locked write's event is dropped once", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, false)
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "10", answer: "11"})
		assert.False(t, f.update(widget("10"), widget("11")))
		assert.True(t, f.update(widget("10"), widget("11")), "consumed")
		assert.Empty(t, w.writes)
	})
	t.Run("the horizon learns the cache caught up", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, false)
		f.seen = newHorizon()
		f.seen.record(ownerKey, "10", widget("11"), nil)
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "10", answer: "11"})
		assert.False(t, f.update(widget("10"), widget("11")))
		assert.Empty(t, f.seen.seen, "no pass comes to drop the entry")
	})
	t.Run("a chain of writes", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, false)
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "10", answer: "11"}) // finalizer
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "11", answer: "12"}) // status
		assert.False(t, f.update(widget("10"), widget("11")))
		assert.False(t, f.update(widget("11"), widget("12")))
		assert.Empty(t, w.writes)
	})
	t.Run("an event that merges a foreign write with ours passes", func(t *testing.T) {
		// Locked to 11 (a re-read after a conflict), but the informer
		// never showed 11: the event carries another writer's change.
		w := newWakeups()
		f := testFilter(w, false)
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "11", answer: "12"})
		assert.True(t, f.update(widget("10"), widget("12")))
		assert.Empty(t, w.writes, "the write's event is past")
	})
	t.Run("a foreign write after ours passes", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, false)
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "10", answer: "11"})
		assert.True(t, f.update(widget("10"), widget("13")), "a relist that skipped ours")
		assert.Empty(t, w.writes)
	})
	t.Run("a foreign write before ours's event keeps ours", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, false)
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "10", answer: "12"})
		assert.True(t, f.update(widget("9"), widget("10")))
		assert.False(t, f.update(widget("10"), widget("12")))
	})
	t.Run("an apply names no version it started from", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, true)
		wrote(w, ownerKey, ownWrite{gk: deploymentGK, key: objKey, answer: "11"})
		assert.False(t, f.update(deployment("10", inProgress1), deployment("11", inProgress1)))
	})
	t.Run("a resync is never a write", func(t *testing.T) {
		// An apply that changed nothing answers with the version it found
		// and makes no event; the informer's resync (or a relist of the
		// unchanged object) is an update from that version to itself,
		// which a plain controller gets.
		w := newWakeups()
		f := testFilter(w, true)
		wrote(w, ownerKey, ownWrite{gk: deploymentGK, key: objKey, answer: "11"})
		assert.True(t, f.update(deployment("11", inProgress1), deployment("11", inProgress1)))
		assert.Empty(t, w.writes, "the write is past")
	})
	t.Run("another owner's, object's or kind's write", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, false)
		wrote(w, types.NamespacedName{Namespace: "ns", Name: "other"}, ownWrite{gk: widgetGK, key: objKey, prev: "10", answer: "11"})
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: client.ObjectKey{Namespace: "ns", Name: "other"}, prev: "10", answer: "11"})
		wrote(w, ownerKey, ownWrite{gk: deploymentGK, key: objKey, prev: "10", answer: "11"})
		assert.True(t, f.update(widget("10"), widget("11")))
	})
	t.Run("deletes and creates always pass; a delete forgets", func(t *testing.T) {
		w := newWakeups()
		p := testFilter(w, false).predicate()
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "10", answer: "11"})
		assert.True(t, p.Create(event.CreateEvent{Object: widget("11")}))
		assert.Empty(t, w.writes, "a create's event is past its write")
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "11", answer: "12"})
		assert.True(t, p.Delete(event.DeleteEvent{Object: widget("12")}))
		assert.Empty(t, w.writes)
	})
	t.Run("bounded per owner", func(t *testing.T) {
		w := newWakeups()
		for i := range 2 * maxWritesPerKey {
			wrote(w, ownerKey, ownWrite{gk: widgetGK, key: client.ObjectKey{Namespace: "ns", Name: string(rune('a' + i))}, answer: "1"})
		}
		assert.Len(t, w.writes[ownerKey], maxWritesPerKey)
	})
}

// wrote records a completed write, as a pass's client does.
func wrote(w *wakeups, owner types.NamespacedName, o ownWrite) {
	w.sent(owner, w.sending(owner, o.gk, o.key, o.prev), o.answer)
}

// The watch event of a write can reach the informer before the write's
// answer reaches the pass: while the write is in flight, the object's
// update events are parked, and judged by the answer.
func TestWakeupFilterParksEventsOfWritesInFlight(t *testing.T) {
	setup := func() (*wakeups, *wakeupFilter, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		w := newWakeups()
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		t.Cleanup(q.ShutDown)
		assert.NoError(t, wakeupSource{w: w}.Start(context.Background(), q))
		return w, testFilter(w, false), q
	}
	t.Run("ours", func(t *testing.T) {
		w, f, q := setup()
		o := w.sending(ownerKey, widgetGK, objKey, "10")
		assert.False(t, f.update(widget("10"), widget("11")), "parked")
		dropped, queue := w.sent(ownerKey, o, "11")
		assert.Equal(t, 1, dropped)
		assert.False(t, queue)
		assert.Zero(t, q.Len())
		assert.Empty(t, w.writes)
	})
	t.Run("someone else's, then ours", func(t *testing.T) {
		w, f, _ := setup()
		o := w.sending(ownerKey, widgetGK, objKey, "")
		assert.False(t, f.update(widget("9"), widget("10")), "parked")
		assert.False(t, f.update(widget("10"), widget("11")), "parked")
		dropped, queue := w.sent(ownerKey, o, "11")
		assert.Equal(t, 1, dropped)
		assert.True(t, queue, "the other writer's event starts a pass")
		assert.Empty(t, w.writes)
	})
	t.Run("the write failed", func(t *testing.T) {
		w, f, q := setup()
		o := w.sending(ownerKey, widgetGK, objKey, "10")
		assert.False(t, f.update(widget("10"), widget("11")), "parked")
		dropped, queue := w.sent(ownerKey, o, "")
		assert.Zero(t, dropped)
		assert.True(t, queue)
		w.requeue(ownerKey)
		assert.Equal(t, 1, q.Len())
		assert.Empty(t, w.writes)
	})
	t.Run("the event of an earlier write, answered, while the next is in flight", func(t *testing.T) {
		w, f, q := setup()
		wrote(w, ownerKey, ownWrite{gk: widgetGK, key: objKey, prev: "10", answer: "11"}) // finalizer
		o := w.sending(ownerKey, widgetGK, objKey, "11")                                  // status
		assert.False(t, f.update(widget("10"), widget("11")), "dropped")
		assert.False(t, f.update(widget("11"), widget("12")), "parked")
		dropped, queue := w.sent(ownerKey, o, "12")
		assert.Equal(t, 1, dropped)
		assert.False(t, queue)
		assert.Zero(t, q.Len())
		assert.Empty(t, w.writes)
	})
	t.Run("nothing parked: the event comes later", func(t *testing.T) {
		w, f, _ := setup()
		o := w.sending(ownerKey, widgetGK, objKey, "10")
		dropped, queue := w.sent(ownerKey, o, "11")
		assert.Zero(t, dropped)
		assert.False(t, queue)
		assert.False(t, f.update(widget("10"), widget("11")))
	})
	t.Run("a create is not parked: it starts a pass, so it is not counted as dropped", func(t *testing.T) {
		w, f, q := setup()
		o := w.sending(ownerKey, widgetGK, objKey, "")
		assert.True(t, f.predicate().Create(event.CreateEvent{Object: widget("11")}))
		dropped, queue := w.sent(ownerKey, o, "11")
		assert.Zero(t, dropped)
		assert.False(t, queue)
		assert.Zero(t, q.Len())
	})
	t.Run("without a queue nothing is parked", func(t *testing.T) {
		w := newWakeups()
		f := testFilter(w, false)
		w.sending(ownerKey, widgetGK, objKey, "10")
		assert.True(t, f.update(widget("10"), widget("11")))
	})
}

func TestStatusOnly(t *testing.T) {
	old := deployment("10", inProgress1)
	assert.True(t, statusOnly(old, deployment("11", current)))
	assert.True(t, statusOnly(old, with(deployment("11", current), func(d *appsv1.Deployment) { d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kcm"}} })),
		"managedFields change with every write")
	assert.True(t, statusOnly(with(deployment("10", current), func(d *appsv1.Deployment) { d.Labels = map[string]string{} }), deployment("11", current)),
		"empty and nil are the same")
	assert.False(t, statusOnly(old, with(deployment("11", current), func(d *appsv1.Deployment) { d.Generation = 3 })))
}

// A write of the object itself whose answer has another generation stored
// a spec change the pass did not make (a mutating webhook that defaults on
// update, run by the labels-and-annotations patch the pass sends after its
// steps): the steps never saw it, and only its event can start the pass
// that does, as in plain controller-runtime.
func TestOwnWriteThatChangedTheSpecWakesTheObject(t *testing.T) {
	sent := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", ResourceVersion: "10", Generation: 1}}
	answer := sent.DeepCopy()
	answer.ResourceVersion, answer.Generation = "11", 2
	newReconciler := func() *Reconciler[*testv1.Widget] {
		return &Reconciler[*testv1.Widget]{wakeups: newWakeups(), seen: newHorizon(), kind: widgetGK}
	}
	t.Run("event after the answer", func(t *testing.T) {
		r := newReconciler()
		r.trackWrites(ownerKey)(testv1.GroupVersion.WithKind("Widget"), sent, "10")(answer)
		assert.True(t, testFilter(r.wakeups, false).update(sent, answer))
	})
	t.Run("event parked while the write is in flight", func(t *testing.T) {
		r := newReconciler()
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		t.Cleanup(q.ShutDown)
		assert.NoError(t, wakeupSource{w: r.wakeups}.Start(context.Background(), q))
		done := r.trackWrites(ownerKey)(testv1.GroupVersion.WithKind("Widget"), sent, "10")
		assert.False(t, testFilter(r.wakeups, false).update(sent, answer), "parked")
		done(answer)
		assert.Equal(t, 1, q.Len(), "the parked event queues the object")
	})
	t.Run("the same generation is the pass's own", func(t *testing.T) {
		r := newReconciler()
		same := answer.DeepCopy()
		same.Generation = 1
		r.trackWrites(ownerKey)(testv1.GroupVersion.WithKind("Widget"), sent, "10")(same)
		assert.False(t, testFilter(r.wakeups, false).update(sent, same))
	})
}

// A fleet-wide rollout records a write and a wait for every owner (and a
// pass ahead of the cache: the horizon); once
// the fleet has converged the filter holds nothing, and must not keep the
// maps that held the fleet: a Go map never gives back the buckets of its
// largest size (5.4 MiB for 20,000 owners before forgetKey; 280 bytes an
// owner, held for the life of the process).
func TestWakeupsGiveBackTheirRoomWhenEmpty(t *testing.T) {
	w := newWakeups()
	const owners = 20000
	keys := make([]types.NamespacedName, owners)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("app-%05d", i)}
	}
	var writes []*ownWrite
	for _, k := range keys {
		writes = append(writes, w.sending(k, deploymentGK, k, "1"))
		w.waitOn(k, []waited{{gk: deploymentGK, key: k, uid: "u", generation: 2}})
		w.refreshAfter(k, time.Hour)
	}
	full := []unsafe.Pointer{reflect.ValueOf(w.writes).UnsafePointer(), reflect.ValueOf(w.waits).UnsafePointer(),
		reflect.ValueOf(w.refresh).UnsafePointer()}
	for i, k := range keys {
		w.sent(k, writes[i], "") // nothing stored: nothing to wait for
		w.beginPass(k)
	}
	assert.Empty(t, w.writes)
	assert.Empty(t, w.waits)
	assert.Empty(t, w.refresh)
	now := []unsafe.Pointer{reflect.ValueOf(w.writes).UnsafePointer(), reflect.ValueOf(w.waits).UnsafePointer(),
		reflect.ValueOf(w.refresh).UnsafePointer()}
	for i, name := range []string{"writes", "waits", "refresh"} {
		assert.NotEqual(t, full[i], now[i], "the %s map that held %d owners is kept", name, owners)
	}

	// The horizon's too: passes ahead of the cache, then caught up.
	h := newHorizon()
	ahead := &metav1.PartialObjectMetadata{}
	ahead.ResourceVersion = "2"
	for _, k := range keys {
		h.record(k, "1", ahead, nil)
	}
	held := reflect.ValueOf(h.seen).UnsafePointer()
	for _, k := range keys {
		h.caughtUp(k, "2")
	}
	assert.Empty(t, h.seen)
	assert.NotEqual(t, held, reflect.ValueOf(h.seen).UnsafePointer(), "the horizon's map that held %d owners is kept", owners)
}
