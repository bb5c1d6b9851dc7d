package ownership

import (
	"math"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// firstDrift reports whether desired is NOT a semantic subset of live, and if
// so the path of one field where they differ (e.g.
// "spec.template.spec.containers[name=app].image").
//
// Both arguments are in unstructured form (runtime.DefaultUnstructuredConverter
// output or decoded JSON). desired is what we would apply; live is the whole
// object as the server has it, including server-set defaults, status and other
// managers' fields. The rules, chosen so that server defaulting and other
// writers never count as drift while every value we set is checked:
//
//   - maps: every key of desired must be in live with an equal value; extra
//     live keys (defaults, foreign labels) are fine. A nil desired value, or an
//     empty desired map or list with no live counterpart, means "not set".
//   - lists of maps that all carry a non-empty string "name" (containers, env,
//     volumes, ports with names, ownerReferences): each desired element must
//     match some live element with the same name; extra live elements (an
//     injected sidecar) are fine.
//   - other lists (args, unnamed ports): positional, equal length.
//   - numbers compare by value across int/float representations; strings
//     compare exactly, except under resource-quantity fields (resources
//     limits/requests, sizeLimit, ...) where "500m" equals "0.5".
//
// It allocates nothing when there is no drift, so it is cheap to run on every
// reconcile (see BenchmarkUnchanged); the path is built only on a mismatch.
func firstDrift(desired, live map[string]any) (path string, drifted bool) {
	rev, drifted := mapDrift(desired, live, false)
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

// mapDrift compares a desired map with a live value. quantityValues says the
// map's values are resource quantities (the map sits under e.g. "limits").
// On drift it returns the path below this map, innermost segment first.
func mapDrift(d map[string]any, l any, quantityValues bool) ([]string, bool) {
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
			if isEmptyCollection(dv) {
				continue
			}
			return []string{k}, true
		}
		if rev, drift := valueDrift(dv, lv, quantityValues || isQuantityKey(k), isQuantityMapKey(k)); drift {
			return append(rev, k), true
		}
	}
	return nil, false
}

// valueDrift compares any desired value with a live value. quantity says a
// string value is a resource quantity; quantityMap says a map value holds
// quantities.
func valueDrift(d, l any, quantity, quantityMap bool) ([]string, bool) {
	switch dv := d.(type) {
	case map[string]any:
		return mapDrift(dv, l, quantityMap)
	case []any:
		return listDrift(dv, l)
	default:
		if scalarEqual(d, l, quantity) {
			return nil, false
		}
		return nil, true
	}
}

func listDrift(d []any, l any) ([]string, bool) {
	ll, ok := l.([]any)
	if !ok {
		if l == nil && len(d) == 0 {
			return nil, false
		}
		return nil, true
	}
	if namedElements(d) {
		for _, de := range d {
			dm := de.(map[string]any)
			name := dm["name"].(string)
			found := false
			for _, le := range ll {
				lm, ok := le.(map[string]any)
				if !ok || lm["name"] != name {
					continue
				}
				if _, drift := mapDrift(dm, lm, false); !drift {
					found = true
					break
				}
			}
			if !found {
				// Report the field inside the element when exactly one live
				// element has the name; otherwise the element as a whole.
				seg := "[name=" + name + "]"
				if lm := onlyNamed(ll, name); lm != nil {
					rev, _ := mapDrift(dm, lm, false)
					return append(rev, seg), true
				}
				return []string{seg}, true
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
		if rev, drift := valueDrift(d[i], ll[i], false, false); drift {
			return append(rev, "["+strconv.Itoa(i)+"]"), true
		}
	}
	return nil, false
}

// namedElements reports whether every element is a map with a non-empty
// string "name": the common merge key of Kubernetes list-maps.
func namedElements(d []any) bool {
	if len(d) == 0 {
		return false
	}
	for _, e := range d {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		if n, ok := m["name"].(string); !ok || n == "" {
			return false
		}
	}
	return true
}

func onlyNamed(ll []any, name string) map[string]any {
	var found map[string]any
	for _, le := range ll {
		if lm, ok := le.(map[string]any); ok && lm["name"] == name {
			if found != nil {
				return nil
			}
			found = lm
		}
	}
	return found
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

// isQuantityMapKey reports whether a map under this key holds resource
// quantities (corev1.ResourceList and friends).
func isQuantityMapKey(k string) bool {
	switch k {
	case "limits", "requests", "capacity", "allocatable", "hard", "overhead",
		"max", "min", "default", "defaultRequest", "maxLimitRequestRatio":
		return true
	}
	return false
}

// isQuantityKey reports whether the value under this key is itself a
// resource quantity.
func isQuantityKey(k string) bool {
	switch k {
	case "sizeLimit", "divisor":
		return true
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
		return ok && dn.equal(ln)
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
