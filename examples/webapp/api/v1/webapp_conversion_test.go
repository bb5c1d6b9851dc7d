package v1_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/randfill"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
)

// filler fills WebApps with random values: every field, metadata and status
// included, quantities from random milli-units in either format.
func filler(f *randfill.Filler) *randfill.Filler {
	return f.NilChance(0.3).NumElements(0, 3).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			format := resource.DecimalSI
			if c.Bool() {
				format = resource.BinarySI
			}
			*q = *resource.NewMilliQuantity(c.Int63n(1<<40), format)
		},
		// What JSON keeps of a time: whole seconds.
		func(t *metav1.Time, c randfill.Continue) {
			*t = metav1.Unix(c.Int63n(1<<32), 0)
		},
		// managedFields hold JSON.
		func(f *metav1.FieldsV1, c randfill.Continue) {
			f.SetRawBytes([]byte(`{"f:spec":{"f:image":{}}}`))
		},
	)
}

// normalize clears what the wire does not tell apart: TypeMeta (set by
// whoever serializes), and nil versus empty annotations (both omitted).
func normalize(o metav1.Object, tm *metav1.TypeMeta) {
	*tm = metav1.TypeMeta{}
	if len(o.GetAnnotations()) == 0 {
		o.SetAnnotations(nil)
	}
}

// equal compares semantically (quantities by value, nil and empty maps and
// slices alike, as the apiserver's JSON does).
func equal(t *testing.T, want, got any, what string) bool {
	t.Helper()
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("%s changed the object:\n%s", what, diff.Diff(want, got))
		return false
	}
	return true
}

// roundTripV1 converts v1 → v2 → v1.
func roundTripV1(t *testing.T, in *webappv1.WebApp) *webappv1.WebApp {
	t.Helper()
	hub := &webappv2.WebApp{}
	require.NoError(t, in.DeepCopy().ConvertTo(hub))
	out := &webappv1.WebApp{}
	require.NoError(t, out.ConvertFrom(hub))
	normalize(out, &out.TypeMeta)
	return out
}

// roundTripV2 converts v2 → v1 → v2, through JSON in the middle as the
// apiserver stores and serves the v1 form.
func roundTripV2(t *testing.T, in *webappv2.WebApp) (*webappv1.WebApp, *webappv2.WebApp) {
	t.Helper()
	spoke := &webappv1.WebApp{}
	require.NoError(t, spoke.ConvertFrom(in.DeepCopy()))
	b, err := json.Marshal(spoke)
	require.NoError(t, err)
	wire := &webappv1.WebApp{}
	require.NoError(t, json.Unmarshal(b, wire))
	out := &webappv2.WebApp{}
	require.NoError(t, wire.ConvertTo(out))
	normalize(out, &out.TypeMeta)
	return spoke, out
}

// TestRoundTripFuzz: v1 → v2 → v1 keeps every v1 field, and v2 → v1 → v2
// keeps every v2 field, including the resources v1 cannot express, for
// 2000 random objects of each version (fixed seeds: a failure reproduces).
func TestRoundTripFuzz(t *testing.T) {
	fv1 := filler(randfill.NewWithSeed(1))
	for i := range 2000 {
		in := &webappv1.WebApp{}
		fv1.Fill(in)
		normalize(in, &in.TypeMeta)
		if !equal(t, in, roundTripV1(t, in), "v1 → v2 → v1") {
			t.Fatalf("object %d", i)
		}
	}
	fv2 := filler(randfill.NewWithSeed(2))
	lossy := 0
	for i := range 2000 {
		in := &webappv2.WebApp{}
		fv2.Fill(in)
		normalize(in, &in.TypeMeta)
		spoke, out := roundTripV2(t, in)
		if _, ok := spoke.Annotations[webappv1.ResourcesAnnotation]; ok {
			lossy++
		}
		if !equal(t, in, out, "v2 → v1 → v2") {
			t.Fatalf("object %d", i)
		}
	}
	// The fuzzer must reach the case the annotation exists for, or the
	// second loop proves nothing about it.
	assert.Greater(t, lossy, 500, "objects whose v2 resources v1 cannot express")
}

// FuzzRoundTrip is TestRoundTripFuzz driven by Go's fuzzer:
// go test -fuzz FuzzRoundTrip ./webapp/api/v1.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte("seed"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fill := filler(randfill.NewFromGoFuzz(data))
		v1 := &webappv1.WebApp{}
		fill.Fill(v1)
		normalize(v1, &v1.TypeMeta)
		equal(t, v1, roundTripV1(t, v1), "v1 → v2 → v1")
		v2 := &webappv2.WebApp{}
		fill.Fill(v2)
		normalize(v2, &v2.TypeMeta)
		_, out := roundTripV2(t, v2)
		equal(t, v2, out, "v2 → v1 → v2")
	})
}

func q(s string) *resource.Quantity { return new(resource.MustParse(s)) }

// TestConversionMapping pins the mapping itself, which round trips alone
// cannot (a conversion that swapped requests and limits both ways would
// round-trip too).
func TestConversionMapping(t *testing.T) {
	v1 := &webappv1.WebApp{Spec: webappv1.WebAppSpec{Image: "web:1", DBRef: new("orders-db"),
		Resources: &webappv1.ContainerResources{CPU: q("250m"), Memory: q("64Mi")}}}
	v2 := &webappv2.WebApp{}
	require.NoError(t, v1.ConvertTo(v2))
	require.NotNil(t, v2.Spec.Database)
	assert.Equal(t, "orders-db", v2.Spec.Database.ServiceName)
	require.NotNil(t, v2.Spec.Resources)
	for _, r := range []*webappv2.ContainerResources{v2.Spec.Resources.Requests, v2.Spec.Resources.Limits} {
		assert.Equal(t, "250m", r.CPU.String(), "v1's amounts are both the requests and the limits")
		assert.Equal(t, "64Mi", r.Memory.String())
	}

	// Limits above the requests: v1 shows the requests, the annotation the
	// whole v2 value.
	v2.Spec.Resources.Limits = &webappv2.ContainerResources{CPU: q("1"), Memory: q("1Gi")}
	back := &webappv1.WebApp{}
	require.NoError(t, back.ConvertFrom(v2))
	assert.Equal(t, "250m", back.Spec.Resources.CPU.String())
	assert.Equal(t, "64Mi", back.Spec.Resources.Memory.String())
	assert.JSONEq(t, `{"requests":{"cpu":"250m","memory":"64Mi"},"limits":{"cpu":"1","memory":"1Gi"}}`,
		back.Annotations[webappv1.ResourcesAnnotation])

	// A v1 client changes resources: its value wins over the annotation,
	// which is dropped.
	back.Spec.Resources.CPU = q("500m")
	again := &webappv2.WebApp{}
	require.NoError(t, back.ConvertTo(again))
	assert.Equal(t, "500m", again.Spec.Resources.Limits.CPU.String())
	assert.Equal(t, "500m", again.Spec.Resources.Requests.CPU.String())
	assert.NotContains(t, again.Annotations, webappv1.ResourcesAnnotation)

	// A v1 client changes something else: the v2 limits survive.
	back.Spec.Resources.CPU = q("250m")
	back.Spec.Image = "web:2"
	again = &webappv2.WebApp{}
	require.NoError(t, back.ConvertTo(again))
	assert.Equal(t, "web:2", again.Spec.Image)
	assert.Equal(t, "1", again.Spec.Resources.Limits.CPU.String())
	assert.Empty(t, again.Annotations, "the annotation never shows in v2")

	// Equal requests and limits need no annotation.
	plain := &webappv1.WebApp{}
	require.NoError(t, plain.ConvertFrom(v2Of(t, v1)))
	assert.Empty(t, plain.Annotations)
}

func v2Of(t *testing.T, v1 *webappv1.WebApp) *webappv2.WebApp {
	t.Helper()
	out := &webappv2.WebApp{}
	require.NoError(t, v1.DeepCopy().ConvertTo(out))
	return out
}

// TestZeroCountsSurviveConversion: status.replicas and status.readyReplicas
// of a WebApp scaled to nothing ready are 0 on the wire in both versions, not
// absent (which a client cannot tell from "not reported yet").
func TestZeroCountsSurviveConversion(t *testing.T) {
	in := &webappv2.WebApp{Status: webappv2.WebAppStatus{Replicas: new(int32(2)), ReadyReplicas: new(int32(0))}}
	spoke, out := roundTripV2(t, in)
	b, err := json.Marshal(spoke)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"readyReplicas":0`, "v1 keeps the 0")
	require.NotNil(t, out.Status.ReadyReplicas, "v2 keeps the 0")
	assert.Equal(t, int32(0), *out.Status.ReadyReplicas)
}
