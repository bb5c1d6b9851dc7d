package ownership

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ConfigHashAnnotation is the annotation in which Apply records a hash of the
// configuration it last applied to an object.
//
// Why: a client-side subset check ("is every field we want already live?")
// cannot see a field we used to set and no longer want - the live object
// still has it, and it is a subset all the same - so without more
// information an Applier would never remove it. The hash changes whenever the
// desired configuration changes (a field added, changed or removed, an
// IgnoreFields list changed), which forces one apply; server-side apply then
// removes fields we owned and no longer send. It was chosen over reading our
// entry in metadata.managedFields because it
//   - still works when the reads come from a cache that strips managedFields
//     (cache.TransformStripManagedFields, a common memory saving), where a
//     managedFields-based check would see "nothing owned" and write forever;
//   - needs no OpenAPI schema: FieldsV1 keys list items by their merge keys,
//     including server-defaulted ones (Service ports are keyed by port AND
//     protocol even when we never set protocol), which cannot be matched
//     against desired reliably without the schema.
//
// Caveats: it is one more annotation on every object. Removing or editing it
// by hand causes a single, harmless re-apply. One object should be applied by
// one Applier (one field manager); two Appliers on one object would each
// overwrite the other's hash and write on every pass.
const ConfigHashAnnotation = "ownership.reconcilekit.io/config-hash"

// serverMetadata are metadata fields the server sets; they are dropped from
// the applied configuration so that a desired object built from (or reused
// after) a live one neither sends preconditions nor claims server fields.
var serverMetadata = []string{
	"uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName",
}

// buildConfig turns desired into the unstructured configuration to compare
// and apply: apiVersion/kind set, status and server-set metadata removed, nil
// values pruned, a Secret's stringData folded into data (the server never
// stores stringData, so keeping it would be drift forever), ignored fields
// removed, and ConfigHashAnnotation set to the hash of the result.
func buildConfig(desired runtime.Object, gvk schema.GroupVersionKind, ignore [][]string) (map[string]any, error) {
	var u map[string]any
	if un, ok := desired.(runtime.Unstructured); ok {
		u = runtime.DeepCopyJSON(un.UnstructuredContent())
	} else {
		var err error
		if u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(desired); err != nil {
			return nil, fmt.Errorf("converting %s to unstructured: %w", gvk.Kind, err)
		}
		dropZeroStructs(reflect.ValueOf(desired), u)
	}
	u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
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
			return nil, err
		}
	}
	for _, p := range ignore {
		removePath(u, p)
	}
	sum, err := configHash(u)
	if err != nil {
		return nil, err
	}
	ann, _ := md["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		md["annotations"] = ann
	}
	ann[ConfigHashAnnotation] = sum
	return u, nil
}

// dropZeroStructs removes from u (the unstructured form of v) every
// struct-typed field that is tagged omitempty and holds its zero value.
//
// Why: omitempty does not omit structs, so a typed object carries fields its
// author never set. Most become "{}" (harmless), but types that marshal
// themselves turn into real values: an unset Service port's targetPort
// (intstr.IntOrString) becomes 0. Applying that would claim the field, and
// since the server then defaults it to the port number it would never match
// - a write on every pass. A zero struct under omitempty means "unset" to
// the API's authors (the same rule as encoding/json's omitzero).
func dropZeroStructs(v reflect.Value, u any) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		m, ok := u.(map[string]any)
		if !ok {
			return // marshals itself (IntOrString, Quantity, Time)
		}
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && opts == "" {
				continue
			}
			fv := v.Field(i)
			if name == "" {
				if f.Anonymous || strings.Contains(opts, "inline") {
					dropZeroStructs(fv, m) // inlined into this map
				}
				continue
			}
			child, present := m[name]
			if !present {
				continue
			}
			if fv.Kind() == reflect.Struct && fv.IsZero() && slices.Contains(strings.Split(opts, ","), "omitempty") {
				delete(m, name)
				continue
			}
			dropZeroStructs(fv, child)
		}
	case reflect.Slice, reflect.Array:
		l, ok := u.([]any)
		if !ok || len(l) != v.Len() {
			return
		}
		for i := range l {
			dropZeroStructs(v.Index(i), l[i])
		}
	case reflect.Map:
		m, ok := u.(map[string]any)
		if !ok || v.Type().Key().Kind() != reflect.String {
			return
		}
		for it := v.MapRange(); it.Next(); {
			dropZeroStructs(it.Value(), m[it.Key().String()])
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
