package reconciler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// pointerGeneration is a kind whose status.observedGeneration is a *int64,
// as the Kubernetes API linter asks of an optional field.
type pointerGeneration struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status struct{ ObservedGeneration *int64 }
}

func (p *pointerGeneration) DeepCopyObject() runtime.Object {
	out := *p
	p.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// TestObservedGenerationPointer: a *int64 ObservedGeneration is stamped
// like an int64 one, not silently skipped.
func TestObservedGenerationPointer(t *testing.T) {
	obj := &pointerGeneration{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	setObservedGeneration(obj)
	require.NotNil(t, obj.Status.ObservedGeneration, "status.observedGeneration is stamped")
	assert.Equal(t, int64(4), *obj.Status.ObservedGeneration)
}

// widgetPair is a Widget with five conditions and the copy a pass made of
// it: one condition flipped, the note changed, and a label and a finalizer
// added (fields a status write must not carry).
func widgetPair() (orig, obj *testv1.Widget) {
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	orig = &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", Generation: 7, ResourceVersion: "41"}}
	orig.Spec.Size = 3
	orig.Status.ObservedGeneration = 6
	orig.Status.Note = "2/3 replicas ready"
	for _, typ := range []string{"Ready", "Reconciling", "Stalled", "DatabaseReady", "Available"} {
		orig.Status.Conditions = append(orig.Status.Conditions, metav1.Condition{
			Type: typ, Status: metav1.ConditionFalse, ObservedGeneration: 6, LastTransitionTime: at,
			Reason: "Waiting", Message: "waiting for " + typ,
		})
	}
	obj = orig.DeepCopy()
	obj.Status.ObservedGeneration = 7
	obj.Status.Note = "3/3 replicas ready"
	obj.Status.Conditions[0].Status, obj.Status.Conditions[0].Reason = metav1.ConditionTrue, "Succeeded"
	obj.Labels = map[string]string{"added": "by the pass"}
	obj.Finalizers = []string{"example.com/cleanup"}
	return orig, obj
}

// nestedStatus is a kind whose status has object fields: a pointer to a
// struct and a map, whose keys a pass may remove.
type nestedStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            struct {
		Database *struct {
			Endpoint string `json:"endpoint,omitempty"`
			Error    string `json:"error,omitempty"`
		} `json:"database,omitempty"`
		Replicas map[string]int32 `json:"replicas,omitempty"`
		Summary  struct {
			Ready   bool   `json:"ready,omitempty"`
			Message string `json:"message,omitempty"`
		} `json:"summary"`
	} `json:"status"`
}

func (n *nestedStatus) DeepCopyObject() runtime.Object {
	b, err := json.Marshal(n)
	if err != nil {
		panic(err)
	}
	out := &nestedStatus{}
	if err := json.Unmarshal(b, out); err != nil {
		panic(err)
	}
	return out
}

// TestStatusPatchClearsNestedFields: a key an object field of the status
// lost is sent as null, as controller-runtime's merge patch does, or the
// server would keep it.
func TestStatusPatchClearsNestedFields(t *testing.T) {
	orig := &nestedStatus{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", ResourceVersion: "9"}}
	orig.Status.Database = &struct {
		Endpoint string `json:"endpoint,omitempty"`
		Error    string `json:"error,omitempty"`
	}{Endpoint: "db:5432", Error: "connection refused"}
	orig.Status.Replicas = map[string]int32{"web": 2, "worker": 1}
	orig.Status.Summary.Ready, orig.Status.Summary.Message = false, "waiting"
	for name, change := range map[string]func(*nestedStatus){
		"a struct's field cleared": func(n *nestedStatus) { n.Status.Database.Error = "" },
		"a map's key removed":      func(n *nestedStatus) { delete(n.Status.Replicas, "worker") },
		"a pointer cleared":        func(n *nestedStatus) { n.Status.Database = nil },
		"a value struct's field":   func(n *nestedStatus) { n.Status.Summary.Ready, n.Status.Summary.Message = true, "" },
		"a map emptied":            func(n *nestedStatus) { n.Status.Replicas = nil },
		"a struct's field changed": func(n *nestedStatus) { n.Status.Database.Endpoint = "db2:5432" },
	} {
		t.Run(name, func(t *testing.T) {
			obj := orig.DeepCopyObject().(*nestedStatus)
			change(obj)
			got, err := statusPatch{base: orig}.Data(obj)
			require.NoError(t, err)
			full, err := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}).Data(obj)
			require.NoError(t, err)
			var want, have map[string]any
			require.NoError(t, json.Unmarshal(full, &want))
			require.NoError(t, json.Unmarshal(got, &have))
			assert.Equal(t, want["status"], have["status"], "patch: %s", got)
		})
	}
}

// TestStatusPatchIsMergeFromsStatus: the status write's patch is the
// status part of controller-runtime's optimistic-lock merge patch, with
// its resourceVersion precondition, and nothing of metadata or spec: for
// fields changed, and for fields cleared (null).
func TestStatusPatchIsMergeFromsStatus(t *testing.T) {
	changed := func() (*testv1.Widget, *testv1.Widget) { return widgetPair() }
	cleared := func() (*testv1.Widget, *testv1.Widget) {
		orig, obj := widgetPair()
		obj.Status.Note, obj.Status.Conditions = "", nil
		return orig, obj
	}
	for name, pair := range map[string]func() (*testv1.Widget, *testv1.Widget){"changed": changed, "cleared": cleared} {
		t.Run(name, func(t *testing.T) {
			orig, obj := pair()
			got, err := statusPatch{base: orig}.Data(obj)
			require.NoError(t, err)
			full, err := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}).Data(obj)
			require.NoError(t, err)
			var want, have map[string]any
			require.NoError(t, json.Unmarshal(full, &want))
			require.NoError(t, json.Unmarshal(got, &have))
			assert.Equal(t, map[string]any{"resourceVersion": "41"}, have["metadata"])
			assert.Equal(t, want["status"], have["status"], "patch: %s", got)
			assert.Len(t, have, 2, "only metadata.resourceVersion and status: %s", got)
		})
	}
	orig, obj := widgetPair()
	assert.Equal(t, types.MergePatchType, statusPatch{base: orig}.Type())
	orig.ResourceVersion = ""
	_, err := statusPatch{base: orig}.Data(obj)
	assert.ErrorContains(t, err, "no resourceVersion")
}

// BenchmarkStatusPatchData is the status write's patch; against
// BenchmarkMergeFromData, controller-runtime's merge patch it replaced.
func BenchmarkStatusPatchData(b *testing.B) {
	orig, obj := widgetPair()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (statusPatch{base: orig}).Data(obj); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMergeFromData(b *testing.B) {
	orig, obj := widgetPair()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}).Data(obj); err != nil {
			b.Fatal(err)
		}
	}
}
