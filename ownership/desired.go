package ownership

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// The first step of Apply: from the caller's apply configuration to the
// configuration Apply compares and sends (desiredObject).

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

// NotOwned makes Apply write the object without a controller reference to
// the owner, for an object that must outlive it (an archive, a backup kept
// after the owner is deleted): the garbage collector leaves it alone and
// Prune never deletes it, while the compare-then-write and the rules for
// an existing object stay as for an owned one, but that an object without
// a controller is written if FieldManager wrote it before: the apply adds
// no controller reference. Nothing on the object ties it to the owner, so
// an owned apply of it, by another owner or by this one, needs [Adopt].
// The object may be in any namespace (an empty one defaults to the
// owner's); one this owner controlled before is released by the next
// apply. docs/ownership.md, "Objects that outlive their owner".
func NotOwned() ApplyOption {
	return func(o *options) { o.notOwned = true }
}

// OwnerLabel makes Apply set the label key=value on the object as part of
// the desired configuration (compared, and applied on drift, like every
// field desired sets): a label that follows the owner onto what it
// controls, such as the owner's shard range (sharding.Member.RangeLabel) that lets
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

// ConfigHashAnnotation is the annotation in which Apply records a hash of the
// configuration it last applied to an object. A changed hash (a field
// added, changed or removed, an IgnoreFields list changed) forces one apply,
// which is how server-side apply gets to remove a field we no longer send.
// Removing or editing it by hand causes one harmless re-apply. Why a hash
// rather than managedFields: docs/ownership.md.
const ConfigHashAnnotation = "ownership.reconcilekit.io/config-hash"

// desiredObject is what Apply compares the live object with and sends.
type desiredObject struct {
	// config is the configuration: the fields the caller set, with the
	// namespace defaulted, our controller reference (unless NotOwned), the
	// ignored fields removed and ConfigHashAnnotation set.
	config map[string]any
	gvk    schema.GroupVersionKind
	key    client.ObjectKey
	desc   string      // "Kind namespace/name", for errors and logs
	ts     *typeSchema // the kind's schema, which the comparison follows
	// ownerRef is owner's controller reference: in config unless NotOwned,
	// and what an existing object's controller must be.
	ownerRef metav1.OwnerReference
	adopt    bool
	// notOwned: the configuration has no controller reference (NotOwned),
	// so writing it adopts nothing.
	notOwned bool
}

// hash is the configuration's hash, as finish recorded it in
// ConfigHashAnnotation.
func (d *desiredObject) hash() string {
	md, _ := d.config["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	return stringAt(ann, ConfigHashAnnotation)
}

// setsControllerAnnotation reports whether the configuration sets an
// annotation a built-in controller writes (controllerAnnotation).
func (d *desiredObject) setsControllerAnnotation() bool {
	md, _ := d.config["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	for k := range ann {
		if controllerAnnotation(k) {
			return true
		}
	}
	return false
}

// id identifies d's object among every kind's: "group/version, Kind=K
// namespace/name".
func (d *desiredObject) id() string { return d.gvk.String() + " " + d.key.String() }

// buildDesired turns the caller's apply configuration, encoded, into the
// desiredObject for owner.
func (a *Applier) buildDesired(ctx context.Context, owner client.Object, desired runtime.ApplyConfiguration, encoded []byte, o options) (*desiredObject, error) {
	ignore, err := parseIgnore(o.ignore)
	if err != nil {
		return nil, err
	}
	config, gvk, err := decodeConfig(encoded, desired)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	md := config["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	if name == "" {
		return nil, fmt.Errorf("apply %s: %w", gvk.Kind, field.Required(field.NewPath("metadata", "name"), "server-side apply needs a name"))
	}
	if err := a.setNamespace(owner, md, gvk, !o.notOwned); err != nil {
		return nil, fmt.Errorf("apply %s %s: %w", gvk.Kind, name, err)
	}
	d := &desiredObject{config: config, gvk: gvk, adopt: o.adopt, notOwned: o.notOwned,
		key: client.ObjectKey{Namespace: stringAt(md, "namespace"), Name: name}}
	d.desc = gvk.Kind + " " + d.key.String()
	if d.ownerRef, err = a.ownerRef(owner); err != nil {
		return nil, fmt.Errorf("apply %s: %w", d.desc, err)
	}
	if !o.notOwned {
		if err := setControllerRef(md, d.ownerRef, gvk.Kind, d.key); err != nil {
			return nil, err
		}
		setLabels(md, o.labels)
	}
	if err := finish(config, ignore); err != nil {
		return nil, fmt.Errorf("apply %s: %w", d.desc, err)
	}
	if d.ts, err = a.schemaFor(ctx, gvk); err != nil {
		return nil, fmt.Errorf("apply %s: %w", d.desc, err)
	}
	return d, nil
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

// parsePath splits a field path: dot-separated keys, with a bracketed key for
// keys that contain dots, e.g. `metadata.annotations[example.com/owner]`.
func parsePath(s string) ([]string, error) {
	var out []string
	rest := s
	for rest != "" {
		if rest[0] == '[' {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("field path %q: unterminated '['", s)
			}
			if end == 1 {
				return nil, fmt.Errorf("field path %q: empty key", s)
			}
			out = append(out, rest[1:end])
			rest = rest[end+1:]
		} else {
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, fmt.Errorf("field path %q: empty key", s)
			}
			out = append(out, rest[:end])
			rest = rest[end:]
		}
		switch {
		case rest == "":
		case rest[0] == '.':
			rest = rest[1:]
			if rest == "" {
				return nil, fmt.Errorf("field path %q: trailing '.'", s)
			}
		case rest[0] == '[':
		default:
			return nil, fmt.Errorf("field path %q: expected '.' or '[' after %q", s, out[len(out)-1])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("field path is empty")
	}
	return out, nil
}

// serverMetadata are metadata fields the server sets; they are dropped from
// the applied configuration so that a desired object built from (or reused
// after) a live one neither sends preconditions nor claims server fields.
var serverMetadata = []string{
	"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName",
}

// configOf turns desired into the unstructured configuration to compare
// and apply: exactly the fields the caller set (an apply configuration
// marshals only those), apiVersion and kind checked, status and server-set
// metadata removed, nil values pruned, and a Secret's stringData folded into
// data (the server never stores stringData, so keeping it would be drift
// forever). finish completes it.
func configOf(desired runtime.ApplyConfiguration) (map[string]any, schema.GroupVersionKind, error) {
	b, err := encode(desired)
	if err != nil {
		return nil, schema.GroupVersionKind{}, err
	}
	return decodeConfig(b, desired)
}

// encode returns desired as JSON: exactly the fields the caller set.
func encode(desired runtime.ApplyConfiguration) ([]byte, error) {
	// Apply configurations implement IsApplyConfiguration on the value, so
	// desired may be a struct: only a pointer can be a typed nil.
	if rv := reflect.ValueOf(desired); desired == nil || rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, errors.New("desired apply configuration is nil")
	}
	b, err := json.Marshal(desired)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", desired, err)
	}
	return b, nil
}

// decodeConfig is configOf for desired encoded as b.
func decodeConfig(b []byte, desired runtime.ApplyConfiguration) (map[string]any, schema.GroupVersionKind, error) {
	var gvk schema.GroupVersionKind
	var u map[string]any
	// utiljson keeps integers as int64, as the live object's unstructured
	// form has them.
	if err := utiljson.Unmarshal(b, &u); err != nil {
		return nil, gvk, fmt.Errorf("decoding %T: %w", desired, err)
	}
	apiVersion, _ := u["apiVersion"].(string)
	kind, _ := u["kind"].(string)
	switch {
	case apiVersion == "":
		return nil, gvk, field.Required(field.NewPath("apiVersion"), "build desired with its constructor, e.g. appsv1ac.Deployment(name, namespace)")
	case kind == "":
		return nil, gvk, field.Required(field.NewPath("kind"), "build desired with its constructor, e.g. appsv1ac.Deployment(name, namespace)")
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, gvk, field.Invalid(field.NewPath("apiVersion"), apiVersion, err.Error())
	}
	gvk = gv.WithKind(kind)
	delete(u, "status")
	md, _ := u["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		u["metadata"] = md
	}
	for _, f := range serverMetadata {
		delete(md, f)
	}
	if ann, ok := md["annotations"].(map[string]any); ok {
		delete(ann, ConfigHashAnnotation)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	pruneNils(u)
	if gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Secret" {
		if err := foldStringData(u); err != nil {
			return nil, gvk, err
		}
	}
	return u, gvk, nil
}

// pruneNils removes nil map values ("creationTimestamp: null" and the like
// from typed objects) so that they are neither applied nor hashed.
func pruneNils(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			pruneNils(e)
		}
	case []any:
		for _, e := range t {
			pruneNils(e)
		}
	}
}

func foldStringData(u map[string]any) error {
	sd, ok := u["stringData"].(map[string]any)
	if !ok {
		delete(u, "stringData")
		return nil
	}
	data, _ := u["data"].(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("stringData.%s: must be a string, got %T", k, v)
		}
		data[k] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	delete(u, "stringData")
	if len(data) > 0 {
		u["data"] = data
	}
	return nil
}

// setNamespace checks the namespace in desired's metadata md and defaults
// an empty one to the owner's. An owned object (owned) must be in the
// owner's namespace, as owner references cannot cross namespaces, and
// cannot be cluster-scoped with a namespaced owner; a NotOwned one may be
// anywhere.
func (a *Applier) setNamespace(owner client.Object, md map[string]any, gvk schema.GroupVersionKind, owned bool) error {
	path := field.NewPath("metadata", "namespace")
	namespaced, err := a.isNamespaced(gvk)
	if err != nil {
		return err
	}
	ownerNS, ns := owner.GetNamespace(), stringAt(md, "namespace")
	switch {
	case !namespaced && ns != "":
		return field.Invalid(path, ns, fmt.Sprintf("%s is cluster-scoped", gvk.Kind))
	case !namespaced && owned && ownerNS != "":
		return field.Forbidden(path, fmt.Sprintf("cluster-scoped %s cannot be owned by an object in namespace %q", gvk.Kind, ownerNS))
	case !namespaced:
	case ns == "" && ownerNS == "":
		return field.Required(path, "owner is cluster-scoped, so the namespace cannot be defaulted")
	case ns == "":
		md["namespace"] = ownerNS
	case owned && ownerNS != "" && ns != ownerNS:
		return field.Invalid(path, ns, fmt.Sprintf("must be the owner's namespace %q: owner references cannot cross namespaces", ownerNS))
	}
	return nil
}

// isNamespaced reports whether gvk is namespaced, asking the RESTMapper
// once per kind.
func (a *Applier) isNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	known := &a.learned().namespaced
	if v, ok := known.Load(gvk); ok {
		return v.(bool), nil
	}
	namespaced, err := apiutil.IsGVKNamespaced(gvk, a.Client.RESTMapper())
	if err != nil {
		return false, fmt.Errorf("finding the scope of %s: %w", gvk, err)
	}
	known.Store(gvk, namespaced)
	return namespaced, nil
}

// ownerRef is owner's controller reference.
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

// finish removes the ignored fields and records the hash of the result in
// ConfigHashAnnotation.
func finish(u map[string]any, ignore [][]string) error {
	for _, p := range ignore {
		removePath(u, p)
	}
	sum, err := configHash(u)
	if err != nil {
		return err
	}
	md := u["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[ConfigHashAnnotation] = sum
	return nil
}

// removePath deletes the field at path. A list met on the way applies the
// rest of the path to each of its elements.
func removePath(v any, path []string) {
	if len(path) == 0 {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if len(path) == 1 {
			delete(t, path[0])
			return
		}
		removePath(t[path[0]], path[1:])
	case []any:
		for _, e := range t {
			removePath(e, path)
		}
	}
}

// configHash hashes the configuration. encoding/json sorts map keys, so the
// hash is deterministic.
func configHash(u map[string]any) (string, error) {
	b, err := json.Marshal(u)
	if err != nil {
		return "", fmt.Errorf("hashing applied configuration: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}

func stringAt(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}
