package ownership

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var deploymentGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")

func mustConfig(t *testing.T, obj runtime.Object, gvk schema.GroupVersionKind, ignore ...string) map[string]any {
	t.Helper()
	paths, err := parseIgnore(ignore)
	require.NoError(t, err)
	c, err := buildConfig(obj, gvk, paths)
	require.NoError(t, err)
	return c
}

func hashOf(c map[string]any) string {
	return c["metadata"].(map[string]any)["annotations"].(map[string]any)[ConfigHashAnnotation].(string)
}

func TestBuildConfigNormalizes(t *testing.T) {
	d := testDeployment()
	// As if desired were reused from a live object.
	d.UID, d.ResourceVersion, d.Generation = "u", "7", 3
	d.CreationTimestamp = metav1.Now()
	d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	d.Status.Replicas = 2
	d.Annotations = map[string]string{ConfigHashAnnotation: "stale", "keep": "me"}

	c := mustConfig(t, d, deploymentGVK)

	assert.Equal(t, "apps/v1", c["apiVersion"])
	assert.Equal(t, "Deployment", c["kind"])
	assert.NotContains(t, c, "status")
	md := c["metadata"].(map[string]any)
	for _, f := range serverMetadata {
		assert.NotContains(t, md, f)
	}
	assert.Equal(t, "me", md["annotations"].(map[string]any)["keep"])
	assert.NotEqual(t, "stale", hashOf(c))
	assert.Len(t, hashOf(c), 32)
	// creationTimestamp: null in the pod template is pruned, not applied.
	tmd := c["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	assert.NotContains(t, tmd, "creationTimestamp")
}

func TestConfigHash(t *testing.T) {
	base := hashOf(mustConfig(t, testDeployment(), deploymentGVK))
	assert.Equal(t, base, hashOf(mustConfig(t, testDeployment(), deploymentGVK)), "same desired, same hash")

	reused := testDeployment()
	reused.ResourceVersion, reused.Status.Replicas = "9", 3
	reused.Annotations = map[string]string{ConfigHashAnnotation: base}
	assert.Equal(t, base, hashOf(mustConfig(t, reused, deploymentGVK)), "server fields and the old hash do not count")

	tests := map[string]func(d *appsv1.Deployment){
		"label removed": func(d *appsv1.Deployment) { d.Labels = nil },
		"port removed":  func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Ports = nil },
		"image changed": func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "x" },
	}
	for name, edit := range tests {
		d := testDeployment()
		edit(d)
		assert.NotEqual(t, base, hashOf(mustConfig(t, d, deploymentGVK)), name)
	}
	assert.NotEqual(t, base, hashOf(mustConfig(t, testDeployment(), deploymentGVK, "spec.replicas")), "ignore list is part of the config")
}

func TestBuildConfigIgnoreFields(t *testing.T) {
	d := testDeployment()
	d.Annotations = map[string]string{"example.com/paused": "true", "other": "x"}
	c := mustConfig(t, d, deploymentGVK, "spec.replicas", "spec.template.spec.containers.resources",
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

func TestBuildConfigSecretStringData(t *testing.T) {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Data:       map[string][]byte{"a": []byte("from-data"), "b": []byte("b")},
		StringData: map[string]string{"a": "from-stringData", "c": "c"},
	}
	c := mustConfig(t, s, corev1.SchemeGroupVersion.WithKind("Secret"))
	assert.NotContains(t, c, "stringData")
	// stringData wins over data, as on the server.
	assert.Equal(t, map[string]any{"a": "ZnJvbS1zdHJpbmdEYXRh", "b": "Yg==", "c": "Yw=="}, c["data"])
}

func TestBuildConfigDoesNotMutateUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "cm", "resourceVersion": "3"},
		"data":     map[string]any{"k": "v"},
	}}
	before := u.DeepCopy()
	c := mustConfig(t, u, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "data.k")
	assert.Equal(t, before, u)
	assert.Equal(t, "v1", c["apiVersion"])
	assert.Equal(t, map[string]any{}, c["data"])
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

func TestBuildConfigDropsUnsetStructs(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "http", Port: 80},
			{Name: "grpc", Port: 90, TargetPort: intstr.FromString("grpc")},
			{Name: "zero", Port: 91, TargetPort: intstr.FromInt32(0)}, // indistinguishable from unset
		}},
	}
	c := mustConfig(t, svc, corev1.SchemeGroupVersion.WithKind("Service"))
	ports := c["spec"].(map[string]any)["ports"].([]any)
	assert.Equal(t, map[string]any{"name": "http", "port": int64(80)}, ports[0], "unset targetPort is not applied")
	assert.Equal(t, "grpc", ports[1].(map[string]any)["targetPort"])
	assert.NotContains(t, ports[2], "targetPort")

	d := mustConfig(t, testDeployment(), deploymentGVK)
	spec := d["spec"].(map[string]any)
	assert.NotContains(t, spec, "strategy", "zero struct under omitempty")
	ctr := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"cpu": "500m"}, ctr["resources"].(map[string]any)["limits"], "non-zero struct kept")
}
