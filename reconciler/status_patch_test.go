package reconciler

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/randfill"
)

// crdKind is a custom resource shaped as kubebuilder writes them, whose
// status holds the field types a status patch must encode as the API
// does: types that encode as a JSON string or number (metav1.Time,
// MicroTime, Duration, resource.Quantity, intstr.IntOrString), raw JSON
// that may be an array, unexported embedded structs whose fields are
// promoted (one tagged inline), a ,string option, pointers, and maps of
// structs. inlineKind embeds an exported struct.
type crdKind struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   crdSpec   `json:"spec,omitzero"`
	Status crdStatus `json:"status,omitempty,omitzero"`
}

type crdSpec struct {
	Size int32 `json:"size,omitempty"`
}

type crdStatus struct {
	crdCommon `json:",inline"`
	crdPromoted

	LastSync       metav1.Time          `json:"lastSync,omitzero"`
	LastProbe      *metav1.Time         `json:"lastProbe,omitempty"`
	Heartbeat      metav1.MicroTime     `json:"heartbeat,omitzero"`
	Interval       metav1.Duration      `json:"interval,omitzero"`
	Capacity       resource.Quantity    `json:"capacity,omitzero"`
	Limit          *resource.Quantity   `json:"limit,omitempty"`
	MaxUnavailable intstr.IntOrString   `json:"maxUnavailable,omitzero"`
	Surge          *intstr.IntOrString  `json:"surge,omitempty"`
	Raw            runtime.RawExtension `json:"raw,omitzero"`
	Values         apiextensionsv1.JSON `json:"values,omitzero"`
	Count          int64                `json:"count,string,omitempty"`
	Ready          *bool                `json:"ready,omitempty"`
	Members        map[string]crdMember `json:"members,omitempty"`
	Pool           *crdPool             `json:"pool,omitempty"`
	Conditions     []metav1.Condition   `json:"conditions,omitempty"`
}

// crdCommon is embedded with json:",inline", as kubebuilder writes it.
type crdCommon struct {
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	Phase              string `json:"phase,omitempty"`
}

// crdPromoted is embedded unexported and untagged: encoding/json writes
// its exported fields as the status's own.
type crdPromoted struct {
	Shard string `json:"shard,omitempty"`
	Epoch int32  `json:"epoch,omitempty"`
}

type crdMember struct {
	Since  metav1.Time       `json:"since"`
	Weight resource.Quantity `json:"weight"`
	Ports  []int32           `json:"ports,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

type crdPool struct {
	Size   intstr.IntOrString `json:"size"`
	Nodes  []string           `json:"nodes,omitempty"`
	Window *metav1.Duration   `json:"window,omitempty"`
}

// DeepCopyObject copies as controller-gen's deep copy does: MergeFrom
// encodes copies, which must encode as the original (a JSON round trip
// would not: raw JSON null comes back as a zero RawExtension).
func (k *crdKind) DeepCopyObject() runtime.Object {
	out := *k
	k.DeepCopyInto(&out.ObjectMeta)
	s, o := &k.Status, &out.Status
	o.LastProbe = s.LastProbe.DeepCopy()
	o.Capacity = s.Capacity.DeepCopy()
	if s.Limit != nil {
		o.Limit = ptr.To(s.Limit.DeepCopy())
	}
	if s.Surge != nil {
		o.Surge = ptr.To(*s.Surge)
	}
	s.Raw.DeepCopyInto(&o.Raw)
	s.Values.DeepCopyInto(&o.Values)
	if s.Ready != nil {
		o.Ready = ptr.To(*s.Ready)
	}
	if s.Members != nil {
		o.Members = make(map[string]crdMember, len(s.Members))
		for name, m := range s.Members {
			m.Weight, m.Ports, m.Labels = m.Weight.DeepCopy(), slices.Clone(m.Ports), maps.Clone(m.Labels)
			o.Members[name] = m
		}
	}
	if s.Pool != nil {
		p := *s.Pool
		p.Nodes, p.Window = slices.Clone(p.Nodes), p.Window.DeepCopy()
		o.Pool = &p
	}
	o.Conditions = slices.Clone(s.Conditions)
	return &out
}

// inlineKind's status embeds an exported struct shared by kinds, inline.
type inlineKind struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status inlineStatus `json:"status,omitempty"`
}

type inlineStatus struct {
	CommonStatus `json:",inline"`

	Note string `json:"note,omitempty"`
}

// CommonStatus is the part of a status several kinds share.
type CommonStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

func (k *inlineKind) DeepCopyObject() runtime.Object {
	out := *k
	k.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = slices.Clone(k.Status.Conditions)
	return &out
}

// crdPair is a crdKind with every status field set, and a copy of it.
func crdPair() (base, obj *crdKind) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base = &crdKind{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 3, ResourceVersion: "12"}}
	s := &base.Status
	s.ObservedGeneration, s.Phase = 2, "Progressing"
	s.Shard, s.Epoch = "shard-1", 4
	s.LastSync = metav1.NewTime(at)
	s.LastProbe = ptr.To(metav1.NewTime(at.Add(-time.Minute)))
	s.Heartbeat = metav1.NewMicroTime(at.Add(123456 * time.Microsecond))
	s.Interval = metav1.Duration{Duration: 30 * time.Second}
	s.Capacity = resource.MustParse("1Gi")
	s.Limit = ptr.To(resource.MustParse("500m"))
	s.MaxUnavailable = intstr.FromInt32(1)
	s.Surge = ptr.To(intstr.FromString("25%"))
	s.Raw = runtime.RawExtension{Raw: []byte(`[1,{"a":"b"},3]`)}
	s.Values = apiextensionsv1.JSON{Raw: []byte(`["x","y"]`)}
	s.Count = 5
	s.Ready = ptr.To(false)
	s.Members = map[string]crdMember{
		"a": {Since: metav1.NewTime(at), Weight: resource.MustParse("2"), Ports: []int32{80, 443}, Labels: map[string]string{"zone": "a"}},
		"b": {Since: metav1.NewTime(at), Weight: resource.MustParse("1"), Ports: []int32{8080}},
	}
	s.Pool = &crdPool{Size: intstr.FromInt32(3), Nodes: []string{"n1", "n2"}, Window: &metav1.Duration{Duration: time.Hour}}
	s.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Waiting", LastTransitionTime: metav1.NewTime(at)}}
	return base, base.DeepCopyObject().(*crdKind)
}

// TestStatusPatchEncodesStatusAsTheAPIDoes: a change of any status field
// leaves on the server what controller-runtime's optimistic-lock merge
// patch leaves: a field that encodes as a JSON string or number (a time,
// a quantity, an int-or-string) is sent as that value, raw JSON holding
// an array is replaced whole, an inline or promoted field is written
// under its own name, and a ,string field as a string (issue #48).
func TestStatusPatchEncodesStatusAsTheAPIDoes(t *testing.T) {
	later := time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	for name, change := range map[string]func(base, obj *crdKind){
		"metav1.Time changed":            func(_, o *crdKind) { o.Status.LastSync = metav1.NewTime(later) },
		"metav1.Time cleared":            func(_, o *crdKind) { o.Status.LastSync = metav1.Time{} },
		"*metav1.Time changed":           func(_, o *crdKind) { o.Status.LastProbe = ptr.To(metav1.NewTime(later)) },
		"*metav1.Time cleared":           func(_, o *crdKind) { o.Status.LastProbe = nil },
		"metav1.MicroTime changed":       func(_, o *crdKind) { o.Status.Heartbeat = metav1.NewMicroTime(later) },
		"metav1.Duration changed":        func(_, o *crdKind) { o.Status.Interval.Duration = time.Minute },
		"resource.Quantity changed":      func(_, o *crdKind) { o.Status.Capacity = resource.MustParse("2Gi") },
		"*resource.Quantity changed":     func(_, o *crdKind) { o.Status.Limit = ptr.To(resource.MustParse("2")) },
		"*resource.Quantity cleared":     func(_, o *crdKind) { o.Status.Limit = nil },
		"IntOrString int to string":      func(_, o *crdKind) { o.Status.MaxUnavailable = intstr.FromString("10%") },
		"IntOrString int changed":        func(_, o *crdKind) { o.Status.MaxUnavailable = intstr.FromInt32(80) },
		"*IntOrString string to int":     func(_, o *crdKind) { o.Status.Surge = ptr.To(intstr.FromInt32(2)) },
		"RawExtension array item":        func(_, o *crdKind) { o.Status.Raw.Raw = []byte(`[1,{"a":"c"},3]`) },
		"RawExtension array shortened":   func(_, o *crdKind) { o.Status.Raw.Raw = []byte(`[1]`) },
		"RawExtension array to object":   func(_, o *crdKind) { o.Status.Raw.Raw = []byte(`{"a":1}`) },
		"JSON array item":                func(_, o *crdKind) { o.Status.Values.Raw = []byte(`["x","z"]`) },
		"JSON cleared":                   func(_, o *crdKind) { o.Status.Values.Raw = nil },
		"inline field changed":           func(_, o *crdKind) { o.Status.Phase = "Ready" },
		"inline field cleared":           func(_, o *crdKind) { o.Status.ObservedGeneration = 0 },
		"promoted field changed":         func(_, o *crdKind) { o.Status.Shard = "shard-2" },
		"promoted field cleared":         func(_, o *crdKind) { o.Status.Epoch = 0 },
		",string field changed":          func(_, o *crdKind) { o.Status.Count = 6 },
		"*bool changed":                  func(_, o *crdKind) { o.Status.Ready = ptr.To(true) },
		"map of structs: time changed":   func(_, o *crdKind) { editMember(o, "a", func(m *crdMember) { m.Since = metav1.NewTime(later) }) },
		"map of structs: list changed":   func(_, o *crdKind) { editMember(o, "a", func(m *crdMember) { m.Ports = []int32{443} }) },
		"map of structs: key removed":    func(_, o *crdKind) { delete(o.Status.Members, "b") },
		"map of structs: key added":      func(_, o *crdKind) { o.Status.Members["c"] = crdMember{Weight: resource.MustParse("1k")} },
		"pointer to struct: IntOrString": func(_, o *crdKind) { o.Status.Pool.Size = intstr.FromString("50%") },
		"pointer to struct: *Duration":   func(_, o *crdKind) { o.Status.Pool.Window = nil },
		"pointer to struct cleared":      func(_, o *crdKind) { o.Status.Pool = nil },
		"status cleared (omitzero)":      func(_, o *crdKind) { o.Status = crdStatus{} },
		"first status write (omitzero)":  func(b, _ *crdKind) { b.Status = crdStatus{} },
		"several at once": func(_, o *crdKind) {
			o.Status.LastSync, o.Status.Capacity, o.Status.Phase, o.Status.Shard = metav1.NewTime(later), resource.MustParse("3Gi"), "Ready", ""
		},
	} {
		t.Run(name, func(t *testing.T) {
			base, obj := crdPair()
			change(base, obj)
			require.NoError(t, sameAsMergeFrom(base, obj))
		})
	}
	t.Run("inline exported struct", func(t *testing.T) {
		base := &inlineKind{ObjectMeta: metav1.ObjectMeta{Name: "i", Namespace: "ns", ResourceVersion: "5"}}
		base.Status.ObservedGeneration, base.Status.Note = 1, "starting"
		obj := base.DeepCopyObject().(*inlineKind)
		obj.Status.ObservedGeneration = 2
		obj.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Done", LastTransitionTime: metav1.NewTime(later)}}
		require.NoError(t, sameAsMergeFrom(base, obj))
	})
}

// editMember changes the member name of o's status with edit.
func editMember(o *crdKind, name string, edit func(*crdMember)) {
	m := o.Status.Members[name]
	edit(&m)
	o.Status.Members[name] = m
}

// TestStatusPatchOfStatusesThatEncodeTheSame: a status that differs only
// below what its JSON holds (a time by less than a second) is sent as {},
// with the resourceVersion precondition.
func TestStatusPatchOfStatusesThatEncodeTheSame(t *testing.T) {
	base, obj := crdPair()
	obj.Status.LastSync = metav1.NewTime(obj.Status.LastSync.Add(time.Millisecond))
	require.True(t, statusChanged(base, obj), "statusChanged sees the time move")
	got, err := statusPatch{base: base}.Data(obj)
	require.NoError(t, err)
	require.JSONEq(t, `{"metadata":{"resourceVersion":"12"},"status":{}}`, string(got))
	require.NoError(t, sameAsMergeFrom(base, obj))
}

// sameAsMergeFrom applies the status patch from base to obj, and
// controller-runtime's optimistic-lock merge patch, each to base's JSON,
// and returns an error unless both leave the same status (compared
// decoded, numbers exactly) and send the same resourceVersion
// precondition, and unless the status patch sends nothing but
// metadata.resourceVersion and status.
func sameAsMergeFrom(base, obj client.Object) error {
	ours, err := statusPatch{base: base}.Data(obj)
	if err != nil {
		return fmt.Errorf("status patch: %w", err)
	}
	theirs, err := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}).Data(obj)
	if err != nil {
		return fmt.Errorf("merge patch: %w", err)
	}
	doc, err := json.Marshal(base)
	if err != nil {
		return fmt.Errorf("encoding base: %w", err)
	}
	name := jsonName(statusField(base))
	var o, m map[string]any
	if err := decode(ours, &o); err != nil {
		return fmt.Errorf("status patch %s: %w", ours, err)
	}
	if err := decode(theirs, &m); err != nil {
		return fmt.Errorf("merge patch %s: %w", theirs, err)
	}
	for key := range o {
		if key != "metadata" && key != name {
			return fmt.Errorf("status patch sends %q: %s", key, ours)
		}
	}
	rv := map[string]any{"resourceVersion": base.GetResourceVersion()}
	if !reflect.DeepEqual(o["metadata"], rv) {
		return fmt.Errorf("status patch's metadata is not %v: %s", rv, ours)
	}
	if meta, _ := m["metadata"].(map[string]any); meta["resourceVersion"] != rv["resourceVersion"] {
		return fmt.Errorf("merge patch's resourceVersion is not %v: %s", rv["resourceVersion"], theirs)
	}
	var results [2]map[string]any
	for i, patch := range [][]byte{ours, theirs} {
		applied, err := jsonpatch.MergePatch(doc, patch)
		if err != nil {
			return fmt.Errorf("applying %s to %s: %w", patch, doc, err)
		}
		if err := decode(applied, &results[i]); err != nil {
			return fmt.Errorf("decoding %s: %w", applied, err)
		}
	}
	if path, a, b := difference(results[0][name], results[1][name], name); path != "" {
		return fmt.Errorf("%s: the status patch leaves %s, the merge patch %s\nstatus patch: %s\nmerge patch:  %s\nbase:         %s",
			path, a, b, ours, theirs, doc)
	}
	return nil
}

// difference returns the first path at which the decoded JSON values a and
// b differ, and what each holds there ("absent" for a missing key), or ""
// when they are equal.
func difference(a, b any, path string) (at, inA, inB string) {
	if reflect.DeepEqual(a, b) {
		return "", "", ""
	}
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA && okB {
		keys := slices.Sorted(maps.Keys(ma))
		for k := range mb {
			if _, ok := ma[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			if at, inA, inB := difference(ma[k], mb[k], path+"."+k); at != "" {
				return at, inA, inB
			}
		}
	}
	show := func(v any) string {
		if v == nil {
			return "absent"
		}
		j, _ := json.Marshal(v)
		return string(j)
	}
	return path, show(a), show(b)
}

// decode unmarshals JSON keeping numbers exact.
func decode(data []byte, into any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(into)
}

// TestStatusPatchMatchesMergeFrom is the differential test of issue #48:
// for every kind of client-go's scheme with a Status struct, and the
// CRD-shaped crdKind, random statuses and random changes of them (fixed
// seeds), the status patch leaves what controller-runtime's
// optimistic-lock merge patch leaves. FuzzStatusPatch runs it longer.
func TestStatusPatchMatchesMergeFrom(t *testing.T) {
	const perKind = 24
	kinds := statusKinds()
	cases, changed := 0, 0
	for i, typ := range kinds {
		f := statusFiller(randfill.NewWithSeed(int64(i) + 1))
		for range perKind {
			base, obj := statusPair(f, typ)
			if err := sameAsMergeFrom(base, obj); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			cases++
			if statusChanged(base, obj) {
				changed++
			}
		}
	}
	t.Logf("%d kinds (%d of client-go's scheme), %d cases, %d of them with a status change", len(kinds), len(kinds)-1, cases, changed)
}

// FuzzStatusPatch is TestStatusPatchMatchesMergeFrom driven by the fuzzer,
// for longer runs than the test's fixed seeds:
//
//	go test -run XXX -fuzz=FuzzStatusPatch -fuzztime=10m ./reconciler
//
// kind picks one of statusKinds (modulo their count), and data is what
// randfill draws the status and its change from. Without -fuzz, go test
// runs the seed corpus only.
func FuzzStatusPatch(f *testing.F) {
	kinds := statusKinds()
	for i := range 8 {
		f.Add(uint16(i*len(kinds)/8), []byte(fmt.Sprintf("seed %d: some bytes for randfill to draw from", i)))
	}
	f.Add(uint16(len(kinds)-1), []byte("crdKind"))
	f.Add(uint16(0), []byte(nil))
	f.Fuzz(func(t *testing.T, kind uint16, data []byte) {
		typ := kinds[int(kind)%len(kinds)]
		base, obj := statusPair(statusFiller(randfill.NewFromGoFuzz(data)), typ)
		if err := sameAsMergeFrom(base, obj); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
	})
}

// statusKinds lists, sorted by name, the Go types of client-go's scheme
// whose Status field is a struct, then crdKind.
func statusKinds() []reflect.Type {
	seen := map[reflect.Type]bool{}
	var kinds []reflect.Type
	for _, typ := range clientgoscheme.Scheme.AllKnownTypes() {
		s, ok := typ.FieldByName("Status")
		if seen[typ] || !ok || s.Type.Kind() != reflect.Struct || !reflect.PointerTo(typ).Implements(reflect.TypeFor[client.Object]()) {
			continue
		}
		seen[typ] = true
		kinds = append(kinds, typ)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].PkgPath()+kinds[i].Name() < kinds[j].PkgPath()+kinds[j].Name() })
	return append(kinds, reflect.TypeFor[crdKind]())
}

// statusFiller sets f up to fill statuses small enough for thousands of
// cases a second, with valid values of the types whose JSON encoding
// randfill's values would break (a quantity's unexported fields, raw
// JSON's bytes).
func statusFiller(f *randfill.Filler) *randfill.Filler {
	return f.NilChance(0.2).NumElements(0, 2).MaxDepth(12).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			formats := []resource.Format{resource.DecimalSI, resource.BinarySI, resource.DecimalExponent}
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), formats[c.Intn(len(formats))])
		},
		func(r *runtime.RawExtension, c randfill.Continue) { *r = runtime.RawExtension{Raw: randomJSON(c, 2)} },
		func(j *apiextensionsv1.JSON, c randfill.Continue) { *j = apiextensionsv1.JSON{Raw: randomJSON(c, 2)} },
		func(s *crdStatus, c randfill.Continue) {
			c.FillNoCustom(s)
			c.Fill(&s.crdPromoted) // randfill skips an unexported field
		},
	)
}

// randomJSON is a JSON value, often an array, nested up to depth.
func randomJSON(c randfill.Continue, depth int) []byte {
	var v any
	switch n := c.Intn(6); {
	case n == 0 || depth == 0:
		v = c.Intn(4)
	case n == 1:
		v = c.String(4)
	case n == 2:
		m := map[string]json.RawMessage{}
		for range c.Intn(3) {
			m[c.String(2)] = randomJSON(c, depth-1)
		}
		v = m
	default:
		a := []json.RawMessage{}
		for range c.Intn(4) {
			a = append(a, randomJSON(c, depth-1))
		}
		v = a
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// statusPair is an object of type typ with a random status and a
// resourceVersion, and a copy of it whose status f changed at random
// (mutated up to three times until the status differs; it may not, to
// check a patch that changes nothing too).
func statusPair(f *randfill.Filler, typ reflect.Type) (base, obj client.Object) {
	base = reflect.New(typ).Interface().(client.Object)
	base.SetName("x")
	base.SetNamespace("ns")
	base.SetResourceVersion(fmt.Sprint(roll(f, 1000) + 1))
	f.Fill(statusOf(base).Addr().Interface())
	obj = base.DeepCopyObject().(client.Object)
	for range 3 {
		if mutate(f, statusOf(obj)); statusChanged(base, obj) {
			break
		}
	}
	return base, obj
}

// mutate changes v, which must be settable, at random as a pass changes a
// status: a value left, cleared or set anew; a list item or map key
// added, removed or changed; a field of a struct changed.
func mutate(f *randfill.Filler, v reflect.Value) {
	switch roll(f, 8) {
	case 0:
		v.SetZero()
		return
	case 1:
		f.Fill(v.Addr().Interface())
		return
	case 2, 3, 4:
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(f, v.Elem())
		}
	case reflect.Struct:
		mutateFields(f, v)
	case reflect.Slice:
		n := v.Len()
		switch {
		case n > 0 && roll(f, 3) == 0:
			v.Set(v.Slice(0, n-1))
		case n == 0 || roll(f, 2) == 0:
			item := reflect.New(v.Type().Elem())
			f.Fill(item.Interface())
			v.Set(reflect.Append(v, item.Elem()))
		default:
			mutate(f, v.Index(roll(f, n)))
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		switch {
		case len(keys) > 0 && roll(f, 3) == 0:
			v.SetMapIndex(keys[roll(f, len(keys))], reflect.Value{})
		case len(keys) == 0 || roll(f, 2) == 0:
			key, val := reflect.New(v.Type().Key()), reflect.New(v.Type().Elem())
			f.Fill(key.Interface())
			f.Fill(val.Interface())
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			v.SetMapIndex(key.Elem(), val.Elem())
		default:
			key := keys[roll(f, len(keys))]
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(v.MapIndex(key))
			mutate(f, val)
			v.SetMapIndex(key, val)
		}
	}
}

// mutateFields mutates the fields of struct v that its JSON holds,
// including the promoted fields of an unexported embedded struct; a type
// with its own JSON encoding (a time, a quantity) is changed whole.
func mutateFields(f *randfill.Filler, v reflect.Value) {
	if v.Addr().Type().Implements(reflect.TypeFor[json.Marshaler]()) {
		return
	}
	for i := range v.NumField() {
		field := v.Type().Field(i)
		switch {
		case v.Field(i).CanSet():
			mutate(f, v.Field(i))
		case field.Anonymous && field.Type.Kind() == reflect.Struct:
			mutateFields(f, v.Field(i))
		}
	}
}

// roll is a number in [0, n) drawn from f.
func roll(f *randfill.Filler, n int) int {
	var u uint32
	f.Fill(&u)
	return int(u % uint32(n))
}
