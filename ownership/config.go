package ownership

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ConfigHashAnnotation is the annotation in which Apply records a hash of the
// configuration it last applied to an object. A changed hash (a field
// added, changed or removed, an IgnoreFields list changed) forces one apply,
// which is how server-side apply gets to remove a field we no longer send.
// Removing or editing it by hand causes one harmless re-apply. Why a hash
// rather than managedFields: docs/ownership.md.
const ConfigHashAnnotation = "ownership.reconcilekit.io/config-hash"

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
	var gvk schema.GroupVersionKind
	// Apply configurations implement IsApplyConfiguration on the value, so
	// desired may be a struct: only a pointer can be a typed nil.
	if rv := reflect.ValueOf(desired); desired == nil || rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, gvk, errors.New("desired apply configuration is nil")
	}
	b, err := json.Marshal(desired)
	if err != nil {
		return nil, gvk, fmt.Errorf("encoding %T: %w", desired, err)
	}
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

// asRead returns config as a typed read of the object shows it: the scalars
// a typed round trip rewrites (a resource.Quantity "0.5" comes back as
// "500m", a time in another layout) take their typed form; nothing else
// changes, and the zero values the Go type would add are not taken.
//
// Why: a custom resource is stored as sent, but Apply reads it through its
// Go type when the scheme has it (to share the informer of an Owns()
// watch), and that read rewrites such values. Compared with config as
// sent, a non-canonical quantity applied unstructured would look changed on
// every pass, and be re-applied forever. Built-in kinds do not need this:
// their schema names their quantities (see firstDrift). If the typed round
// trip fails, config is returned as it is.
func asRead(s *runtime.Scheme, gvk schema.GroupVersionKind, config map[string]any) map[string]any {
	obj, err := s.New(gvk)
	if err != nil {
		return config
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(config), obj); err != nil {
		return config
	}
	typed, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return config
	}
	return takeScalars(runtime.DeepCopyJSON(config), typed).(map[string]any)
}

// takeScalars replaces each scalar in d with the scalar at the same place in
// t, where t has one.
func takeScalars(d, t any) any {
	switch dv := d.(type) {
	case map[string]any:
		if tm, ok := t.(map[string]any); ok {
			for k, v := range dv {
				if tv, ok := tm[k]; ok {
					dv[k] = takeScalars(v, tv)
				}
			}
		}
		return dv
	case []any:
		if tl, ok := t.([]any); ok && len(tl) == len(dv) {
			for i := range dv {
				dv[i] = takeScalars(dv[i], tl[i])
			}
		}
		return dv
	case nil:
		return nil
	}
	switch t.(type) {
	case map[string]any, []any, nil:
		return d
	}
	return t
}
