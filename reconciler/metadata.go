package reconciler

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A step may set or remove labels and annotations of its own object
// (s.Object); the pass writes them in one merge patch, before the status.
// See docs/reconciler.md, "Labels and annotations of the object".

// keyChange is one label or annotation a pass set (to != nil) or removed
// (to == nil); from is its value before (nil: absent).
type keyChange struct {
	key      string
	from, to *string
}

// metadataDelta is what a pass changed of its object's labels and
// annotations.
type metadataDelta struct {
	labels, annotations []keyChange
}

// ownMetadataDelta returns the labels and annotations obj sets or removes
// relative to orig.
func ownMetadataDelta(orig, obj metav1.Object) metadataDelta {
	return metadataDelta{
		labels:      keyChanges(orig.GetLabels(), obj.GetLabels()),
		annotations: keyChanges(orig.GetAnnotations(), obj.GetAnnotations()),
	}
}

func keyChanges(from, to map[string]string) []keyChange {
	var changes []keyChange
	for k, v := range to {
		if old, ok := from[k]; !ok || old != v {
			c := keyChange{key: k, to: &v}
			if ok {
				c.from = &old
			}
			changes = append(changes, c)
		}
	}
	for k, old := range from {
		if _, ok := to[k]; !ok {
			changes = append(changes, keyChange{key: k, from: &old})
		}
	}
	return changes
}

func (d metadataDelta) empty() bool { return len(d.labels) == 0 && len(d.annotations) == 0 }

// applyTo sets obj's labels and annotations as d says and reports whether
// that changed obj. With onlyUntouched, a key whose value in obj is no
// longer the one d changed it from is left alone.
func (d metadataDelta) applyTo(obj metav1.Object, onlyUntouched bool) bool {
	labels, changedLabels := applyKeys(obj.GetLabels(), d.labels, onlyUntouched)
	annotations, changedAnnotations := applyKeys(obj.GetAnnotations(), d.annotations, onlyUntouched)
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	return changedLabels || changedAnnotations
}

func applyKeys(m map[string]string, changes []keyChange, onlyUntouched bool) (map[string]string, bool) {
	changed := false
	for _, c := range changes {
		v, ok := m[c.key]
		if onlyUntouched && (ok != (c.from != nil) || ok && v != *c.from) {
			continue
		}
		switch {
		case c.to == nil && ok:
			delete(m, c.key)
			changed = true
		case c.to != nil && (!ok || v != *c.to):
			if m == nil {
				m = map[string]string{}
			}
			m[c.key] = *c.to
			changed = true
		}
	}
	return m, changed
}

// changedOutsideStatusAndOwnMetadata is changedOutsideStatus with obj's
// labels and annotations, which a step may change, taken as orig's.
func changedOutsideStatusAndOwnMetadata(orig, obj Object) string {
	labels, annotations := obj.GetLabels(), obj.GetAnnotations()
	obj.SetLabels(orig.GetLabels())
	obj.SetAnnotations(orig.GetAnnotations())
	defer func() {
		obj.SetLabels(labels)
		obj.SetAnnotations(annotations)
	}()
	return changedOutsideStatus(orig, obj)
}

// writeOwnMetadata writes the labels and annotations the pass changed
// (orig to obj) with one merge patch that carries those keys only (a
// removed key as null) and orig's resourceVersion as a lock, so labels
// and annotations someone else set are never touched. On a conflict the
// object is re-read from reader and the keys are applied again; keys
// already as the pass wants them write nothing.
//
// It returns the new baseline of the status write, the stored copy, and
// leaves obj as that copy with the pass's status changes on top.
func writeOwnMetadata[T Object](ctx context.Context, c client.Client, reader client.Reader, orig, obj T) (T, error) {
	delta := ownMetadataDelta(orig, obj)
	if delta.empty() {
		return orig, nil
	}
	base := orig
	for attempt := 1; ; attempt++ {
		answer := base.DeepCopyObject().(T)
		if !delta.applyTo(answer, false) {
			break
		}
		err := c.Patch(ctx, answer, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			base = answer
			break
		}
		if apierrors.IsNotFound(err) {
			// Gone: nothing to label, and the status write finds it gone too.
			return orig, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxStatusAttempts {
			return orig, fmt.Errorf("writing labels and annotations of %s: %w", client.ObjectKeyFromObject(obj), err)
		}
		fresh := obj.DeepCopyObject().(T)
		if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return orig, nil
			}
			return orig, fmt.Errorf("re-reading %s after a conflict writing its labels and annotations: %w", client.ObjectKeyFromObject(obj), err)
		}
		if fresh.GetUID() != orig.GetUID() {
			return orig, fmt.Errorf("writing labels and annotations of %s: the object was deleted and recreated", client.ObjectKeyFromObject(obj))
		}
		base = fresh
	}
	if base.GetResourceVersion() != orig.GetResourceVersion() {
		rebaseStatus(orig, obj, base)
	}
	return base, nil
}

// rebaseStatus makes obj the stored copy with the pass's status changes
// (orig to obj) on top, so the status write that follows, locked to
// stored, carries them and replaces nothing another writer stored.
func rebaseStatus[T Object](orig, obj, stored T) {
	fresh := stored.DeepCopyObject().(T)
	if statusChanged(orig, stored) {
		reapply(orig, obj, fresh)
	} else {
		if st := statusOf(fresh); st.IsValid() {
			st.Set(statusOf(obj))
		}
		fresh.SetConditions(obj.GetConditions())
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
}

// writeOwnMetadata writes the labels and annotations the pass's steps
// changed (writeOwnMetadata) and makes the stored copy the baseline of the
// status write that follows.
func (p *pass[T]) writeOwnMetadata(ctx context.Context, c client.Client, reader client.Reader) error {
	orig, err := writeOwnMetadata(ctx, c, reader, p.orig, p.obj)
	if err != nil {
		return err
	}
	p.orig = orig
	return nil
}
