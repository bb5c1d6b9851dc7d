package reconciler

import (
	"fmt"
	"runtime"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ownedPair is a WebApp's Deployment and Service as the API server sends
// them to a watch, encoded (protobuf, as controller-runtime reads built-in
// kinds).
func ownedPair(t testing.TB, i int) (deployment, service []byte) {
	name := fmt.Sprintf("web-%05d", i)
	labels := map[string]string{
		"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name,
		"app.kubernetes.io/managed-by": "webapp-operator", "app.kubernetes.io/part-of": "webapps",
	}
	selector := map[string]string{"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name}
	meta := metav1.ObjectMeta{
		Name: name, Namespace: "team-a", UID: "4f6b2c1e-8d1a-4c1b-9a52-7e3f0c2d1b0a", ResourceVersion: "123456",
		Labels:          labels,
		Annotations:     map[string]string{"ownership.reconcilekit.io/config-hash": "0123456789abcdef0123456789abcdef"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.example.com/v1", Kind: "WebApp", Name: name, UID: "9c1d2e3f-4a5b-4c6d-8e7f-0a1b2c3d4e5f", Controller: new(true)}},
	}
	d := appsv1.Deployment{ObjectMeta: *meta.DeepCopy(), Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: selector},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example.com/web:v1"}}}},
	}}
	d.Annotations["deployment.kubernetes.io/revision"] = "1"
	s := corev1.Service{ObjectMeta: *meta.DeepCopy(), Spec: corev1.ServiceSpec{Selector: selector,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	var err error
	deployment, err = d.Marshal()
	require.NoError(t, err)
	service, err = s.Marshal()
	require.NoError(t, err)
	return deployment, service
}

func TestInternObjectSharesStrings(t *testing.T) {
	var in interner
	dep, svc := ownedPair(t, 1)
	var objs []any
	for range 2 {
		d, s := &appsv1.Deployment{}, &corev1.Service{}
		require.NoError(t, d.Unmarshal(dep))
		require.NoError(t, s.Unmarshal(svc))
		want := d.DeepCopy()
		in.internObject(d)
		in.internObject(s)
		assert.Equal(t, want, d, "interning changes no value")
		objs = append(objs, d, s)
	}
	d1, s1, d2 := objs[0].(*appsv1.Deployment), objs[1].(*corev1.Service), objs[2].(*appsv1.Deployment)
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for k, v := range d2.Labels {
		for k1, v1 := range d1.Labels {
			if k1 == k {
				assert.True(t, same(k, k1) && same(v, v1), "label %s is held once", k)
			}
		}
	}
	assert.True(t, same(d1.Namespace, d2.Namespace))
	assert.True(t, same(d1.Namespace, s1.Namespace))
	assert.True(t, same(d1.OwnerReferences[0].Kind, s1.OwnerReferences[0].Kind))
	assert.True(t, same(d1.Spec.Template.Labels["app.kubernetes.io/name"], s1.Spec.Selector["app.kubernetes.io/name"]))
}

func TestInternObjectUnstructured(t *testing.T) {
	var in interner
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "a", "namespace": "team-a", "labels": map[string]any{"k": "v"}},
		"data":     map[string]any{"x": "y"},
	}}
	want := u.DeepCopy()
	in.internObject(u)
	assert.Equal(t, want, u, "interning changes no value, and adds no empty field")
	_, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations")
	assert.False(t, found)
}

func TestInternerBounds(t *testing.T) {
	var in interner
	long := string(make([]byte, internMaxLen+1))
	assert.Equal(t, long, in.of(long))
	for i := range internMaxStrings + 10 {
		in.of(fmt.Sprint(i))
	}
	assert.EqualValues(t, internMaxStrings, in.n.Load(), "at most internMaxStrings are kept")
	a, b := fmt.Sprint(internMaxStrings+5), fmt.Sprint(internMaxStrings+5)
	assert.NotSame(t, unsafe.StringData(in.of(a)), unsafe.StringData(in.of(b)), "past the bound, strings are not interned")
}

// BenchmarkInternedCache reports the heap that 1,000 decoded Deployment and
// Service pairs hold (B/pair), as a watch decodes them, without and with
// the interning CacheOptions adds.
func BenchmarkInternedCache(b *testing.B) {
	const n = 1000
	encoded := make([][2][]byte, n)
	for i := range encoded {
		encoded[i][0], encoded[i][1] = ownedPair(b, i)
	}
	for _, interned := range []bool{false, true} {
		b.Run(fmt.Sprintf("interned=%v", interned), func(b *testing.B) {
			var perPair float64
			for b.Loop() {
				var in interner
				held := make([]any, 0, 2*n)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for _, e := range encoded {
					d, s := &appsv1.Deployment{}, &corev1.Service{}
					if err := d.Unmarshal(e[0]); err != nil {
						b.Fatal(err)
					}
					if err := s.Unmarshal(e[1]); err != nil {
						b.Fatal(err)
					}
					if interned {
						in.internObject(d)
						in.internObject(s)
					}
					held = append(held, d, s)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perPair = float64(after.HeapAlloc-before.HeapAlloc) / n
				runtime.KeepAlive(held)
				runtime.KeepAlive(&in)
			}
			b.ReportMetric(perPair, "B/pair")
		})
	}
}

// BenchmarkInternTransform is the CPU the interning costs a watch event of
// a Deployment.
func BenchmarkInternTransform(b *testing.B) {
	dep, _ := ownedPair(b, 1)
	var in interner
	d := &appsv1.Deployment{}
	for b.Loop() {
		b.StopTimer()
		*d = appsv1.Deployment{}
		if err := d.Unmarshal(dep); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		in.internObject(d)
	}
}
