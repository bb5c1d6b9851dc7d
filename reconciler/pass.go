package reconciler

import (
	"context"
	"fmt"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// pass owns the object one Reconcile works on: obj, the copy the pass
// changes (Scope.Object until the status write), and orig, the stored copy
// its status patch is locked to and measured against. Only its methods move
// the baseline or replace obj; writes through the pass's client decode the
// server's answer into obj as any client write does, and the pass then
// adopts or rebases on it. cachedRV is the resourceVersion the cache gave,
// so that record can tell whether the pass got ahead of the cache.
type pass[T Object] struct {
	key      types.NamespacedName
	obj      T
	orig     T
	cachedRV string
	// waits are the owned objects whose rollouts the pass ended waiting
	// on (runSteps).
	waits []waited
}

// newPass starts a pass on obj, read at resourceVersion cachedRV from the
// cache (obj itself may be newer, read from the API server).
func newPass[T Object](key types.NamespacedName, obj T, cachedRV string) *pass[T] {
	return &pass[T]{key: key, obj: obj, orig: obj.DeepCopyObject().(T), cachedRV: cachedRV}
}

// adopt makes obj the baseline when it holds a newer stored copy than orig:
// the answer to a write (changed) or a re-read after a conflict, which
// nothing of this pass has touched yet.
func (p *pass[T]) adopt(changed bool) {
	if changed || p.obj.GetResourceVersion() != p.orig.GetResourceVersion() {
		p.orig = p.obj.DeepCopyObject().(T)
	}
}

// stored returns what a step's write of its own object stored: the
// server's answer, as s.Client recorded it, when s.Object holds that
// version. For a write through another client the stored status is not
// known; s.Object with orig's status stands in for it, so whatever differs
// from the status the pass started from is written.
func (s *Scope[T]) stored(orig T) T {
	if pc, ok := s.Client.(*passClient); ok {
		if gvk, err := apiutil.GVKForObject(s.Object, pc.Scheme()); err == nil {
			w, found := pc.lookup(gvk, client.ObjectKeyFromObject(s.Object))
			if answer, isT := w.(T); found && isT && w.GetResourceVersion() == s.Object.GetResourceVersion() {
				return answer.DeepCopyObject().(T)
			}
		}
	}
	answer := s.Object.DeepCopyObject().(T)
	if st := statusOf(answer); st.IsValid() {
		st.Set(statusOf(orig))
		answer.SetConditions(orig.GetConditions())
	}
	return answer
}

// statusSnapshot is the status a step started from, taken before every
// step and used only after one that wrote its object. It is a shallow copy
// (one small allocation, not a deep copy of the object per step): an
// in-place edit the step makes before its write shows in it, and is then
// kept, as an edit after the write is.
type statusSnapshot struct {
	status reflect.Value
	conds  []metav1.Condition
}

func snapshotStatus(obj Object) statusSnapshot {
	snap := statusSnapshot{conds: obj.GetConditions()}
	if s := statusOf(obj); s.IsValid() {
		snap.status = reflect.New(s.Type()).Elem()
		snap.status.Set(s)
	}
	return snap
}

// wroteItself reports whether a step wrote the object through the API, so
// obj holds the server's answer and the pass must rebase on it.
func (p *pass[T]) wroteItself() bool {
	return p.obj.GetResourceVersion() != p.orig.GetResourceVersion()
}

// rebase is called after a step that wrote obj itself through s.Client
// (another finalizer, an annotation): the write's answer replaced obj,
// status included, so the status the pass computed before the step would
// vanish. before is obj's status as the step got it; answer is what the
// write stored (obj itself when unknown, see Scope.stored). Afterwards orig
// is the stored copy, and obj's status is the stored status with the pass's
// changes before the step (orig to before) and then the step's own changes
// after its write (answer to obj) laid over it, so the one status write of
// the pass carries both and replaces nothing another writer stored.
func (p *pass[T]) rebase(before statusSnapshot, answer T) {
	if !before.status.IsValid() {
		copyOutsideStatus(p.obj, p.orig)
		return
	}
	want := answer.DeepCopyObject().(T)
	statusOf(want).Set(before.status)
	want.SetConditions(before.conds)
	fresh := answer.DeepCopyObject().(T)
	reapply(p.orig, want, fresh)
	reapply(answer, p.obj, fresh)
	p.orig = answer.DeepCopyObject().(T)
	statusOf(p.obj).Set(statusOf(fresh))
}

// writeStatus patches obj's status if it differs from orig's, as a JSON
// merge patch locked to orig's resourceVersion, so it never overwrites a
// status written since orig was read. On a conflict it re-reads the object
// through reader (the API server, not the cache), re-applies this pass's
// delta on the fresh copy (see reapply), which becomes obj, and tries again,
// up to maxStatusAttempts; a delta that is already there writes nothing. A
// gone object is not an error. Afterwards obj is the server's answer, and
// no longer Scope.Object when a conflict replaced it: the write ends the
// pass.
//
// It returns the copy whose status the write replaced (orig, or the last
// re-read): what the server said before this pass's write, which is what
// transition events must be decided against.
func (p *pass[T]) writeStatus(ctx context.Context, c client.Client, reader client.Reader, written prometheus.Counter) (T, error) {
	want := p.obj.DeepCopyObject().(T)
	base := p.orig
	key := client.ObjectKeyFromObject(p.obj)
	for attempt := 1; ; attempt++ {
		if !statusChanged(base, p.obj) {
			return base, nil
		}
		err := c.Status().Patch(ctx, p.obj, statusPatchFrom(base))
		if err == nil {
			written.Inc()
		}
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return base, nil
		case !apierrors.IsConflict(err) || attempt == maxStatusAttempts:
			return base, fmt.Errorf("writing status of %s: %w", key, err)
		}
		fresh := p.obj.DeepCopyObject().(T)
		if err := reader.Get(ctx, key, fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return base, nil
			}
			return base, fmt.Errorf("re-reading %s after a status conflict: %w", key, err)
		}
		base = fresh.DeepCopyObject().(T)
		reapply(p.orig, want, fresh)
		p.obj = fresh
	}
}

// record remembers in h what the pass left of the object, when it got
// ahead of the cache, with the finalizers among managed that it removed
// from a deleting object (see seenCopy).
func (p *pass[T]) record(h *horizon, managed []string) {
	var finalized []string
	for _, name := range managed {
		if !p.obj.GetDeletionTimestamp().IsZero() && !controllerutil.ContainsFinalizer(p.obj, name) {
			finalized = append(finalized, name)
		}
	}
	h.record(p.key, p.cachedRV, p.obj, finalized)
}
