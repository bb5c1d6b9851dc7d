package ownership

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type m = map[string]any
type l = []any

func TestFirstDrift(t *testing.T) {
	tests := []struct {
		name          string
		desired, live m
		wantPath      string // "" means no drift
	}{
		{"empty desired", m{}, m{"a": "b"}, ""},
		{"equal scalars", m{"s": "x", "b": true, "i": int64(3)}, m{"s": "x", "b": true, "i": int64(3)}, ""},
		{"extra live keys are fine", m{"a": "1"}, m{"a": "1", "b": "2"}, ""},
		{"missing key", m{"a": "1"}, m{}, "a"},
		{"changed string", m{"a": "1"}, m{"a": "2"}, "a"},
		{"changed bool", m{"a": true}, m{"a": false}, "a"},
		{"string vs number", m{"a": "1"}, m{"a": int64(1)}, "a"},
		{"int64 vs float64 equal", m{"a": int64(2)}, m{"a": float64(2)}, ""},
		{"int vs int64 equal", m{"a": 2}, m{"a": int64(2)}, ""},
		{"int64 vs float64 different", m{"a": int64(2)}, m{"a": 2.5}, "a"},
		{"nil desired means unset", m{"a": nil}, m{}, ""},
		{"nil live value", m{"a": "x"}, m{"a": nil}, "a"},
		{"empty map desired, absent live", m{"resources": m{}}, m{}, ""},
		{"empty map desired, present live", m{"emptyDir": m{}}, m{"emptyDir": m{"medium": "Memory"}}, ""},
		{"empty list desired, absent live", m{"args": l{}}, m{}, ""},
		{"empty list desired, non-empty live", m{"args": l{}}, m{"args": l{"x"}}, "args"},
		{"map vs scalar", m{"a": m{"b": "c"}}, m{"a": "c"}, "a"},
		{"nested path", m{"metadata": m{"labels": m{"app": "web"}}}, m{"metadata": m{"labels": m{"app": "db", "team": "x"}}}, "metadata.labels.app"},
		{"scalar list equal", m{"args": l{"a", "b"}}, m{"args": l{"a", "b"}}, ""},
		{"scalar list reordered", m{"args": l{"a", "b"}}, m{"args": l{"b", "a"}}, "args[0]"},
		{"scalar list longer live", m{"args": l{"a"}}, m{"args": l{"a", "b"}}, "args"},
		{"unnamed maps positional with defaults", m{"ports": l{m{"port": int64(80)}}},
			m{"ports": l{m{"port": int64(80), "protocol": "TCP", "targetPort": int64(80)}}}, ""},
		{"unnamed maps different length", m{"ports": l{m{"port": int64(80)}}},
			m{"ports": l{m{"port": int64(80)}, m{"port": int64(81)}}}, "ports"},
		{"unnamed maps changed element", m{"ports": l{m{"port": int64(80)}, m{"port": int64(81)}}},
			m{"ports": l{m{"port": int64(80)}, m{"port": int64(82)}}}, "ports[1].port"},
		{"named elements matched by name regardless of order", m{"c": l{m{"name": "a", "v": "1"}, m{"name": "b", "v": "2"}}},
			m{"c": l{m{"name": "b", "v": "2"}, m{"name": "a", "v": "1", "d": "x"}}}, ""},
		{"named elements: extra live element (sidecar)", m{"c": l{m{"name": "a"}}},
			m{"c": l{m{"name": "a"}, m{"name": "istio-proxy"}}}, ""},
		{"named elements: missing element", m{"c": l{m{"name": "a"}, m{"name": "b"}}},
			m{"c": l{m{"name": "a"}}}, "c[name=b]"},
		{"named elements: changed field", m{"c": l{m{"name": "a", "image": "x:1"}}},
			m{"c": l{m{"name": "a", "image": "x:2"}}}, "c[name=a].image"},
		{"named elements: duplicate names, one matches", m{"vm": l{m{"name": "v", "mountPath": "/b"}}},
			m{"vm": l{m{"name": "v", "mountPath": "/a"}, m{"name": "v", "mountPath": "/b"}}}, ""},
		{"named elements: duplicate names, none matches", m{"vm": l{m{"name": "v", "mountPath": "/c"}}},
			m{"vm": l{m{"name": "v", "mountPath": "/a"}, m{"name": "v", "mountPath": "/b"}}}, "vm[name=v]"},
		{"list vs map", m{"a": l{"x"}}, m{"a": m{"x": "y"}}, "a"},
		{"quantity under limits: 500m == 0.5", m{"limits": m{"cpu": "500m"}}, m{"limits": m{"cpu": "0.5"}}, ""},
		{"quantity under requests: 1Gi == 1024Mi", m{"requests": m{"memory": "1Gi"}}, m{"requests": m{"memory": "1024Mi"}}, ""},
		{"quantity under requests: different", m{"requests": m{"cpu": "500m"}}, m{"requests": m{"cpu": "600m"}}, "requests.cpu"},
		{"quantity sizeLimit", m{"emptyDir": m{"sizeLimit": "1000Mi"}}, m{"emptyDir": m{"sizeLimit": "1000M"}}, "emptyDir.sizeLimit"},
		{"quantity sizeLimit equal", m{"emptyDir": m{"sizeLimit": "1000m"}}, m{"emptyDir": m{"sizeLimit": "1"}}, ""},
		{"quantity-like string elsewhere is compared exactly", m{"env": l{m{"name": "X", "value": "1"}}},
			m{"env": l{m{"name": "X", "value": "1.0"}}}, "env[name=X].value"},
		{"unparsable quantity", m{"limits": m{"cpu": "lots"}}, m{"limits": m{"cpu": "1"}}, "limits.cpu"},
		{"unknown scalar type falls back to DeepEqual", m{"a": []string{"x"}}, m{"a": []string{"x"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, drifted := firstDrift(tt.desired, tt.live)
			assert.Equal(t, tt.wantPath != "", drifted, "drifted")
			assert.Equal(t, tt.wantPath, path)
		})
	}
}

// testDeployment is what a reconciler would build: only the fields it cares
// about.
func testDeployment() *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: "nginx:1.27",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env:   []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
					Resources: corev1.ResourceRequirements{
						Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")},
					},
				}}},
			},
		},
	}
}

// liveOf returns desired as the apiserver would return it after applying
// config: every default filled in, server metadata, status, other managers'
// fields and an injected sidecar.
func liveOf(t testing.TB, desired *appsv1.Deployment, config map[string]any) map[string]any {
	live := desired.DeepCopy()
	live.UID, live.ResourceVersion, live.Generation = "u-1", "42", 1
	live.CreationTimestamp = metav1.Now()
	live.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "test", Operation: metav1.ManagedFieldsOperationApply}}
	live.Annotations = map[string]string{
		ConfigHashAnnotation:                config["metadata"].(map[string]any)["annotations"].(map[string]any)[ConfigHashAnnotation].(string),
		"deployment.kubernetes.io/revision": "1",
	}
	live.Labels = map[string]string{"app": "web", "team": "platform"}
	live.OwnerReferences = desired.OwnerReferences
	s := &live.Spec
	s.RevisionHistoryLimit, s.ProgressDeadlineSeconds = new(int32(10)), new(int32(600))
	s.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: new(intstr.FromString("25%")), MaxSurge: new(intstr.FromString("25%"))}}
	ps := &s.Template.Spec
	ps.RestartPolicy, ps.DNSPolicy, ps.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler"
	ps.TerminationGracePeriodSeconds = new(int64(30))
	ps.SecurityContext = &corev1.PodSecurityContext{}
	c := &ps.Containers[0]
	c.TerminationMessagePath, c.TerminationMessagePolicy = "/dev/termination-log", corev1.TerminationMessageReadFile
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.Ports[0].Protocol = corev1.ProtocolTCP
	c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("500m")
	ps.Containers = append(ps.Containers, corev1.Container{Name: "istio-proxy", Image: "istio/proxyv2"})
	live.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2}
	return toLiveMap(t, live)
}

// toLiveMap converts like Apply does: TypeMeta comes from the request.
func toLiveMap(t testing.TB, live *appsv1.Deployment) map[string]any {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	require.NoError(t, err)
	u["apiVersion"], u["kind"] = "apps/v1", "Deployment"
	return u
}

func TestFirstDriftDeployment(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(live *appsv1.Deployment)
		wantPath string
	}{
		{"defaults, status, foreign fields and a sidecar are not drift", func(*appsv1.Deployment) {}, ""},
		{"image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "evil" },
			"spec.template.spec.containers[name=app].image"},
		{"replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(5)) }, "spec.replicas"},
		{"our label", func(d *appsv1.Deployment) { d.Labels["app"] = "x" }, "metadata.labels.app"},
		{"env value", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Env[0].Value = "dev" },
			"spec.template.spec.containers[name=app].env[name=MODE].value"},
		{"cpu limit", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
		}, "spec.template.spec.containers[name=app].resources.limits.cpu"},
		{"container removed", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[1:] },
			"spec.template.spec.containers[name=app]"},
		{"config hash", func(d *appsv1.Deployment) { d.Annotations[ConfigHashAnnotation] = "old" },
			"metadata.annotations." + ConfigHashAnnotation},
		{"owner reference removed", func(d *appsv1.Deployment) { d.OwnerReferences = nil }, "metadata.ownerReferences"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			desired := testDeployment()
			desired.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(
				&metav1.ObjectMeta{Name: "owner", UID: "o-1"}, appsv1.SchemeGroupVersion.WithKind("Widget"))}
			config, err := buildConfig(desired, appsv1.SchemeGroupVersion.WithKind("Deployment"), nil)
			require.NoError(t, err)
			liveMap := liveOf(t, desired, config)
			live := &appsv1.Deployment{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(liveMap, live))
			tt.edit(live)
			liveMap = toLiveMap(t, live)

			path, drifted := firstDrift(config, liveMap)
			assert.Equal(t, tt.wantPath != "", drifted)
			assert.Equal(t, tt.wantPath, path)
		})
	}
}

func unchangedFixture(tb testing.TB) (config, live map[string]any) {
	desired := testDeployment()
	config, err := buildConfig(desired, appsv1.SchemeGroupVersion.WithKind("Deployment"), nil)
	require.NoError(tb, err)
	return config, liveOf(tb, desired, config)
}

// The comparison runs on every reconcile of every owned object; on the
// common path (no drift) it must not allocate.
func TestFirstDriftUnchangedDoesNotAllocate(t *testing.T) {
	config, live := unchangedFixture(t)
	allocs := testing.AllocsPerRun(100, func() {
		if _, drifted := firstDrift(config, live); drifted {
			t.Fatal("unexpected drift")
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkUnchanged(b *testing.B) {
	config, live := unchangedFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, drifted := firstDrift(config, live); drifted {
			b.Fatal("unexpected drift")
		}
	}
}
