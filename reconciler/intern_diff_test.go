package reconciler

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/randfill"
)

// TestInternedObjectsEqualPlainOnes is interning's differential test
// (issue #48): for every kind of client-go's scheme (found by walking it),
// random objects (fixed seeds) read the same after the cache's interning
// transform as without it, typed and unstructured, with one interner
// shared across all of them as the process's is; and an interned object
// shares no map with the next one interned, so a reader's change to one
// cannot show in another.
func TestInternedObjectsEqualPlainOnes(t *testing.T) {
	const seeds = 8
	var table interner
	kinds, cases, unstructuredCases := 0, 0, 0
	for _, typ := range objectKinds() {
		kinds++
		for seed := range seeds {
			f := statusFiller(randfill.NewWithSeed(int64(seed) + 1))
			plain := reflect.New(typ).Interface().(client.Object)
			f.Fill(plain)
			interned := plain.DeepCopyObject().(client.Object)
			table.internObject(interned)
			if !apiequality.Semantic.DeepEqual(plain, interned) || !reflect.DeepEqual(plain, interned) {
				t.Fatalf("%s, seed %d: interned object differs:\nplain    %+v\ninterned %+v", typ, seed, plain, interned)
			}
			// The unstructured form, where randfill's values convert
			// (some random values of custom-encoded fields do not).
			if raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(plain); err == nil {
				u := &unstructured.Unstructured{Object: raw}
				ui := u.DeepCopy()
				table.internObject(ui)
				if a, b := mustJSON(t, u), mustJSON(t, ui); a != b {
					t.Fatalf("%s, seed %d: interned unstructured object differs:\nplain    %s\ninterned %s", typ, seed, a, b)
				}
				unstructuredCases++
			}
			// Interning keeps each object's own maps: a later object's
			// labels equal to these are still its own.
			twin := plain.DeepCopyObject().(client.Object)
			table.internObject(twin)
			if l := interned.GetLabels(); len(l) > 0 {
				for k := range l {
					l[k] += "-changed"
				}
				if reflect.DeepEqual(twin.GetLabels(), l) {
					t.Fatalf("%s, seed %d: a change to one interned object's labels shows in another's", typ, seed)
				}
			}
			cases++
		}
	}
	t.Logf("%d kinds, %d cases (%d of them unstructured too)", kinds, cases, unstructuredCases)
	if kinds < 50 || unstructuredCases < cases/2 {
		t.Fatalf("only %d kinds found in client-go's scheme, %d of %d cases convertible to unstructured", kinds, unstructuredCases, cases)
	}
}

// objectKinds lists, sorted by name, the Go types of client-go's scheme
// that are objects (not lists, not options).
func objectKinds() []reflect.Type {
	seen := map[reflect.Type]bool{}
	var kinds []reflect.Type
	for _, typ := range clientgoscheme.Scheme.AllKnownTypes() {
		if seen[typ] || !reflect.PointerTo(typ).Implements(reflect.TypeFor[client.Object]()) {
			continue
		}
		if _, isList := reflect.New(typ).Interface().(client.ObjectList); isList {
			continue
		}
		seen[typ] = true
		kinds = append(kinds, typ)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].PkgPath()+kinds[i].Name() < kinds[j].PkgPath()+kinds[j].Name() })
	return kinds
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
