package reconciler

import (
	"encoding/json"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ownedDeployment and ownedService are a WebApp's Deployment and Service
// as the API server returned them in the bench (docs/performance.md), with
// managedFields stripped and the WebApp's name NAME.
const (
	ownedDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"annotations":{"deployment.kubernetes.io/revision":"2","ownership.reconcilekit.io/config-hash":"0b20a916fa85592bcc6b9c4a39208be5"},"creationTimestamp":"2026-12-06T11:42:06Z","generation":2,"labels":{"app.kubernetes.io/instance":"NAME","app.kubernetes.io/managed-by":"webapp-operator","app.kubernetes.io/name":"webapp"},"name":"NAME","namespace":"bench-reconcilekit","ownerReferences":[{"apiVersion":"apps.example.com/v2","blockOwnerDeletion":true,"controller":true,"kind":"WebApp","name":"NAME","uid":"07f3155d-341c-4544-95fd-61f278ab2666"}],"resourceVersion":"29242","uid":"00043ec5-ed49-4133-a329-1abbe9bf19ce"},"spec":{"progressDeadlineSeconds":600,"replicas":1,"revisionHistoryLimit":10,"selector":{"matchLabels":{"app.kubernetes.io/instance":"NAME","app.kubernetes.io/name":"webapp"}},"strategy":{"rollingUpdate":{"maxSurge":"25%","maxUnavailable":"25%"},"type":"RollingUpdate"},"template":{"metadata":{"labels":{"app.kubernetes.io/instance":"NAME","app.kubernetes.io/managed-by":"webapp-operator","app.kubernetes.io/name":"webapp"}},"spec":{"containers":[{"image":"registry.example.com/web:v2","imagePullPolicy":"IfNotPresent","name":"web","ports":[{"containerPort":8080,"name":"http","protocol":"TCP"}],"resources":{"limits":{"cpu":"500m","memory":"256Mi"},"requests":{"cpu":"500m","memory":"256Mi"}},"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File"}],"dnsPolicy":"ClusterFirst","restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},"terminationGracePeriodSeconds":30}}},"status":{"availableReplicas":1,"conditions":[{"lastTransitionTime":"2026-12-06T11:42:07Z","lastUpdateTime":"2026-12-06T11:42:07Z","message":"Deployment has minimum availability.","reason":"MinimumReplicasAvailable","status":"True","type":"Available"},{"lastTransitionTime":"2026-12-06T11:42:06Z","lastUpdateTime":"2026-12-06T11:43:43Z","message":"ReplicaSet \"NAME-878b7b4cd\" has successfully progressed.","reason":"NewReplicaSetAvailable","status":"True","type":"Progressing"}],"observedGeneration":2,"readyReplicas":1,"replicas":1,"terminatingReplicas":0,"updatedReplicas":1}}`
	ownedService    = `{"apiVersion":"v1","kind":"Service","metadata":{"annotations":{"ownership.reconcilekit.io/config-hash":"99465ec454011fdd5b563bfcc26f88a8"},"creationTimestamp":"2026-12-06T11:42:06Z","labels":{"app.kubernetes.io/instance":"NAME","app.kubernetes.io/managed-by":"webapp-operator","app.kubernetes.io/name":"webapp"},"name":"NAME","namespace":"bench-reconcilekit","ownerReferences":[{"apiVersion":"apps.example.com/v2","blockOwnerDeletion":true,"controller":true,"kind":"WebApp","name":"NAME","uid":"07f3155d-341c-4544-95fd-61f278ab2666"}],"resourceVersion":"748","uid":"37b847ef-d444-43b2-95d0-19791ef1c5a3"},"spec":{"clusterIP":"10.0.168.84","clusterIPs":["10.0.168.84"],"internalTrafficPolicy":"Cluster","ipFamilies":["IPv4"],"ipFamilyPolicy":"SingleStack","ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":"http"}],"selector":{"app.kubernetes.io/instance":"NAME","app.kubernetes.io/name":"webapp"},"sessionAffinity":"None","type":"ClusterIP"},"status":{"loadBalancer":{}}}`
)

// ownedPair is the i-th WebApp's Deployment and Service as a watch
// receives them: encoded in protobuf, as controller-runtime reads
// built-in kinds.
func ownedPair(t testing.TB, i int) (deployment, service []byte) {
	name := fmt.Sprintf("app-%05d", i)
	var d appsv1.Deployment
	var s corev1.Service
	require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(ownedDeployment, "NAME", name)), &d))
	require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(ownedService, "NAME", name)), &s))
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
	assert.True(t, same(d1.Spec.Template.Spec.Containers[0].Image, d2.Spec.Template.Spec.Containers[0].Image))
	assert.True(t, same(d1.Status.Conditions[0].Reason, d2.Status.Conditions[0].Reason))
	assert.True(t, same(string(*s1.Spec.IPFamilyPolicy), string(*objs[3].(*corev1.Service).Spec.IPFamilyPolicy)))

	sameMap := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	assert.True(t, sameMap(d1.Spec.Template.Labels, d1.Labels), "a pod template labelled as its Deployment keeps one map")
	assert.False(t, sameMap(d1.Labels, d2.Labels), "label maps are not shared between objects")
	assert.True(t, sameMap(d1.Spec.Template.Spec.Containers[0].Resources.Limits, d2.Spec.Template.Spec.Containers[0].Resources.Limits),
		"equal resource lists are one map")
}

func TestInternResourcesByContentAndFormat(t *testing.T) {
	var in interner
	list := func(cpu string, memory resource.Quantity) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: memory}
	}
	canonical := in.resources(list("500m", resource.MustParse("256Mi")))
	sameMap := func(a, b any) bool { return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() }
	assert.True(t, sameMap(canonical, in.resources(list("500m", resource.MustParse("256Mi")))))
	assert.False(t, sameMap(canonical, in.resources(list("1", resource.MustParse("256Mi")))), "another value")
	decimal := *resource.NewQuantity(256<<20, resource.DecimalSI)
	assert.False(t, sameMap(canonical, in.resources(list("500m", decimal))), "the same value in another format prints otherwise")
	m := in.resources(list("500m", decimal))[corev1.ResourceMemory]
	assert.Equal(t, "268435456", m.String())
}

// conditioned is a custom resource's shape as conditions.Getter sees it.
type conditioned struct {
	metav1.ObjectMeta
	conds []metav1.Condition
}

func (c *conditioned) GetConditions() []metav1.Condition { return c.conds }

func TestInternConditions(t *testing.T) {
	var in interner
	var objs []*conditioned
	for range 2 {
		c := &conditioned{conds: []metav1.Condition{{Type: strings.Clone("Ready"), Status: metav1.ConditionStatus(strings.Clone("True")),
			Reason: strings.Clone("Available"), Message: strings.Clone("Deployment has minimum availability.")}}}
		in.internObject(c)
		objs = append(objs, c)
	}
	a, b := objs[0].conds[0], objs[1].conds[0]
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	assert.True(t, same(a.Type, b.Type) && same(a.Reason, b.Reason) && same(string(a.Status), string(b.Status)))
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
	assert.Equal(t, internMaxStrings, len(in.strings)+len(in.lists), "at most internMaxStrings are kept")
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
