package ownership_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	gadgetac "github.com/reconcilekit/reconcilekit/internal/testapi/v1/applyconfiguration/testapi/v1"
	"github.com/reconcilekit/reconcilekit/ownership"
)

const other = "other-controller"

// fieldsOwnedBy is the set of fields fieldManager owns in obj's main
// resource, whether it applied or updated them.
func fieldsOwnedBy(t *testing.T, obj client.Object, fieldManager string) *fieldpath.Set {
	t.Helper()
	s := &fieldpath.Set{}
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager != fieldManager || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		one := &fieldpath.Set{}
		require.NoError(t, one.FromJSON(mf.FieldsV1.GetRawReader()))
		s = s.Union(one)
	}
	return s
}

func gadgetKey(f *fixture) client.ObjectKey { return client.ObjectKey{Namespace: f.ns, Name: "g"} }

// A field an apply configuration leaves unset is not sent, so it stays
// another manager's, even where the Go type cannot omit its zero value.
func TestApplyLeavesUnsetZeroValuesToOthers(t *testing.T) {
	f := setup(t)
	desired := func(tags ...string) *gadgetac.GadgetApplyConfiguration {
		return gadget(gadgetac.GadgetSpec().WithTags(tags...).WithPorts(gadgetac.GadgetPort().WithPort(80)))
	}
	require.Equal(t, ownership.Created, f.apply(t, desired("a")))

	live := &testv1.Gadget{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: f.ns}}
	f.editAs(t, other, live, func() { live.Spec.Enabled, live.Spec.Replicas = true, 3 })
	f.waitForCache(t, live)
	// Their fields are not drift: we do not set them.
	f.requireUnchanged(t, desired("a"))

	// Our next write leaves them alone.
	f.c.Reset()
	require.Equal(t, ownership.Updated, f.apply(t, desired("a", "b")))
	assert.Equal(t, 1, f.c.Mutations(), "%v", f.c.MutatingRequests())
	got := &testv1.Gadget{}
	require.NoError(t, env.Client.Get(f.ctx, gadgetKey(f), got))
	assert.True(t, got.Spec.Enabled)
	assert.Equal(t, int32(3), got.Spec.Replicas)
	assert.Equal(t, []string{"a", "b"}, got.Spec.Tags)

	enabled, replicas := fieldpath.MakePathOrDie("spec", "enabled"), fieldpath.MakePathOrDie("spec", "replicas")
	ours := fieldsOwnedBy(t, got, manager)
	assert.True(t, ours.Has(fieldpath.MakePathOrDie("spec", "tags", value.NewValueInterface("b"))), "we own our tags: %v", ours)
	assert.False(t, ours.Has(enabled), "we do not own spec.enabled: %v", ours)
	assert.False(t, ours.Has(replicas), "we do not own spec.replicas: %v", ours)
	theirs := fieldsOwnedBy(t, got, other)
	assert.True(t, theirs.Has(enabled), "%v", theirs)
	assert.True(t, theirs.Has(replicas), "%v", theirs)
	f.requireUnchanged(t, desired("a", "b"))

	// The contrast: the same Gadget built as a typed object and converted
	// to an apply configuration would send (and own) enabled: false and
	// replicas: 0.
	typed := &testv1.Gadget{
		TypeMeta:   metav1.TypeMeta{APIVersion: testv1.GroupVersion.String(), Kind: "Gadget"},
		ObjectMeta: metav1.ObjectMeta{Name: "g"},
		Spec:       testv1.GadgetSpec{Tags: []string{"a", "b"}, Ports: []testv1.GadgetPort{{Port: 80}}},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	require.NoError(t, err)
	sent, err := json.Marshal(client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}))
	require.NoError(t, err)
	var body struct{ Spec map[string]any }
	require.NoError(t, json.Unmarshal(sent, &body))
	assert.Equal(t, false, body.Spec["enabled"])
	assert.InDelta(t, 0, body.Spec["replicas"], 0)
	generated, err := json.Marshal(desired("a", "b"))
	require.NoError(t, err)
	assert.NotContains(t, string(generated), "enabled")
	assert.NotContains(t, string(generated), "replicas")
}

// A custom resource's lists are compared by the keys its CRD declares,
// read from the apiserver through Applier.Schemas.
func TestApplyCustomResourceListsBySchema(t *testing.T) {
	f := setup(t)
	desired := func(p int32) *gadgetac.GadgetApplyConfiguration {
		// protocol left to the CRD's default (TCP)
		return gadget(gadgetac.GadgetSpec().WithPorts(gadgetac.GadgetPort().WithPort(p)).WithTags("ours"))
	}
	require.Equal(t, ownership.Created, f.apply(t, desired(80)))
	f.requireUnchanged(t, desired(80))

	// Another manager adds a port and a tag of its own with its own apply.
	require.NoError(t, env.Client.Apply(f.ctx, gadgetac.Gadget("g", f.ns).WithSpec(gadgetac.GadgetSpec().
		WithPorts(gadgetac.GadgetPort().WithPort(9090).WithProtocol("UDP")).
		WithTags("theirs")), client.FieldOwner(other)))
	got := &testv1.Gadget{}
	require.NoError(t, env.Client.Get(f.ctx, gadgetKey(f), got))
	require.Equal(t, []testv1.GadgetPort{{Port: 80, Protocol: "TCP"}, {Port: 9090, Protocol: "UDP"}}, got.Spec.Ports)
	require.ElementsMatch(t, []string{"ours", "theirs"}, got.Spec.Tags)

	// Their elements are not drift: ours is found by its keys, the
	// defaulted protocol included.
	f.requireUnchanged(t, desired(80))

	// A change to our port replaces ours and leaves theirs.
	f.c.Reset()
	require.Equal(t, ownership.Updated, f.apply(t, desired(8080)))
	assert.Equal(t, 1, f.c.Mutations(), "%v", f.c.MutatingRequests())
	require.NoError(t, env.Client.Get(f.ctx, gadgetKey(f), got))
	assert.ElementsMatch(t, []testv1.GadgetPort{{Port: 8080, Protocol: "TCP"}, {Port: 9090, Protocol: "UDP"}}, got.Spec.Ports)
	assert.ElementsMatch(t, []string{"ours", "theirs"}, got.Spec.Tags)
	f.requireUnchanged(t, desired(8080))
}

func TestApplyCustomResourceNeedsSchemas(t *testing.T) {
	f := setup(t)
	a := &ownership.Applier{Client: f.c, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager}
	f.c.Reset()
	_, err := a.Apply(f.ctx, f.owner, gadget(gadgetac.GadgetSpec().WithTags("a")))
	require.Error(t, err)
	assert.ErrorContains(t, err, "Applier.Schemas")
	assert.ErrorContains(t, err, "Gadget")
	assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
	assert.Empty(t, f.serverVersion(t, &testv1.Gadget{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: f.ns}}))
}

// The apiserver stores a built-in kind's quantities in canonical form;
// they are compared by value, so a desired "0.5" converges. (A
// resource.Quantity in a typed apply configuration is already sent in
// canonical form; an unstructured one is sent as written.)
func TestApplyQuantitiesConverge(t *testing.T) {
	f := setup(t)
	desired := func() runtime.ApplyConfiguration {
		labels := map[string]any{"app": "web"}
		return client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web"},
			"spec": map[string]any{
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{
					"metadata": map[string]any{"labels": labels},
					"spec": map[string]any{"containers": []any{map[string]any{
						"name": "app", "image": "nginx:1.27",
						"resources": map[string]any{
							"limits":   map[string]any{"cpu": "0.5", "memory": "1024Mi"},
							"requests": map[string]any{"cpu": "0.25", "memory": int64(512 << 20)},
						},
					}}},
				},
			},
		}})
	}
	require.Equal(t, ownership.Created, f.apply(t, desired()))

	// The premise: the server rewrote every one of them to a string that
	// differs from the one sent.
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	require.NoError(t, f.m.APIReader.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "web"}, stored))
	containers, _, err := unstructured.NestedSlice(stored.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.Len(t, containers, 1)
	res := containers[0].(map[string]any)["resources"]
	assert.Equal(t, map[string]any{
		"limits":   map[string]any{"cpu": "500m", "memory": "1Gi"},
		"requests": map[string]any{"cpu": "250m", "memory": "536870912"}, // sent as a number
	}, res)

	for range 2 {
		f.requireUnchanged(t, desired())
	}
}

// A custom resource is stored as sent, but Apply reads it through its Go
// type (the scheme knows Gadget), which rewrites a quantity "0.5" as
// "500m". A non-canonical quantity applied unstructured must still
// converge: compared as the typed read shows it, not re-applied forever.
func TestApplyCustomResourceQuantityReadTyped(t *testing.T) {
	f := setup(t)
	desired := func() runtime.ApplyConfiguration {
		return client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": testv1.GroupVersion.String(), "kind": "Gadget",
			"metadata": map[string]any{"name": "g"},
			"spec":     map[string]any{"size": "0.5", "tags": []any{"ours"}},
		}})
	}
	require.Equal(t, ownership.Created, f.apply(t, desired()))

	// The premise: stored as sent, read typed as canonical.
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(testv1.GroupVersion.WithKind("Gadget"))
	require.NoError(t, f.m.APIReader.Get(f.ctx, gadgetKey(f), stored))
	size, _, err := unstructured.NestedString(stored.Object, "spec", "size")
	require.NoError(t, err)
	require.Equal(t, "0.5", size)
	typed := &testv1.Gadget{}
	require.NoError(t, f.m.APIReader.Get(f.ctx, gadgetKey(f), typed))
	require.Equal(t, "500m", typed.Spec.Size.String())

	for range 2 {
		f.requireUnchanged(t, desired())
	}
	// A real change is still one write.
	f.c.Reset()
	changed := desired()
	require.NoError(t, unstructured.SetNestedField(changed.(runtime.Unstructured).UnstructuredContent(), "0.75", "spec", "size"))
	assert.Equal(t, ownership.Updated, f.apply(t, changed))
	assert.Equal(t, 1, f.c.Mutations(), "%v", f.c.MutatingRequests())
}
