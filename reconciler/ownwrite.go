package reconciler

import (
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// A step may write its own object through s.Client (another finalizer with
// finalizer.Ensure, an annotation): the write's answer replaces s.Object,
// status included, so the status the pass computed before the step would
// vanish. rebase makes what is stored the pass's new baseline and puts the
// pass's status back on top of it.

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

// rebase is called after a step that wrote obj itself. before is obj's
// status as the step got it; answer is what the write stored (obj itself
// when unknown).
// Afterwards orig is the stored copy, the baseline the status patch is
// locked to, and obj's status is the stored status with the pass's changes
// before the step (orig to before) and then the step's own changes after
// its write (answer to obj) laid over it, so the one status write of the
// pass carries both and replaces nothing another writer stored.
func rebase[T Object](orig T, before statusSnapshot, obj, answer T) {
	if !before.status.IsValid() {
		copyOutsideStatus(obj, orig)
		return
	}
	want := answer.DeepCopyObject().(T)
	statusOf(want).Set(before.status)
	want.SetConditions(before.conds)
	fresh := answer.DeepCopyObject().(T)
	reapply(orig, want, fresh)
	reapply(answer, obj, fresh)
	reflect.ValueOf(orig).Elem().Set(reflect.ValueOf(answer.DeepCopyObject()).Elem())
	statusOf(obj).Set(statusOf(fresh))
}
