package ownership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// The last step of Apply: read the live object, decide whether it may be
// taken and has drifted (compare.go), and only then send the desired
// configuration.

// Adopt lets Apply take over an existing object that has no controller,
// whoever created it: Apply adds our controller reference to it, so the
// garbage collector deletes it with the owner. Without Adopt such an
// object is adopted only if something on it ties it to this owner by the
// owner's UID: an owner reference with that UID, or the configuration hash
// ([ConfigHashAnnotation]) the Applier's FieldManager recorded when it
// last applied this same configuration for this owner (the object this
// owner created, whose controller reference was removed since); else Apply
// returns an *AdoptionRefusedError. That FieldManager wrote the object,
// for another owner or for none ([NotOwned]), is not enough. (A NotOwned
// apply, which adds no controller reference, writes an object FieldManager
// wrote before.) Pass Adopt only when the name cannot
// come from a user who may create owners but not the object itself: with a
// name taken from the owner's spec, Adopt lets that user take over, and
// then delete, an object they do not own.
func Adopt() ApplyOption {
	return func(o *options) { o.adopt = true }
}

// readLive returns the live object d names from the cache (*cached, nil
// or not, when the caller has read it already), nil if the cache has none:
// write then sends a create-only apply, which the API server refuses if
// the object exists after all (not seen yet, or outside the cache's label
// selector); Apply then reads it from the API server, and so does every
// later call until the cache holds it (uncached). An object the cache
// holds without a controller is read from the API server too, since
// whether it may be adopted is decided on the API server's copy (mayTake),
// not on a cache that may lag or strip the managedFields that say who
// wrote it. (A NotOwned object never has a controller; a cached copy that
// shows our managedFields is enough.)
func (a *Applier) readLive(ctx context.Context, d *desiredObject, notOwned bool, cached *client.Object) (client.Object, error) {
	var live client.Object
	if cached != nil {
		live = *cached
	} else {
		var err error
		if live, err = a.read(ctx, a.Client, d); err != nil {
			return nil, fmt.Errorf("apply %s: reading live object: %w", d.desc, err)
		}
	}
	set := &a.learned().uncached
	uncached := set.has(d.id())
	switch {
	case live != nil && uncached:
		set.remove(d.id())
	case live == nil && !uncached && !fastpath.Off(fastpath.CreateOnly):
		// write sends a create-only apply; with it switched off (for the
		// bench), the API server is asked first, as before those.
		return nil, nil
	}
	if live == nil || metav1.GetControllerOf(live) == nil && (!notOwned || !wroteBy(live, a.FieldManager)) {
		var err error
		if live, err = a.read(ctx, a.APIReader, d); err != nil {
			return nil, fmt.Errorf("apply %s: reading live object from the API server: %w", d.desc, err)
		}
		if live == nil {
			set.remove(d.id())
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

// outcome is the object as write left it: live, or the API server's
// answer to the apply; matches says it holds every field of the
// configuration (the server kept all we sent).
type outcome struct {
	obj     client.Object
	matches bool
}

// write applies d over live (nil: the object does not exist) if live may
// be taken and has drifted.
func (a *Applier) write(ctx context.Context, d *desiredObject, live client.Object) (ApplyResult, outcome, error) {
	if live == nil {
		p := precondition{resourceVersion: createOnly}
		if fastpath.Off(fastpath.CreateOnly) {
			// Switched off for the bench: readLive asked the API server,
			// which has none; a plain apply, as before create-only ones.
			p = precondition{}
		}
		answer, err := a.send(ctx, d, p)
		if err != nil {
			return "", outcome{}, err
		}
		return Created, answer, nil
	}
	switch c := metav1.GetControllerOf(live); {
	case c != nil && c.UID != d.ownerRef.UID:
		return "", outcome{}, &ForeignControllerError{Kind: d.gvk.Kind, Key: d.key, Owner: d.ownerRef, Controller: *c}
	case c == nil && !a.mayTake(d, live):
		return "", outcome{}, &AdoptionRefusedError{Kind: d.gvk.Kind, Key: d.key, Owner: d.ownerRef, FieldManager: a.FieldManager,
			wrote: wroteBy(live, a.FieldManager)}
	}
	path, drifted, err := a.drifted(d, live)
	if err != nil {
		return "", outcome{}, fmt.Errorf("apply %s: %w", d.desc, err)
	}
	if !drifted {
		return Unchanged, outcome{obj: live, matches: true}, nil
	}
	logf.FromContext(ctx).V(1).Info("owned object drifted, applying", "object", d.desc, "field", path)
	answer, err := a.send(ctx, d, precondition{uid: live.GetUID()})
	if err != nil {
		return "", outcome{}, err
	}
	return Updated, answer, nil
}

// drifted reports whether live differs from d's configuration, and where.
// A live object that does not carry the configuration's hash
// (ConfigHashAnnotation, which the configuration sets) has drifted there,
// whatever its other fields hold, so it is not converted or compared: the
// comparison would find that annotation different too. That is the first
// apply of every changed configuration (an owner's spec edited), where the
// conversion, the comparison and the typed round trip of the configuration
// that a found drift costs were most of what Apply spent besides the
// request (BenchmarkApplyConfigChanged).
func (a *Applier) drifted(d *desiredObject, live client.Object) (string, bool, error) {
	if want := d.hash(); live.GetAnnotations()[ConfigHashAnnotation] != want {
		return "metadata.annotations." + ConfigHashAnnotation, true, nil
	}
	liveMap, err := toMap(live, d.config)
	if err != nil {
		return "", false, err
	}
	// Typed objects read through a client usually have no TypeMeta; the
	// type is the one we asked for.
	liveMap["apiVersion"], liveMap["kind"] = d.config["apiVersion"], d.config["kind"]
	_, isUnstructured := live.(runtime.Unstructured)
	path, drifted := a.drift(d.ts, d.gvk, d.config, liveMap, !isUnstructured)
	return path, drifted, nil
}

// Into makes Apply leave the live object, as it is once Apply returns
// without an error, in obj (an empty object of desired's kind, typed or
// unstructured): the object it compared when it wrote nothing, else the API
// server's answer to the apply. It spares the caller a read of what Apply
// has just read or written (Scope.ApplyAndWait judges a rollout on it).
func Into(obj client.Object) ApplyOption {
	return func(o *options) { o.into = obj }
}

// fillInto copies obj, of into's kind, into into (nil: nothing to do): by
// assignment when they are of one type (obj is Apply's own, read or
// decoded for this call), through the unstructured converter otherwise.
func fillInto(into client.Object, obj runtime.Object) error {
	if into == nil {
		return nil
	}
	if err := fill(into, obj); err != nil {
		return fmt.Errorf("filling %T: %w", into, err)
	}
	return nil
}

func fill(into client.Object, obj runtime.Object) error {
	dst, src := reflect.ValueOf(into), reflect.ValueOf(obj)
	if dst.Kind() != reflect.Pointer || dst.IsNil() {
		return fmt.Errorf("%T is not a pointer", into)
	}
	if dst.Type() == src.Type() {
		dst.Elem().Set(src.Elem())
		return nil
	}
	var m map[string]any
	if u, ok := obj.(runtime.Unstructured); ok {
		m = u.UnstructuredContent()
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return err
		}
	}
	if u, ok := into.(runtime.Unstructured); ok {
		u.SetUnstructuredContent(m)
		return nil
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
}

// toMap returns live as unstructured content for the comparison with
// config. Of a typed object, only the top-level fields config sets are
// converted: a Deployment's status, never compared, is zeroed in a shallow
// copy first (the conversion walks every field of every struct by
// reflection, and is most of what a pass that changes nothing costs).
func toMap(live runtime.Object, config map[string]any) (map[string]any, error) {
	if u, ok := live.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), nil
	}
	obj := any(live)
	if v := reflect.ValueOf(live); v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
		cp := reflect.New(v.Elem().Type()).Elem()
		cp.Set(v.Elem())
		for _, f := range topLevelFields(cp.Type()) {
			if _, want := config[f.name]; !want {
				cp.Field(f.index).SetZero()
			}
		}
		obj = cp.Addr().Interface()
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting live object to unstructured: %w", err)
	}
	return m, nil
}

// jsonField is a top-level field of a Go type by its JSON name.
type jsonField struct {
	name  string
	index int
}

// fieldsByType caches topLevelFields per type.
var fieldsByType sync.Map // reflect.Type → []jsonField

// topLevelFields returns t's named JSON fields; inlined ones (TypeMeta)
// and "-" are left out, so they are never zeroed.
func topLevelFields(t reflect.Type) []jsonField {
	if f, ok := fieldsByType.Load(t); ok {
		return f.([]jsonField)
	}
	var fields []jsonField
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case !sf.IsExported(), name == "-", name == "" && sf.Anonymous:
			continue
		case name == "":
			name = sf.Name
		}
		fields = append(fields, jsonField{name: name, index: i})
	}
	fieldsByType.Store(t, fields)
	return fields
}

// createOnly is the resourceVersion of an apply that may only create:
// the API server wipes an object's resourceVersion when an apply creates it
// (as a create does), and refuses an apply to an existing object whose
// resourceVersion differs, with a Conflict; no object has this one. One
// request where a read from the API server and a write were two, on every
// create (the cache cannot say that an object does not exist).
const createOnly = "18446744073709551615"

// precondition is what an apply requires of the live object: its UID (the
// object we judged) or, with createOnly, that there is none.
type precondition struct {
	uid             types.UID
	resourceVersion string
}

// send applies d's configuration as FieldManager, forcing ownership, and
// returns the server's answer. The API server refuses the apply if the
// object does not meet p: with p.uid, if the object is gone (Conflict) or
// another one has its name (metadata.uid is immutable: Invalid); with
// createOnly, if it exists (Conflict); see replaced.
func (a *Applier) send(ctx context.Context, d *desiredObject, p precondition) (outcome, error) {
	// The answer replaces u's content rather than writing into its maps,
	// so only the map send writes to (metadata) needs a copy of its own.
	obj := maps.Clone(d.config)
	if md, ok := d.config["metadata"].(map[string]any); ok {
		obj["metadata"] = maps.Clone(md)
	}
	u := &unstructured.Unstructured{Object: obj}
	if p.uid != "" {
		u.SetUID(p.uid)
	}
	if p.resourceVersion != "" {
		u.SetResourceVersion(p.resourceVersion)
	}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.ForceOwnership, client.FieldOwner(a.FieldManager)); err != nil {
		return outcome{}, fmt.Errorf("apply %s: server-side apply as %q: %w", d.desc, a.FieldManager, err)
	}
	// The response must contain what we sent; if it does not, the server
	// (schema pruning, a mutating webhook) rewrote it and every pass will
	// write. Worth a log line, not an error: the write itself succeeded.
	path, drifted := a.drift(d.ts, d.gvk, d.config, u.Object, false)
	if drifted {
		logf.FromContext(ctx).Info("server did not keep an applied field; this object will be re-applied on every pass",
			"object", d.desc, "field", path)
	}
	return outcome{obj: u, matches: !drifted}, nil
}

// mayTake reports whether Apply may write d over live, an object without
// a controller, without [Adopt]. An apply that sets d's controller
// reference adopts the object, and does so only if something on it ties it
// to this owner by the owner's UID: an owner reference (not a controller
// one) with that UID, or a ConfigHashAnnotation that FieldManager wrote
// and that is the hash this apply records. That hash covers the whole
// configuration, the owner's controller reference and UID included, so no
// apply for another owner, nor a NotOwned one, records it: the object is
// the one this owner's apply last wrote, with this very configuration,
// whose controller reference was removed since (by hand, say; the Owns
// watch makes the next pass, with the same configuration, put it back).
// That FieldManager wrote the object is not enough: the field manager is
// the controller's, every owner's, and an object it wrote for another
// owner or for none (NotOwned) must not go to whoever may create an owner
// that names it, whose deletion would then delete it. A NotOwned apply
// adds no controller reference: it writes an object FieldManager wrote
// before.
func (a *Applier) mayTake(d *desiredObject, live client.Object) bool {
	switch {
	case d.adopt:
		return true
	case d.notOwned:
		return wroteBy(live, a.FieldManager)
	}
	for _, ref := range live.GetOwnerReferences() {
		if ref.UID == d.ownerRef.UID {
			return true
		}
	}
	return live.GetAnnotations()[ConfigHashAnnotation] == d.hash() && wroteBy(live, a.FieldManager)
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

// refusedButExists reports, after a create-only apply of d that the API
// server refused for another reason than the object's existence (a
// Conflict), whether the object exists after all. The API server runs
// mutating admission on the apply, as an UPDATE of the existing object,
// before it checks the resourceVersion (k8s.io/apiserver's Store.Update:
// UpdatedObject, then the precondition), so a mutating webhook that denies
// the update answers first: its denial hid the AdoptionRefusedError or
// ForeignControllerError the object called for, and every pass sent the
// create again. One read from the API server, on a failed create only.
func (a *Applier) refusedButExists(ctx context.Context, d *desiredObject) bool {
	live, err := a.read(ctx, a.APIReader, d)
	return err == nil && live != nil
}

// replaced reports whether err is the API server refusing an apply's
// precondition: the object we judged is gone (Conflict: "uid mismatch"),
// another object now has its name (Invalid: metadata.uid is immutable), or
// an object the cache did not have exists (Conflict). A forced apply has no
// field conflicts, so a Conflict can only be a precondition.
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
