package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Applier applies desired owned objects with server-side apply under one
// field manager, writing only when the live object has drifted from what we
// want, and prunes owned objects that are no longer wanted. A pass over
// objects that already match makes no mutating request; only the fields the
// desired object sets are applied or compared, so server defaults, other
// managers' fields and IgnoreFields are never overwritten; an object
// controlled by someone else is never modified or deleted. Reads may come
// from a cache, whose lag costs at most an extra read or a no-op re-apply
// (docs/ownership.md, "Caveats"). An Applier is safe for concurrent use if
// its clients are.
type Applier struct {
	// Client reads the live objects (reads may come from the manager's
	// cache) and writes them (writes always go to the apiserver).
	Client client.Client
	// APIReader reads from the API server, not from a cache
	// (mgr.GetAPIReader()). Required. Apply reads through it where a cached
	// copy cannot decide: an object the cache does not hold, or holds
	// without a controller, and an object replaced since it was read.
	APIReader client.Reader
	// Scheme maps the owner to its GroupVersionKind, and says which owned
	// kinds are read as typed objects (sharing the informer of an Owns()
	// watch) rather than unstructured.
	Scheme *runtime.Scheme
	// FieldManager is the server-side apply field manager, e.g.
	// "webapp-operator". Required. Keep it stable: renaming it leaves the
	// old manager owning fields that the new one can then not remove.
	FieldManager string
	// Schemas finds the schema of owned objects in the API server's
	// OpenAPI v3 documents. Custom resources need it; without it built-in
	// kinds use client-go's compiled-in schemas (see [SchemaCache]).
	Schemas *SchemaCache
}

// ApplyResult says what Apply did.
type ApplyResult string

const (
	// Created means the API server had no such object and the apply
	// created it.
	Created ApplyResult = "Created"
	// Updated means the live object had drifted (or the desired
	// configuration changed) and was applied.
	Updated ApplyResult = "Updated"
	// Unchanged means the live object already matched; nothing was written.
	Unchanged ApplyResult = "Unchanged"
)

// ApplyOption adjusts one Apply call.
type ApplyOption func(*options)

type options struct {
	ignore   []string
	adopt    bool
	notOwned bool
	labels   map[string]string
}

// IgnoreFields leaves these fields to others (e.g. "spec.replicas" for a
// Deployment scaled by a HorizontalPodAutoscaler): they are removed from the
// desired object before it is applied and compared, so we never set them,
// not even on creation, and never count them as drift. A field we owned
// before is released by the next apply. A path is dot-separated keys, a key
// containing dots in brackets ("metadata.annotations[example.com/paused]");
// a path that crosses a list applies to every element
// ("spec.template.spec.containers.resources"). metadata.name,
// metadata.namespace, metadata.ownerReferences, apiVersion and kind cannot
// be ignored.
func IgnoreFields(paths ...string) ApplyOption {
	return func(o *options) { o.ignore = append(o.ignore, paths...) }
}

// OwnerLabel makes Apply set the label key=value on the object as part of
// the desired configuration (compared, and applied on drift, like every
// field desired sets): a label that follows the owner onto what it
// controls, such as the owner's shard range (sharding.RangeLabel) that lets
// each replica cache only its owners' objects. It is ignored with
// [NotOwned]: an object several owners may write cannot carry each one's
// value.
func OwnerLabel(key, value string) ApplyOption {
	return func(o *options) {
		if o.labels == nil {
			o.labels = map[string]string{}
		}
		o.labels[key] = value
	}
}

// Apply makes the live object match desired in every field desired sets,
// as an object controlled by owner, and says what it did. desired is an
// apply configuration, which holds exactly the fields the caller set:
// client-go's (appsv1ac.Deployment(name, namespace)), controller-gen's for
// custom resources, or client.ApplyConfigurationFromUnstructured of an
// object built by hand (never one converted from a typed object, whose zero
// values would be sent and force-owned). desired is not changed.
//
// Apply adds owner's controller reference (the namespace defaults to the
// owner's; another one is an error, and a namespaced owner cannot control a
// cluster-scoped object), compares the live object with desired by the
// kind's schema ([Applier.Schemas]), and applies with server-side apply,
// forcing ownership under FieldManager, only if a field desired sets
// differs or the configuration changed since the last apply
// ([ConfigHashAnnotation]). Unchanged means no mutating request was made;
// Created means the API server had no such object.
//
// An object controlled by another owner (another UID) is not touched:
// *ForeignControllerError. An object without a controller is adopted only if
// FieldManager wrote it before, or with [Adopt]; otherwise
// *AdoptionRefusedError. An apply names the UID it judged, so an object
// replaced since it was read is read and judged again, never written by
// mistake. docs/ownership.md has the caveats (fields the server rewrites,
// the RBAC blockOwnerDeletion needs).
func (a *Applier) Apply(ctx context.Context, owner client.Object, desired runtime.ApplyConfiguration, opts ...ApplyOption) (ApplyResult, error) {
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
	config, gvk, err := configOf(desired)
	if err != nil {
		return "", fmt.Errorf("apply: %w", err)
	}
	md := config["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if name == "" {
		return "", fmt.Errorf("apply %s: %w", gvk.Kind, field.Required(field.NewPath("metadata", "name"), "server-side apply needs a name"))
	}
	setNamespace := a.setNamespace
	if o.notOwned {
		setNamespace = a.setUnownedNamespace
	}
	if err := setNamespace(owner, md, gvk); err != nil {
		return "", fmt.Errorf("apply %s %s: %w", gvk.Kind, name, err)
	}
	key := client.ObjectKey{Namespace: stringAt(md, "namespace"), Name: name}
	desc := gvk.Kind + " " + key.String()
	ownerRef, err := a.ownerRef(owner)
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", desc, err)
	}
	if !o.notOwned {
		if err := setControllerRef(md, ownerRef, gvk.Kind, key); err != nil {
			return "", err
		}
		setLabels(md, o.labels)
	}
	if err := finish(config, ignore); err != nil {
		return "", fmt.Errorf("apply %s: %w", desc, err)
	}
	ts, err := a.schemaFor(ctx, gvk)
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", desc, err)
	}

	j := judge{ownerRef: ownerRef, adopt: o.adopt, gvk: gvk, key: key, desc: desc, config: config, ts: ts}
	live, err := a.read(ctx, a.Client, gvk, key)
	if err != nil {
		return "", fmt.Errorf("apply %s: reading live object: %w", desc, err)
	}
	if live == nil || metav1.GetControllerOf(live) == nil && (!o.notOwned || !wroteBy(live, a.FieldManager)) {
		// The cache may not hold the object (not seen yet, or outside its
		// label selector) and may strip the managedFields that say who wrote
		// it: whether it exists and may be adopted, the API server says.
		// (A NotOwned object never has a controller; a cached copy that
		// shows our managedFields is enough.)
		if live, err = a.read(ctx, a.APIReader, gvk, key); err != nil {
			return "", fmt.Errorf("apply %s: reading live object from the API server: %w", desc, err)
		}
	}
	op, err := a.write(ctx, j, live)
	if live != nil && replaced(err) {
		// The object we judged was deleted, or replaced by another with
		// the same name, since the read: judge what is there now.
		if live, err = a.read(ctx, a.APIReader, gvk, key); err != nil {
			return "", fmt.Errorf("apply %s: reading live object from the API server: %w", desc, err)
		}
		op, err = a.write(ctx, j, live)
	}
	return op, err
}

// judge is what Apply decides with: the desired configuration and the
// rules for taking over an existing object.
type judge struct {
	ownerRef metav1.OwnerReference
	adopt    bool
	gvk      schema.GroupVersionKind
	key      client.ObjectKey
	desc     string
	config   map[string]any
	ts       *typeSchema
}

// read returns the object at key as r has it, nil if it does not exist.
func (a *Applier) read(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, key client.ObjectKey) (client.Object, error) {
	live, err := a.newObject(gvk)
	if err != nil {
		return nil, err
	}
	switch err := r.Get(ctx, key, live); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return live, nil
}

// write applies j.config over live (nil: the object does not exist) if
// live may be taken and has drifted.
func (a *Applier) write(ctx context.Context, j judge, live client.Object) (ApplyResult, error) {
	if live == nil {
		answer, err := a.send(ctx, j, "")
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
	case c != nil && c.UID != j.ownerRef.UID:
		return "", &ForeignControllerError{Kind: j.gvk.Kind, Key: j.key, Owner: j.ownerRef, Controller: *c}
	case c == nil && !j.adopt && !wroteBy(live, a.FieldManager):
		return "", &AdoptionRefusedError{Kind: j.gvk.Kind, Key: j.key, Owner: j.ownerRef, FieldManager: a.FieldManager}
	}
	liveMap, err := toMap(live)
	if err != nil {
		return "", fmt.Errorf("apply %s: %w", j.desc, err)
	}
	// Typed objects read through a client usually have no TypeMeta; the
	// type is the one we asked for.
	liveMap["apiVersion"], liveMap["kind"] = j.config["apiVersion"], j.config["kind"]
	_, isUnstructured := live.(runtime.Unstructured)
	path, drifted := a.drift(j.ts, j.gvk, j.config, liveMap, !isUnstructured)
	if !drifted {
		return Unchanged, nil
	}
	logf.FromContext(ctx).V(1).Info("owned object drifted, applying", "object", j.desc, "field", path)
	if _, err := a.send(ctx, j, live.GetUID()); err != nil {
		return "", err
	}
	return Updated, nil
}

// send applies j.config as FieldManager, forcing ownership, and returns
// the server's answer. With uid set the apply is for that object only: the
// API server refuses it if the object is gone (Conflict) or is another one
// by the same name (metadata.uid is immutable: Invalid), see replaced.
func (a *Applier) send(ctx context.Context, j judge, uid types.UID) (map[string]any, error) {
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(j.config)}
	if uid != "" {
		u.SetUID(uid)
	}
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.ForceOwnership, client.FieldOwner(a.FieldManager)); err != nil {
		return nil, fmt.Errorf("apply %s: server-side apply as %q: %w", j.desc, a.FieldManager, err)
	}
	// The response must contain what we sent; if it does not, the server
	// (schema pruning, a mutating webhook) rewrote it and every pass will
	// write. Worth a log line, not an error: the write itself succeeded.
	if path, drifted := a.drift(j.ts, j.gvk, j.config, u.Object, false); drifted {
		logf.FromContext(ctx).Info("server did not keep an applied field; this object will be re-applied on every pass",
			"object", j.desc, "field", path)
	}
	return u.Object, nil
}

// Prune deletes the objects of list's type in owner's namespace (in every
// namespace, for a cluster-scoped owner) that owner controls and whose
// names are not in keep, and returns the names it deleted, sorted. Objects
// not controlled by owner are never touched, and objects already being
// deleted are skipped. Each delete has Background propagation and a UID
// precondition, so an object re-created under the same name since the list
// is left alone; one failed delete does not stop the others (the errors are
// joined).
func (a *Applier) Prune(ctx context.Context, owner client.Object, list client.ObjectList, keep ...string) ([]string, error) {
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
	var deleted []string
	var errs []error
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return deleted, fmt.Errorf("prune: list item %T is not a client.Object", item)
		}
		if slices.Contains(keep, obj.GetName()) || !metav1.IsControlledBy(obj, owner) || obj.GetDeletionTimestamp() != nil {
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
	case a.APIReader == nil:
		return errors.New("ownership.Applier: APIReader is required (mgr.GetAPIReader(), or Client if it does not read from a cache)")
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
// namespace to the owner's, in desired's metadata md.
func (a *Applier) setNamespace(owner client.Object, md map[string]any, gvk schema.GroupVersionKind) error {
	path := field.NewPath("metadata", "namespace")
	namespaced, err := apiutil.IsGVKNamespaced(gvk, a.Client.RESTMapper())
	if err != nil {
		return fmt.Errorf("finding the scope of %s: %w", gvk, err)
	}
	ownerNS, ns := owner.GetNamespace(), stringAt(md, "namespace")
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
		md["namespace"] = ownerNS
	case ns != ownerNS:
		return field.Invalid(path, ns, fmt.Sprintf("must be the owner's namespace %q: owner references cannot cross namespaces", ownerNS))
	}
	return nil
}

// setControllerRef adds ref to the owner references in desired's metadata
// md, replacing an entry for the same owner; a controller reference to
// another owner is a ForeignControllerError.
func setControllerRef(md map[string]any, ref metav1.OwnerReference, kind string, key client.ObjectKey) error {
	refs, _ := md["ownerReferences"].([]any)
	out := make([]any, 0, len(refs)+1)
	for _, r := range refs {
		m, ok := r.(map[string]any)
		if !ok {
			return fmt.Errorf("apply %s %s: %w", kind, key, field.Invalid(field.NewPath("metadata", "ownerReferences"), r, "must be an object"))
		}
		if uid, _ := m["uid"].(string); uid == string(ref.UID) {
			continue
		}
		if c, _ := m["controller"].(bool); c {
			other := metav1.OwnerReference{APIVersion: stringAt(m, "apiVersion"), Kind: stringAt(m, "kind"),
				Name: stringAt(m, "name"), UID: types.UID(stringAt(m, "uid"))}
			return &ForeignControllerError{Kind: kind, Key: key, Owner: ref, Controller: other}
		}
		out = append(out, m)
	}
	md["ownerReferences"] = append(out, map[string]any{
		"apiVersion": ref.APIVersion, "kind": ref.Kind, "name": ref.Name, "uid": string(ref.UID),
		"controller": true, "blockOwnerDeletion": true,
	})
	return nil
}

// setLabels adds labels to desired's metadata md, over any of the same
// keys desired sets.
func setLabels(md map[string]any, labels map[string]string) {
	if len(labels) == 0 {
		return
	}
	l, _ := md["labels"].(map[string]any)
	if l == nil {
		l = map[string]any{}
		md["labels"] = l
	}
	for k, v := range labels {
		l[k] = v
	}
}

func stringAt(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// newObject returns an empty object of kind gvk to read the live object
// into: typed when the scheme knows the kind, so the read shares the
// informer of the controller's Owns() watch, unstructured otherwise.
func (a *Applier) newObject(gvk schema.GroupVersionKind) (client.Object, error) {
	if !a.Scheme.Recognizes(gvk) {
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
