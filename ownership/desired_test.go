package ownership

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	gadgetac "github.com/reconcilekit/reconcilekit/internal/testapi/v1/applyconfiguration/testapi/v1"
)

var deploymentGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")

// mustConfig is desired's configuration as Apply applies it, without the
// controller reference.
func mustConfig(t *testing.T, desired runtime.ApplyConfiguration, ignore ...string) map[string]any {
	t.Helper()
	paths, err := parseIgnore(ignore)
	require.NoError(t, err)
	c, _, err := configOf(desired)
	require.NoError(t, err)
	require.NoError(t, finish(c, paths))
	return c
}

func hashOf(c map[string]any) string {
	return c["metadata"].(map[string]any)["annotations"].(map[string]any)[ConfigHashAnnotation].(string)
}

func TestConfigOfNormalizes(t *testing.T) {
	// As if desired were extracted from a live object.
	d := testDeployment().
		WithUID("u").WithResourceVersion("7").WithGeneration(3).
		WithCreationTimestamp(metav1.Now()).
		WithAnnotations(map[string]string{ConfigHashAnnotation: "stale", "keep": "me"}).
		WithStatus(appsv1ac.DeploymentStatus().WithReplicas(2))
	before, err := json.Marshal(d)
	require.NoError(t, err)

	c, gvk, err := configOf(d)
	require.NoError(t, err)
	assert.Equal(t, deploymentGVK, gvk)
	assert.Equal(t, "apps/v1", c["apiVersion"])
	assert.Equal(t, "Deployment", c["kind"])
	assert.NotContains(t, c, "status")
	md := c["metadata"].(map[string]any)
	for _, f := range serverMetadata {
		assert.NotContains(t, md, f)
	}
	assert.Equal(t, map[string]any{"keep": "me"}, md["annotations"], "the old hash is not part of the configuration")
	assert.Equal(t, int64(2), c["spec"].(map[string]any)["replicas"], "integers as int64, as in live objects")

	require.NoError(t, finish(c, nil))
	assert.NotEqual(t, "stale", hashOf(c))
	assert.Len(t, hashOf(c), 32)

	after, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after), "desired is not changed")
}

func TestConfigOfDropsOnlyHashAnnotation(t *testing.T) {
	c, _, err := configOf(corev1ac.ConfigMap("cm", "").WithAnnotations(map[string]string{ConfigHashAnnotation: "x"}))
	require.NoError(t, err)
	assert.NotContains(t, c["metadata"], "annotations", "no empty annotations left behind")
	assert.Equal(t, "", c["metadata"].(map[string]any)["namespace"], "an empty namespace is left for Apply to default")
}

// Apply configurations implement runtime.ApplyConfiguration on the value
// too: one passed by value is applied like a pointer to it.
func TestConfigOfAcceptsValue(t *testing.T) {
	byValue, gvk, err := configOf(*testDeployment())
	require.NoError(t, err)
	assert.Equal(t, deploymentGVK, gvk)
	byPointer, _, err := configOf(testDeployment())
	require.NoError(t, err)
	assert.Equal(t, byPointer, byValue)
}

func TestConfigOfRefuses(t *testing.T) {
	var nilDeployment *appsv1ac.DeploymentApplyConfiguration
	tests := []struct {
		name    string
		desired runtime.ApplyConfiguration
		wantErr []string
	}{
		{"nil", nil, []string{"nil"}},
		{"typed nil", nilDeployment, []string{"nil"}},
		{"no apiVersion", &corev1ac.ConfigMapApplyConfiguration{
			TypeMetaApplyConfiguration: metav1ac.TypeMetaApplyConfiguration{Kind: new("ConfigMap")}},
			[]string{"apiVersion", "constructor"}},
		{"no kind", &corev1ac.ConfigMapApplyConfiguration{
			TypeMetaApplyConfiguration: metav1ac.TypeMetaApplyConfiguration{APIVersion: new("v1")}},
			[]string{"kind", "constructor"}},
		{"bad apiVersion", client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "a/b/c", "kind": "ConfigMap"}}), []string{"apiVersion", "a/b/c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := configOf(tt.desired)
			require.Error(t, err)
			for _, s := range tt.wantErr {
				assert.ErrorContains(t, err, s)
			}
		})
	}
}

func TestConfigHash(t *testing.T) {
	base := hashOf(mustConfig(t, testDeployment()))
	assert.Equal(t, base, hashOf(mustConfig(t, testDeployment())), "same desired, same hash")

	reused := testDeployment().WithResourceVersion("9").
		WithStatus(appsv1ac.DeploymentStatus().WithReplicas(3)).
		WithAnnotations(map[string]string{ConfigHashAnnotation: base})
	assert.Equal(t, base, hashOf(mustConfig(t, reused)), "server fields and the old hash do not count")

	tests := map[string]func(d *appsv1ac.DeploymentApplyConfiguration){
		"label removed": func(d *appsv1ac.DeploymentApplyConfiguration) { d.Labels = nil },
		"port removed":  func(d *appsv1ac.DeploymentApplyConfiguration) { d.Spec.Template.Spec.Containers[0].Ports = nil },
		"image changed": func(d *appsv1ac.DeploymentApplyConfiguration) { d.Spec.Template.Spec.Containers[0].WithImage("x") },
		"replicas 0 set": func(d *appsv1ac.DeploymentApplyConfiguration) {
			d.Spec.WithReplicas(0)
		},
	}
	for name, edit := range tests {
		d := testDeployment()
		edit(d)
		assert.NotEqual(t, base, hashOf(mustConfig(t, d)), name)
	}
	assert.NotEqual(t, base, hashOf(mustConfig(t, testDeployment(), "spec.replicas")), "ignore list is part of the config")
}

func TestConfigIgnoreFields(t *testing.T) {
	d := testDeployment().WithAnnotations(map[string]string{"example.com/paused": "true", "other": "x"})
	c := mustConfig(t, d, "spec.replicas", "spec.template.spec.containers.resources",
		"metadata.annotations[example.com/paused]")

	spec := c["spec"].(map[string]any)
	assert.NotContains(t, spec, "replicas")
	assert.Contains(t, spec, "selector")
	ctr := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	assert.NotContains(t, ctr, "resources")
	assert.Equal(t, "nginx:1.27", ctr["image"])
	ann := c["metadata"].(map[string]any)["annotations"].(map[string]any)
	assert.NotContains(t, ann, "example.com/paused")
	assert.Equal(t, "x", ann["other"])
}

func TestConfigSecretStringData(t *testing.T) {
	s := corev1ac.Secret("s", "").
		WithData(map[string][]byte{"a": []byte("from-data"), "b": []byte("b")}).
		WithStringData(map[string]string{"a": "from-stringData", "c": "c"})
	c := mustConfig(t, s)
	assert.NotContains(t, c, "stringData")
	// stringData wins over data, as on the server.
	assert.Equal(t, map[string]any{"a": "ZnJvbS1zdHJpbmdEYXRh", "b": "Yg==", "c": "Yw=="}, c["data"])
}

func TestConfigDoesNotMutateUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "resourceVersion": "3", "labels": nil},
		"data":     map[string]any{"k": "v"},
	}}
	before := u.DeepCopy()
	c := mustConfig(t, client.ApplyConfigurationFromUnstructured(u), "data.k")
	assert.Equal(t, before, u)
	assert.Equal(t, "v1", c["apiVersion"])
	assert.Equal(t, map[string]any{}, c["data"])
	assert.NotContains(t, c["metadata"], "labels", "nil values are pruned")
	assert.NotContains(t, c["metadata"], "resourceVersion")
}

// An apply configuration holds exactly the fields the caller set; a typed
// object converted to one brings back every zero value its type cannot
// omit, which Apply would then send and own.
func TestConfigOfSendsOnlySetFields(t *testing.T) {
	ac := gadgetac.Gadget("g", "ns").WithSpec(gadgetac.GadgetSpec().
		WithTags("a").
		WithPorts(gadgetac.GadgetPort().WithPort(80)))
	c := mustConfig(t, ac)
	assert.Equal(t, map[string]any{
		"tags":  []any{"a"},
		"ports": []any{map[string]any{"port": int64(80)}},
	}, c["spec"], "no enabled, no replicas, no protocol")

	typed := &testv1.Gadget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "test.reconcilekit.io/v1", Kind: "Gadget"},
		ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns"},
		Spec:       testv1.GadgetSpec{Tags: []string{"a"}, Ports: []testv1.GadgetPort{{Port: 80}}},
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	require.NoError(t, err)
	fromTyped := mustConfig(t, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}))
	spec := fromTyped["spec"].(map[string]any)
	assert.Equal(t, false, spec["enabled"], "the typed Gadget sends enabled: false")
	assert.Equal(t, int64(0), spec["replicas"], "and replicas: 0")

	// Built-in apply configurations likewise leave unset structs out.
	svc := mustConfig(t, corev1ac.Service("web", "").WithSpec(corev1ac.ServiceSpec().
		WithPorts(corev1ac.ServicePort().WithName("http").WithPort(80))))
	assert.Equal(t, []any{map[string]any{"name": "http", "port": int64(80)}}, svc["spec"].(map[string]any)["ports"],
		"no targetPort, no protocol")
	d := mustConfig(t, testDeployment())
	assert.NotContains(t, d["spec"], "strategy")
	ctr := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"cpu": "500m"}, ctr["resources"].(map[string]any)["limits"],
		"a resource.Quantity is sent in canonical form")
}

func TestSetControllerRef(t *testing.T) {
	ours := metav1.OwnerReference{APIVersion: "test.reconcilekit.io/v1", Kind: "Widget", Name: "mine", UID: "u-1",
		Controller: new(true), BlockOwnerDeletion: new(true)}
	key := client.ObjectKey{Namespace: "ns", Name: "cm"}
	want := map[string]any{"apiVersion": "test.reconcilekit.io/v1", "kind": "Widget", "name": "mine", "uid": "u-1",
		"controller": true, "blockOwnerDeletion": true}

	t.Run("added, other references kept", func(t *testing.T) {
		other := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u-9"}
		md := map[string]any{"ownerReferences": []any{other}}
		require.NoError(t, setControllerRef(md, ours, "ConfigMap", key))
		assert.Equal(t, []any{other, want}, md["ownerReferences"])
	})
	t.Run("our own entry replaced", func(t *testing.T) {
		md := map[string]any{"ownerReferences": []any{map[string]any{"uid": "u-1", "name": "stale", "controller": false}}}
		require.NoError(t, setControllerRef(md, ours, "ConfigMap", key))
		assert.Equal(t, []any{want}, md["ownerReferences"])
	})
	t.Run("another controller in desired", func(t *testing.T) {
		md := map[string]any{"ownerReferences": []any{map[string]any{
			"apiVersion": "test.reconcilekit.io/v1", "kind": "Widget", "name": "theirs", "uid": "u-2", "controller": true}}}
		err := setControllerRef(md, ours, "ConfigMap", key)
		var fce *ForeignControllerError
		require.ErrorAs(t, err, &fce)
		assert.Equal(t, "theirs", fce.Controller.Name)
		assert.Equal(t, key, fce.Key)
	})
	t.Run("malformed entry", func(t *testing.T) {
		md := map[string]any{"ownerReferences": []any{"x"}}
		assert.ErrorContains(t, setControllerRef(md, ours, "ConfigMap", key), "metadata.ownerReferences")
	})
}

func TestParsePath(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "spec.replicas", want: []string{"spec", "replicas"}},
		{in: "metadata.annotations[example.com/x]", want: []string{"metadata", "annotations", "example.com/x"}},
		{in: "metadata.annotations[a.b].c", want: []string{"metadata", "annotations", "a.b", "c"}},
		{in: "[a.b]", want: []string{"a.b"}},
		{in: "", wantErr: "empty"},
		{in: "a..b", wantErr: "empty key"},
		{in: ".a", wantErr: "empty key"},
		{in: "a.", wantErr: "trailing"},
		{in: "a[b", wantErr: "unterminated"},
		{in: "a[]", wantErr: "empty key"},
		{in: "a[b]c", wantErr: "expected '.' or '['"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parsePath(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseIgnoreRefusesIdentity(t *testing.T) {
	for _, p := range []string{"metadata", "metadata.name", "metadata.namespace", "metadata.ownerReferences", "kind", "apiVersion"} {
		_, err := parseIgnore([]string{p})
		require.Error(t, err, p)
		assert.True(t, strings.Contains(err.Error(), p), err.Error())
	}
	_, err := parseIgnore([]string{"metadata.labels[app]"})
	assert.NoError(t, err)
}

func TestForeignControllerErrorNamesEverything(t *testing.T) {
	err := &ForeignControllerError{
		Kind:       "Deployment",
		Key:        client.ObjectKey{Namespace: "ns", Name: "web"},
		Owner:      metav1.OwnerReference{Kind: "Widget", Name: "mine", UID: "u-1"},
		Controller: metav1.OwnerReference{Kind: "Gadget", Name: "theirs", UID: "u-2"},
	}
	assert.Equal(t, `refusing to adopt Deployment ns/web for Widget "mine" (uid u-1): it is controlled by Gadget "theirs" (uid u-2)`, err.Error())
}
