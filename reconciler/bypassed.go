package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// bypassed holds the last state of objects that were deleted while they
// still listed the reconciler's finalizer, until their cleanup has run.
// The API server can do that: a DELETE that read the object before a pass
// added the finalizer deletes it at once, finalizer or not (its
// immediate-deletion decision is made on that read), so no deleting copy
// ever reaches a pass. Why and how: docs/finalizer.md, "A deletion that
// races the finalizer".
//
// The deletion event of an object whose last finalizer a write removed
// lists that finalizer too: the API server deletes such an object without
// storing the write, and the event carries the stored state. released
// holds the UIDs whose finalizer a pass is removing (after their cleanup,
// or by the deadline policy), so that their deletion is not taken for one
// that bypassed the cleanup. The deletion event consumes a UID; one whose
// event never comes here (another finalizer keeps the object, a predicate
// drops deletions, the handler is not wired) is forgotten after
// releasedTTL.
type bypassed[T Object] struct {
	mu       sync.Mutex
	objects  map[types.NamespacedName]T
	released map[types.UID]time.Time
}

// releasedTTL is how long a released UID waits for its deletion event;
// the map is swept for older ones once it holds releasedSweep.
const (
	releasedTTL   = 10 * time.Minute
	releasedSweep = 256
)

func newBypassed[T Object]() *bypassed[T] {
	return &bypassed[T]{objects: map[types.NamespacedName]T{}, released: map[types.UID]time.Time{}}
}

// releasing notes that a pass removes the finalizer of uid; done with
// removed false (the write failed, or made none) takes that back.
func (b *bypassed[T]) releasing(uid types.UID) (done func(removed bool)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if len(b.released) >= releasedSweep {
		for u, at := range b.released {
			if now.Sub(at) > releasedTTL {
				delete(b.released, u)
			}
		}
	}
	b.released[uid] = now
	return func(removed bool) {
		if !removed {
			b.mu.Lock()
			defer b.mu.Unlock()
			delete(b.released, uid)
		}
	}
}

// wasReleased reports whether a pass removed the finalizer of uid, and
// forgets it: its deletion event comes once.
func (b *bypassed[T]) wasReleased(uid types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.released[uid]
	delete(b.released, uid)
	return ok
}

func (b *bypassed[T]) put(key types.NamespacedName, obj T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[key] = obj
}

// takeEarlier is take for a pass that found a live object of UID uid under
// key. A last state of that same object is dropped: it was not deleted (a
// deletion event for an object that only left a cache, such as a sharded
// replica's on a range handed over), and the state would otherwise run the
// cleanup a second time once the object is really gone. A last state of
// another UID is an earlier object of the name, deleted before its cleanup
// ran and re-created since: it is returned, for its cleanup to run first.
func (b *bypassed[T]) takeEarlier(key types.NamespacedName, uid types.UID) (T, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	held, ok := b.objects[key]
	if ok {
		delete(b.objects, key)
	}
	if !ok || held.GetUID() == uid {
		var none T
		return none, false
	}
	return held, true
}

// take removes and returns key's last state, if one is held.
func (b *bypassed[T]) take(key types.NamespacedName) (T, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	obj, ok := b.objects[key]
	delete(b.objects, key)
	return obj, ok
}

// DeletedWithFinalizer is the event handler that queues objects deleted
// while they still list Options.Finalizer or one of
// Options.RetiredFinalizers (with Cleanup set: a renamed finalizer still
// guards the cleanup), with their last state, so that
// the next pass on a gone object runs the Cleanup steps on that state
// instead of finding nothing to do. Builder adds it to the watch of T; add
// it yourself (Watches(obj, r.DeletedWithFinalizer())) when building the
// controller without Builder.
func (r *Reconciler[T]) DeletedWithFinalizer() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return handler.Funcs{
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			obj, ok := e.Object.(T)
			if !ok || !r.guardsCleanup(obj) || r.bypassed.wasReleased(obj.GetUID()) {
				return
			}
			key := client.ObjectKeyFromObject(obj)
			r.bypassed.put(key, obj.DeepCopyObject().(T))
			q.Add(reconcile.Request{NamespacedName: key})
		},
	}
}

// cleanupEarlier runs the cleanup of a deleted object whose name a new
// object has taken (bypassed.takeEarlier), on a replica that owns the
// deleted one's range (another one, whose cache held it, does it
// otherwise).
func (r *Reconciler[T]) cleanupEarlier(ctx context.Context, key types.NamespacedName, earlier T, counted *passClient) (ctrl.Result, error) {
	ctx, end, mine := r.beginShard(ctx, earlier)
	if !mine {
		return ctrl.Result{}, nil
	}
	defer end()
	logf.FromContext(ctx).Info("an object of this name was created again before the cleanup of the deleted one ran; running that cleanup first", "deletedUID", earlier.GetUID())
	return r.cleanupBypassed(ctx, key, earlier, counted)
}

// cleanupBypassed runs the Cleanup steps on the last state of an object
// that was deleted while it listed the finalizer; its status is not
// written (there is no object). A step that does not continue keeps the
// state for the next pass, which the returned error or requeue brings.
func (r *Reconciler[T]) cleanupBypassed(ctx context.Context, key types.NamespacedName, obj T, counted *passClient) (ctrl.Result, error) {
	logf.FromContext(ctx).Info("the object was deleted while it still had the finalizer; running its cleanup on its last state", "finalizers", r.heldFinalizers(obj))
	s := r.scope(obj, counted)
	for _, step := range r.opts.Cleanup {
		out := r.runStep(ctx, step, s)
		if out.kind == kindContinue {
			continue
		}
		r.bypassed.put(key, obj)
		if out.kind == kindWait && out.after > 0 {
			return ctrl.Result{RequeueAfter: out.after}, nil
		}
		err := out.err
		if err == nil {
			err = errors.New(out.conditionMessage())
		}
		// Retried whatever the step said: nothing else would ever run
		// this cleanup again.
		return ctrl.Result{}, fmt.Errorf("cleanup step %s of deleted %s: %w", step.Name, key, err)
	}
	return ctrl.Result{}, nil
}
