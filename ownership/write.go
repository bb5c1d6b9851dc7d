package ownership

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// The last step of Apply: read the live object, decide whether it may be
// taken and has drifted (compare.go), and only then send the desired
// configuration.

// Adopt lets Apply take over an existing object that has no controller,
// whoever created it: Apply adds our controller reference to it, so the
// garbage collector deletes it with the owner. Without it such an object is
// adopted only if the Applier's FieldManager wrote it before, else Apply
// returns an *AdoptionRefusedError. Pass Adopt only when the name cannot
// come from a user who may create owners but not the object itself: with a
// name taken from the owner's spec, Adopt lets that user take over, and
// then delete, an object they do not own.
func Adopt() ApplyOption {
	return func(o *options) { o.adopt = true }
}

// readLive returns the live object d names, nil if there is none, from the
// cache if it can decide: the cache may not hold the object (not seen yet,
// or outside its label selector) and may strip the managedFields that say
// who wrote it, so whether it exists and may be adopted, the API server
// says. (A NotOwned object never has a controller; a cached copy that shows
// our managedFields is enough.)
func (a *Applier) readLive(ctx context.Context, d *desiredObject, notOwned bool) (client.Object, error) {
	live, err := a.read(ctx, a.Client, d)
	if err != nil {
		return nil, fmt.Errorf("apply %s: reading live object: %w", d.desc, err)
	}
	if live == nil || metav1.GetControllerOf(live) == nil && (!notOwned || !wroteBy(live, a.FieldManager)) {
		if live, err = a.read(ctx, a.APIReader, d); err != nil {
			return nil, fmt.Errorf("apply %s: reading live object from the API server: %w", d.desc, err)
		}
	}
	return live, nil
}

// read returns the object d names as r has it, nil if it does not exist.
func (a *Applier) read(ctx context.Context, r client.Reader, d *desiredObject) (client.Object, error) {
	live, err := a.newObject(d)
	if err != nil {
		return nil, err
	}
	switch err := r.Get(ctx, d.key, live); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return live, nil
}

// newObject returns an empty object of d's kind to read the live object
// into: typed when the scheme knows the kind, so the read shares the
// informer of the controller's Owns() watch, unstructured otherwise.
func (a *Applier) newObject(d *desiredObject) (client.Object, error) {
	if !a.Scheme.Recognizes(d.gvk) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(d.gvk)
		return u, nil
	}
	o, err := a.Scheme.New(d.gvk)
	if err != nil {
		return nil, err
	}
	co, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not a client.Object", o)
	}
	return co, nil
}

// write applies d over live (nil: the object does not exist) if live may
// be taken and has drifted.
func (a *Applier) write(ctx context.Context, d *desiredObject, live client.Object) (ApplyResult, error) {
	if live == nil {
		answer, err := a.send(ctx, d, "")
		if err != nil {
			return "", err
		}
		// The object did not exist when read, so this apply created it,
		// unless someone else created it in between: their managedFields
		// entry is then in the answer.
		if onlyManager(answer, a.FieldManager) {
			return Created, nil
		}
		return Updated, nil
	}
	switch c := metav1.GetControllerOf(live); {
	case c != nil && c.UID != d.ownerRef.UID:
		return "", &ForeignControllerError{Kind: d.gvk.Kind, Key: d.key, Owner: d.ownerRef, Controller: *c}
	case c == nil && !d.adopt && !wroteBy(live, a.FieldManager):
		return "", &AdoptionRefusedError{Kind: d.gvk.Kind, Key: d.key, Owner: d.ownerRef, FieldManager: a.FieldManager}
	}
	liveMap, err := toMap(live)
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", d.desc, err)
	}
	// Typed objects read through a client usually have no TypeMeta; the
	// type is the one we asked for.
	liveMap["apiVersion"], liveMap["kind"] = d.config["apiVersion"], d.config["kind"]
	_, isUnstructured := live.(runtime.Unstructured)
	path, drifted := a.drift(d.ts, d.gvk, d.config, liveMap, !isUnstructured)
	if !drifted {
		return Unchanged, nil
	}
	logf.FromContext(ctx).V(1).Info("owned object drifted, applying", "object", d.desc, "field", path)
	if _, err := a.send(ctx, d, live.GetUID()); err != nil {
		return "", err
	}
	return Updated, nil
}

func toMap(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting live object to unstructured: %w", err)
	}
	return m, nil
}

// send applies d's configuration as FieldManager, forcing ownership, and
// returns the server's answer. With uid set the apply is for that object
// only: the API server refuses it if the object is gone (Conflict) or is
// another one by the same name (metadata.uid is immutable: Invalid), see
// replaced.
func (a *Applier) send(ctx context.Context, d *desiredObject, uid types.UID) (map[string]any, error) {
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(d.config)}
	if uid != "" {
		u.SetUID(uid)
	}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.ForceOwnership, client.FieldOwner(a.FieldManager)); err != nil {
		return nil, fmt.Errorf("apply %s: server-side apply as %q: %w", d.desc, a.FieldManager, err)
	}
	// The response must contain what we sent; if it does not, the server
	// (schema pruning, a mutating webhook) rewrote it and every pass will
	// write. Worth a log line, not an error: the write itself succeeded.
	if path, drifted := a.drift(d.ts, d.gvk, d.config, u.Object, false); drifted {
		logf.FromContext(ctx).Info("server did not keep an applied field; this object will be re-applied on every pass",
			"object", d.desc, "field", path)
	}
	return u.Object, nil
}

// wroteBy reports whether manager has an entry in obj's managedFields:
// this operator wrote the object (which needs the right to write it).
func wroteBy(obj client.Object, manager string) bool {
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == manager {
			return true
		}
	}
	return false
}

// onlyManager reports whether the object in answer, as the API server
// returned it, has no managedFields entry of a manager other than manager:
// nobody else has written it.
func onlyManager(answer map[string]any, manager string) bool {
	md, _ := answer["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	for _, e := range entries {
		if m, _ := e.(map[string]any); stringAt(m, "manager") != manager {
			return false
		}
	}
	return true
}

// replaced reports whether err is the API server refusing an apply that
// names the object's UID because that object is gone (Conflict: "uid
// mismatch") or another object now has its name (Invalid: metadata.uid is
// immutable). A forced apply has no field conflicts, so a Conflict can only
// be that precondition.
func replaced(err error) bool {
	if apierrors.IsConflict(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}
