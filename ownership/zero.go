package ownership

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// omittedZero marks a desired zero value (false, "", 0) in a field whose Go
// type cannot hold it apart from "not set": a non-pointer field with
// omitempty, such as a PodSpec's hostNetwork or a Container's stdin. The
// live object never shows such a value: the API server stores a built-in
// kind through its Go type and drops it, and a typed read drops it from a
// custom resource. So an absent live field matches it; a live field that
// is present must still equal it (a hostNetwork someone set to true is
// drift).
type omittedZero struct{ v any }

// drift reports whether live differs from config, the configuration we
// apply, and if so where (see firstDrift). readTyped says whether live was
// read through its Go type in a.Scheme; otherwise it is the API server's
// JSON.
//
// The zero values live cannot show are found only when the plain
// comparison finds drift, by a round trip of config through the Go type
// (see omittedZero): the common path, nothing changed, stays free of
// allocations.
func (a *Applier) drift(ts *typeSchema, gvk schema.GroupVersionKind, config, live map[string]any, readTyped bool) (string, bool) {
	want := config
	if readTyped && !clientgoscheme.Scheme.Recognizes(gvk) {
		want = asRead(a.Scheme, gvk, config)
	}
	path, drifted := firstDrift(ts, want, live)
	if !drifted {
		return "", false
	}
	// The Go type that dropped zero values from live: the one it was read
	// through, or the API server's own for a built-in kind. A custom
	// resource read unstructured is as sent: nothing was dropped.
	s := a.Scheme
	if !readTyped {
		s = nil
		if clientgoscheme.Scheme.Recognizes(gvk) {
			s = clientgoscheme.Scheme
		}
	}
	if s == nil {
		return path, true
	}
	marked, ok := markOmittedZeros(s, gvk, want)
	if !ok {
		return path, true
	}
	return firstDrift(ts, marked, live)
}

// markOmittedZeros returns a copy of config in which each zero scalar that
// a round trip through gvk's Go type in s drops is an omittedZero; ok is
// false when there is none, or the round trip fails.
func markOmittedZeros(s *runtime.Scheme, gvk schema.GroupVersionKind, config map[string]any) (map[string]any, bool) {
	obj, err := s.New(gvk)
	if err != nil {
		return nil, false
	}
	out := runtime.DeepCopyJSON(config)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(config), obj); err != nil {
		return nil, false
	}
	typed, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, false
	}
	return out, markZeros(out, typed)
}

// markZeros marks, in d, the zero scalars that t, its typed round trip,
// lacks. Lists keep their order and length through the round trip.
func markZeros(d, t map[string]any) bool {
	marked := false
	for k, v := range d {
		tv, kept := t[k]
		switch dv := v.(type) {
		case map[string]any:
			if tm, ok := tv.(map[string]any); ok {
				marked = markZeros(dv, tm) || marked
			}
		case []any:
			tl, ok := tv.([]any)
			if !ok || len(tl) != len(dv) {
				continue
			}
			for i := range dv {
				dm, dok := dv[i].(map[string]any)
				tm, tok := tl[i].(map[string]any)
				if dok && tok {
					marked = markZeros(dm, tm) || marked
				}
			}
		default:
			if !kept && isZeroScalar(v) {
				d[k] = omittedZero{v}
				marked = true
			}
		}
	}
	return marked
}

func isZeroScalar(v any) bool {
	switch t := v.(type) {
	case bool:
		return !t
	case string:
		return t == ""
	}
	n, ok := number(v)
	return ok && n.equal(num{})
}
