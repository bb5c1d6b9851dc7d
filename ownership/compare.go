package ownership

import (
	"math"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// The second step of Apply: does the live object differ from the
// desiredObject's configuration? drift first brings the configuration to
// the form the live object can show (asRead, omittedZero), then firstDrift
// walks both by the kind's schema. docs/ownership.md, "How drift is judged".

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
	typed, ok := typedRoundTrip(s, gvk, config)
	if !ok {
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

// typedRoundTrip returns config as a round trip through gvk's Go type in s
// leaves it; ok is false when s has no such type or the round trip fails.
func typedRoundTrip(s *runtime.Scheme, gvk schema.GroupVersionKind, config map[string]any) (map[string]any, bool) {
	obj, err := s.New(gvk)
	if err != nil {
		return nil, false
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(config), obj); err != nil {
		return nil, false
	}
	typed, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	return typed, err == nil
}

// omittedZero marks a desired zero value (false, "", 0) in a field whose Go
// type cannot hold it apart from "not set": a non-pointer field with
// omitempty, such as a PodSpec's hostNetwork or a Container's stdin. The
// live object never shows such a value: the API server stores a built-in
// kind through its Go type and drops it, and a typed read drops it from a
// custom resource. So an absent live field matches it; a live field that
// is present must still equal it (a hostNetwork someone set to true is
// drift).
type omittedZero struct{ v any }

// markOmittedZeros returns a copy of config in which each zero scalar that
// a round trip through gvk's Go type in s drops is an omittedZero; ok is
// false when there is none, or the round trip fails.
func markOmittedZeros(s *runtime.Scheme, gvk schema.GroupVersionKind, config map[string]any) (map[string]any, bool) {
	typed, ok := typedRoundTrip(s, gvk, config)
	if !ok {
		return nil, false
	}
	out := runtime.DeepCopyJSON(config)
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

// quantityType is the schema name of resource.Quantity: the one scalar the
// apiserver rewrites into a canonical form ("0.5" is stored as "500m").
const quantityType = "io.k8s.apimachinery.pkg.api.resource.Quantity"

// firstDrift reports whether desired is NOT a semantic subset of live, and if
// so the path of one field where they differ (e.g.
// "spec.template.spec.containers[name=app].image"). Both are unstructured:
// desired is what we would apply, live the whole object as the server has
// it. Lists, sets, maps and scalars compare as the kind's schema (ts) says,
// so that server defaults and other writers never count as drift while every
// value we set is checked; the rules are in docs/ownership.md, "How drift is
// judged". It allocates nothing when there is no drift (BenchmarkUnchanged);
// the path is built only on a mismatch.
func firstDrift(ts *typeSchema, desired, live map[string]any) (path string, drifted bool) {
	c := comparer{ts.schema}
	a, _ := c.s.Resolve(ts.root)
	rev, drifted := c.mapDrift(a.Map, desired, live)
	if !drifted {
		return "", false
	}
	var b strings.Builder
	for i := len(rev) - 1; i >= 0; i-- {
		seg := rev[i]
		if b.Len() > 0 && !strings.HasPrefix(seg, "[") {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String(), true
}

type comparer struct{ s *smdschema.Schema }

// typeRef is a field's type; known is false where the schema has none, and
// the zero Atom it resolves to compares structurally.
type typeRef struct {
	smdschema.TypeRef
	known bool
}

func (c comparer) resolve(tr typeRef) smdschema.Atom {
	if !tr.known {
		return smdschema.Atom{}
	}
	a, _ := c.s.Resolve(tr.TypeRef)
	return a
}

// fieldType is the type of key k in a map or struct of type m.
func fieldType(m *smdschema.Map, k string) typeRef {
	if m == nil {
		return typeRef{}
	}
	if f, ok := m.FindField(k); ok {
		return typeRef{f.Type, true}
	}
	if m.ElementType.NamedType != nil || m.ElementType.Inlined != (smdschema.Atom{}) {
		return typeRef{m.ElementType, true}
	}
	return typeRef{}
}

// mapDrift compares a desired map with a live value. On drift it returns
// the path below this map, innermost segment first.
func (c comparer) mapDrift(m *smdschema.Map, d map[string]any, l any) ([]string, bool) {
	lm, ok := l.(map[string]any)
	if !ok {
		if l == nil && len(d) == 0 {
			return nil, false
		}
		return nil, true
	}
	for k, dv := range d {
		if dv == nil {
			continue
		}
		lv, present := lm[k]
		if !present || lv == nil {
			if _, zero := dv.(omittedZero); zero || isEmptyCollection(dv) {
				continue
			}
			return []string{k}, true
		}
		if rev, drift := c.valueDrift(fieldType(m, k), dv, lv); drift {
			return append(rev, k), true
		}
	}
	return nil, false
}

// valueDrift compares any desired value of type tr with a live value.
func (c comparer) valueDrift(tr typeRef, d, l any) ([]string, bool) {
	a := c.resolve(tr)
	switch dv := d.(type) {
	case map[string]any:
		return c.mapDrift(a.Map, dv, l)
	case []any:
		return c.listDrift(a.List, dv, l)
	default:
		if z, ok := d.(omittedZero); ok {
			d = z.v
		}
		quantity := tr.known && tr.NamedType != nil && *tr.NamedType == quantityType
		if scalarEqual(d, l, quantity) {
			return nil, false
		}
		return nil, true
	}
}

func (c comparer) listDrift(t *smdschema.List, d []any, l any) ([]string, bool) {
	ll, ok := l.([]any)
	if !ok {
		if l == nil && len(d) == 0 {
			return nil, false
		}
		return nil, true
	}
	var elem typeRef
	if t != nil {
		elem = typeRef{t.ElementType, true}
	}
	switch {
	case t != nil && t.ElementRelationship == smdschema.Associative && len(t.Keys) > 0:
		return c.keyedDrift(t.Keys, elem, d, ll)
	case t != nil && t.ElementRelationship == smdschema.Associative:
		for i, de := range d {
			if !containsScalar(ll, de) {
				return []string{"[" + strconv.Itoa(i) + "]"}, true
			}
		}
		return nil, false
	}
	if len(d) != len(ll) {
		return nil, true
	}
	for i := range d {
		if d[i] == nil {
			if ll[i] != nil {
				return []string{"[" + strconv.Itoa(i) + "]"}, true
			}
			continue
		}
		if rev, drift := c.valueDrift(elem, d[i], ll[i]); drift {
			return append(rev, "["+strconv.Itoa(i)+"]"), true
		}
	}
	return nil, false
}

// keyedDrift compares an associative list: every desired element must equal
// (as a subset) a live element with the same keys.
func (c comparer) keyedDrift(keys []string, elem typeRef, d, ll []any) ([]string, bool) {
	et := c.resolve(elem).Map
	for _, de := range d {
		dm, ok := de.(map[string]any)
		if !ok {
			return nil, true
		}
		var only map[string]any
		matches, found := 0, false
		for _, le := range ll {
			lm, ok := le.(map[string]any)
			if !ok || !sameKeys(keys, dm, lm) {
				continue
			}
			matches++
			only = lm
			if _, drift := c.mapDrift(et, dm, lm); !drift {
				found = true
				break
			}
		}
		if found {
			continue
		}
		// Report the field inside the element when exactly one live element
		// has its keys; otherwise the element as a whole.
		seg := keySegment(keys, dm)
		if matches == 1 {
			rev, _ := c.mapDrift(et, dm, only)
			return append(rev, seg), true
		}
		return []string{seg}, true
	}
	return nil, false
}

// sameKeys reports whether live element lm has desired element dm's values
// for every key dm sets. A key dm leaves unset is the server's to default
// (a port's protocol), so any live value matches it.
func sameKeys(keys []string, dm, lm map[string]any) bool {
	for _, k := range keys {
		if unset(dm, k) {
			continue
		}
		if !scalarEqual(dm[k], lm[k], false) {
			return false
		}
	}
	return true
}

// keySegment names a list element by its keys, e.g. "[name=app]" or
// "[containerPort=8080,protocol=TCP]".
func keySegment(keys []string, dm map[string]any) string {
	var b strings.Builder
	b.WriteByte('[')
	for _, k := range keys {
		if unset(dm, k) {
			continue
		}
		v := dm[k]
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		if s, ok := v.(string); ok {
			b.WriteString(s)
		} else {
			b.WriteString(stringify(v))
		}
	}
	b.WriteByte(']')
	return b.String()
}

// unset reports whether desired element dm leaves key k to the server: not
// set, or set to a zero value its Go type cannot hold (see omittedZero).
func unset(dm map[string]any, k string) bool {
	v, ok := dm[k]
	_, zero := v.(omittedZero)
	return !ok || v == nil || zero
}

func stringify(v any) string {
	if n, ok := number(v); ok {
		if n.isFloat {
			return strconv.FormatFloat(n.f, 'g', -1, 64)
		}
		return strconv.FormatInt(n.i, 10)
	}
	if b, ok := v.(bool); ok {
		return strconv.FormatBool(b)
	}
	return reflect.TypeOf(v).String()
}

func containsScalar(ll []any, v any) bool {
	for _, le := range ll {
		if scalarEqual(v, le, false) {
			return true
		}
	}
	return false
}

func isEmptyCollection(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

func scalarEqual(d, l any, quantity bool) bool {
	switch dv := d.(type) {
	case string:
		lv, ok := l.(string)
		if !ok {
			return false
		}
		if dv == lv {
			return true
		}
		return quantity && quantityEqual(dv, lv)
	case bool:
		lv, ok := l.(bool)
		return ok && dv == lv
	}
	if dn, ok := number(d); ok {
		ln, ok := number(l)
		if ok && dn.equal(ln) {
			return true
		}
		// A quantity sent as a number (cpu: 1) is stored as a string ("1").
		if ls, isStr := l.(string); isStr && quantity {
			return quantityEqual(stringify(d), ls)
		}
		return false
	}
	return reflect.DeepEqual(d, l)
}

// num is a JSON number as an int64 or a float64.
type num struct {
	i       int64
	f       float64
	isFloat bool
}

func (a num) equal(b num) bool {
	if !a.isFloat && !b.isFloat {
		return a.i == b.i
	}
	af, bf := a.f, b.f
	if !a.isFloat {
		af = float64(a.i)
	}
	if !b.isFloat {
		bf = float64(b.i)
	}
	return af == bf
}

// number returns v as a num; ok is false for non-numbers.
func number(v any) (n num, ok bool) {
	switch t := v.(type) {
	case int64:
		return num{i: t}, true
	case int:
		return num{i: int64(t)}, true
	case int32:
		return num{i: int64(t)}, true
	case int16:
		return num{i: int64(t)}, true
	case int8:
		return num{i: int64(t)}, true
	case uint64:
		if t > math.MaxInt64 {
			return num{f: float64(t), isFloat: true}, true
		}
		return num{i: int64(t)}, true
	case uint:
		return number(uint64(t))
	case uint32:
		return num{i: int64(t)}, true
	case uint16:
		return num{i: int64(t)}, true
	case uint8:
		return num{i: int64(t)}, true
	case float64:
		return num{f: t, isFloat: true}, true
	case float32:
		return num{f: float64(t), isFloat: true}, true
	}
	return num{}, false
}

func quantityEqual(a, b string) bool {
	qa, err := resource.ParseQuantity(a)
	if err != nil {
		return false
	}
	qb, err := resource.ParseQuantity(b)
	if err != nil {
		return false
	}
	return qa.Cmp(qb) == 0
}
