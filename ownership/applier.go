package ownership

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Applier applies desired owned objects with server-side apply under one
// field manager, writing only when the live object has drifted from what we
// want, and prunes owned objects that are no longer wanted.
//
// Guarantees:
//   - A pass over objects that already match makes no mutating API request
//     (only reads, which may be served from a cache).
//   - Only fields present in the desired object are ever applied, so fields
//     set by the server (defaults), by other controllers, or listed in
//     IgnoreFields are never overwritten nor counted as drift.
//   - An object controlled by someone else is never modified or deleted.
//
// Caveats: reads through a cache can be stale right after our own write.
// An Apply of that object before the cache has the write (a later step of
// the same pass, or the next pass) then finds no object or the older one and
// re-applies the identical configuration once: one apply request, which the
// server treats as a no-op (no new resourceVersion, no watch event), reported
// as Created (the cache had no object) or Updated, not Unchanged. Likewise a
// Prune before the cache has seen its last deletions sends those deletes
// again; they are answered NotFound and not reported. An Applier is safe for
// concurrent use if its Client is.
type Applier struct {
	// Client reads the live objects (reads may come from the manager's
	// cache) and writes them (writes always go to the apiserver).
	Client client.Client
	// Scheme maps typed objects to their GroupVersionKind.
	Scheme *runtime.Scheme
	// FieldManager is the server-side apply field manager, e.g.
	// "webapp-operator". Required. Keep it stable: renaming it leaves the
	// old manager owning fields that the new one can then not remove.
	FieldManager string
}

// Result says what Apply did.
type Result string

const (
	// Created means the object was not found, so desired was applied
	// whole: it did not exist and was created, or — right after our own
	// create, see the caveats on [Applier] — the cache did not have it yet.
	Created Result = "Created"
	// Updated means the live object had drifted (or the desired
	// configuration changed) and was applied.
	Updated Result = "Updated"
	// Unchanged means the live object already matched; nothing was written.
	Unchanged Result = "Unchanged"
)

// Option adjusts one Apply call.
type Option func(*options)

type options struct {
	ignore []string
}

// IgnoreFields leaves these fields to others (e.g. "spec.replicas" for a
// Deployment scaled by an HorizontalPodAutoscaler): they are removed from the
// desired object before it is applied and compared, so we never set them and
// never count them as drift.
//
// A path is dot-separated keys; a key containing dots goes in brackets, e.g.
// "metadata.annotations[example.com/paused]". A path that crosses a list
// applies to every element, e.g. "spec.template.spec.containers.resources".
//
// Caveats: on creation an ignored field is not set either, so it gets the
// server's default. If we owned the field before it was ignored, the next
// apply releases it; the server then removes it unless another manager also
// owns it (an HPA takes ownership of spec.replicas when it scales).
// metadata.name, metadata.namespace, metadata.ownerReferences, apiVersion
// and kind cannot be ignored.
func IgnoreFields(paths ...string) Option {
	return func(o *options) { o.ignore = append(o.ignore, paths...) }
}

// Apply makes the live object match desired in every field desired sets.
//
// It sets a controller reference from owner on desired (desired is a typed
// object such as *appsv1.Deployment, or *unstructured.Unstructured), reads
// the live object, and writes with server-side apply (forcing ownership of
// our fields, under FieldManager) only if the live object differs from
// desired in a field we set, or if the desired configuration changed since
// the last apply (see ConfigHashAnnotation). On return desired holds the live
// state: the server's response, or the live object when Unchanged.
//
// Guarantees:
//   - Unchanged means no mutating request was made.
//   - An existing object with no controller is adopted: our controller
//     reference is added, other owner references are kept.
//   - An existing object controlled by another owner (a different UID, which
//     includes an earlier incarnation of the same owner) is not touched;
//     Apply returns a *ForeignControllerError. (If the cache has not seen
//     the object yet, Apply applies and the apiserver refuses the second
//     controller reference, and with it the whole apply: an Invalid error.)
//   - With a namespaced owner, desired must be in the owner's namespace: an
//     empty namespace defaults to it, a different one is an error naming
//     metadata.namespace. A cluster-scoped object cannot have a namespaced
//     owner (the garbage collector would delete it).
//
// Caveats:
//   - Build desired from scratch on each pass: every field it holds is
//     applied and owned, so copying a live object's defaults into it claims
//     them. Status is never applied (use the status subresource).
//   - The controller reference has blockOwnerDeletion=true. Clusters with the
//     OwnerReferencesPermissionEnforcement admission plugin (OpenShift, for
//     one) then require RBAC "update" on the owner's "finalizers"
//     subresource, e.g. +kubebuilder:rbac:...,resources=widgets/finalizers,verbs=update.
//   - A field the server drops or rewrites (an unknown field pruned by a
//     CRD schema, a value changed by a mutating webhook) can never match, so
//     every pass writes; Apply logs this at the point of the write via the
//     logger in ctx.
func (a *Applier) Apply(ctx context.Context, owner, desired client.Object, opts ...Option) (Result, error) {
	if err := a.validate(); err != nil {
		return "", err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	ignore, err := parseIgnore(o.ignore)
	if err != nil {
		return "", err
	}
	gvk, err := apiutil.GVKForObject(desired, a.Scheme)
	if err != nil {
		return "", fmt.Errorf("apply: desired object %T: %w", desired, err)
	}
	if desired.GetName() == "" {
		return "", fmt.Errorf("apply %s: %w", gvk.Kind, field.Required(field.NewPath("metadata", "name"), "server-side apply needs a name"))
	}
	if err := a.setNamespace(owner, desired, gvk); err != nil {
		return "", fmt.Errorf("apply %s: %w", describe(gvk.Kind, desired), err)
	}
	desc := describe(gvk.Kind, desired)
	ownerRef, err := a.ownerRef(owner)
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", desc, err)
	}
	if c := metav1.GetControllerOf(desired); c != nil && c.UID != ownerRef.UID {
		return "", &ForeignControllerError{Kind: gvk.Kind, Key: client.ObjectKeyFromObject(desired), Owner: ownerRef, Controller: *c}
	}
	if err := controllerutil.SetControllerReference(owner, desired, a.Scheme); err != nil {
		return "", fmt.Errorf("apply %s: setting controller reference: %w", desc, err)
	}
	config, err := buildConfig(desired, gvk, ignore)
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", desc, err)
	}

	live, err := a.newObject(gvk, desired)
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", desc, err)
	}
	result := Updated
	switch err := a.Client.Get(ctx, client.ObjectKeyFromObject(desired), live); {
	case apierrors.IsNotFound(err):
		result = Created
	case err != nil:
		return "", fmt.Errorf("apply %s: reading live object: %w", desc, err)
	default:
		if c := metav1.GetControllerOf(live); c != nil && c.UID != ownerRef.UID {
			return "", &ForeignControllerError{Kind: gvk.Kind, Key: client.ObjectKeyFromObject(desired), Owner: ownerRef, Controller: *c}
		}
		liveMap, err := toMap(live)
		if err != nil {
			return "", fmt.Errorf("apply %s: %w", desc, err)
		}
		// Typed objects read through a client usually have no TypeMeta; the
		// type is the one we asked for.
		liveMap["apiVersion"], liveMap["kind"] = config["apiVersion"], config["kind"]
		path, drifted := firstDrift(config, liveMap)
		if !drifted {
			if err := copyInto(desired, live); err != nil {
				return "", fmt.Errorf("apply %s: %w", desc, err)
			}
			return Unchanged, nil
		}
		logf.FromContext(ctx).V(1).Info("owned object drifted, applying", "object", desc, "field", path)
	}

	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(config)}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.ForceOwnership, client.FieldOwner(a.FieldManager)); err != nil {
		return "", fmt.Errorf("apply %s: server-side apply as %q: %w", desc, a.FieldManager, err)
	}
	// The response must contain what we sent; if it does not, the server
	// (schema pruning, a mutating webhook) rewrote it and every pass will
	// write. Worth a log line, not an error: the write itself succeeded.
	if path, drifted := firstDrift(config, u.Object); drifted {
		logf.FromContext(ctx).Info("server did not keep an applied field; this object will be re-applied on every pass",
			"object", desc, "field", path)
	}
	if err := setFromMap(desired, gvk, u.Object); err != nil {
		return "", fmt.Errorf("apply %s: reading server response: %w", desc, err)
	}
	return result, nil
}

// Prune deletes objects of list's type in owner's namespace that owner
// controls and that are not in keep (matched by name). It returns the names
// it deleted, sorted.
//
// Guarantees:
//   - Objects not controlled by owner (by UID) are never touched.
//   - Deletes use Background propagation and a UID precondition: an object
//     deleted and recreated with the same name since it was listed is not
//     deleted (the server answers Conflict; it is skipped and re-examined on
//     the next pass).
//   - Objects already being deleted are skipped, so a pass with nothing to
//     prune makes no mutating request (once the cache has seen the previous
//     pass's deletions; see the caveats on [Applier]).
//   - One failed delete does not stop the others; the errors are joined.
//
// Caveats: with a cluster-scoped owner the list spans all namespaces. The
// list may come from a cache and be slightly stale; the UID precondition
// makes that safe.
func (a *Applier) Prune(ctx context.Context, owner client.Object, list client.ObjectList, keep ...client.Object) ([]string, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	if owner.GetUID() == "" {
		return nil, fmt.Errorf("prune: owner %s has no UID: pass the object read from the API server", describe("", owner))
	}
	if err := a.Client.List(ctx, list, client.InNamespace(owner.GetNamespace())); err != nil {
		return nil, fmt.Errorf("prune: listing %T in namespace %q: %w", list, owner.GetNamespace(), err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("prune: %T: %w", list, err)
	}
	kept := make(map[string]bool, len(keep))
	for _, k := range keep {
		kept[k.GetName()] = true
	}
	var deleted []string
	var errs []error
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return deleted, fmt.Errorf("prune: list item %T is not a client.Object", item)
		}
		if kept[obj.GetName()] || !metav1.IsControlledBy(obj, owner) || obj.GetDeletionTimestamp() != nil {
			continue
		}
		uid := obj.GetUID()
		err := a.Client.Delete(ctx, obj,
			client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &uid})
		switch {
		case err == nil:
			deleted = append(deleted, obj.GetName())
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Gone already, or replaced by a newer object with the same name.
		default:
			errs = append(errs, fmt.Errorf("prune: deleting %s: %w", describe(gvkKind(a.Scheme, obj), obj), err))
		}
	}
	slices.Sort(deleted)
	return deleted, errors.Join(errs...)
}

func (a *Applier) validate() error {
	switch {
	case a.Client == nil:
		return errors.New("ownership.Applier: Client is required")
	case a.Scheme == nil:
		return errors.New("ownership.Applier: Scheme is required")
	case a.FieldManager == "":
		return errors.New("ownership.Applier: FieldManager is required")
	}
	return nil
}

// ownerRef is the controller reference Apply sets, for checks and errors.
func (a *Applier) ownerRef(owner client.Object) (metav1.OwnerReference, error) {
	if owner.GetUID() == "" {
		return metav1.OwnerReference{}, fmt.Errorf("owner %s has no UID: pass the object read from the API server", describe("", owner))
	}
	gvk, err := apiutil.GVKForObject(owner, a.Scheme)
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("owner %T: %w", owner, err)
	}
	return *metav1.NewControllerRef(owner, gvk), nil
}

// setNamespace enforces same-namespace ownership and defaults an empty
// namespace to the owner's.
func (a *Applier) setNamespace(owner, desired client.Object, gvk schema.GroupVersionKind) error {
	path := field.NewPath("metadata", "namespace")
	namespaced, err := a.Client.IsObjectNamespaced(desired)
	if err != nil {
		return fmt.Errorf("finding the scope of %s: %w", gvk, err)
	}
	ownerNS, ns := owner.GetNamespace(), desired.GetNamespace()
	switch {
	case !namespaced && ns != "":
		return field.Invalid(path, ns, fmt.Sprintf("%s is cluster-scoped", gvk.Kind))
	case !namespaced && ownerNS != "":
		return field.Forbidden(path, fmt.Sprintf("cluster-scoped %s cannot be owned by an object in namespace %q", gvk.Kind, ownerNS))
	case !namespaced:
	case ownerNS == "" && ns == "":
		return field.Required(path, "owner is cluster-scoped, so the namespace cannot be defaulted")
	case ownerNS == "":
	case ns == "":
		desired.SetNamespace(ownerNS)
	case ns != ownerNS:
		return field.Invalid(path, ns, fmt.Sprintf("must be the owner's namespace %q: owner references cannot cross namespaces", ownerNS))
	}
	return nil
}

// newObject returns an empty object of desired's type to read into.
func (a *Applier) newObject(gvk schema.GroupVersionKind, desired client.Object) (client.Object, error) {
	if _, ok := desired.(runtime.Unstructured); ok {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	}
	o, err := a.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	co, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not a client.Object", o)
	}
	return co, nil
}

func parseIgnore(paths []string) ([][]string, error) {
	out := make([][]string, 0, len(paths))
	for _, p := range paths {
		segs, err := parsePath(p)
		if err != nil {
			return nil, fmt.Errorf("IgnoreFields: %w", err)
		}
		switch {
		case segs[0] == "apiVersion", segs[0] == "kind",
			segs[0] == "metadata" && (len(segs) == 1 || segs[1] == "name" || segs[1] == "namespace" || segs[1] == "ownerReferences"):
			return nil, fmt.Errorf("IgnoreFields: %q cannot be ignored", p)
		}
		out = append(out, segs)
	}
	return out, nil
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

// copyInto replaces *dst with *src; both are pointers to the same type.
func copyInto(dst, src client.Object) error {
	if du, ok := dst.(*unstructured.Unstructured); ok {
		du.Object = src.(*unstructured.Unstructured).Object
		return nil
	}
	dv, sv := reflect.ValueOf(dst), reflect.ValueOf(src)
	if dv.Type() != sv.Type() {
		return fmt.Errorf("cannot copy %T into %T", src, dst)
	}
	dv.Elem().Set(sv.Elem())
	return nil
}

// setFromMap replaces desired with the object in m.
func setFromMap(desired client.Object, gvk schema.GroupVersionKind, m map[string]any) error {
	if u, ok := desired.(*unstructured.Unstructured); ok {
		u.Object = m
		return nil
	}
	fresh := reflect.New(reflect.TypeOf(desired).Elem()).Interface()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, fresh); err != nil {
		return fmt.Errorf("converting to %s: %w", gvk.Kind, err)
	}
	return copyInto(desired, fresh.(client.Object))
}

func gvkKind(s *runtime.Scheme, obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, s)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return gvk.Kind
}

// describe names an object as `Kind namespace/name` for errors and logs.
func describe(kind string, obj client.Object) string {
	key := client.ObjectKeyFromObject(obj).String()
	if kind == "" {
		return key
	}
	return kind + " " + key
}
