package reconciler

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func benchDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", ResourceVersion: "12345",
			Labels: map[string]string{"app.kubernetes.io/name": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "registry.example.com/web:v1",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				}}},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}},
	}
}

// BenchmarkRecordWrite measures what the pass client does with every
// write's answer (a deep copy, kept for read-your-writes), against what it
// did before: converting the answer to unstructured.
func BenchmarkRecordWrite(b *testing.B) {
	d := benchDeployment()
	b.Run("deep copy", func(b *testing.B) {
		fc := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
		c := newPassClient(fc, fc)
		b.ReportAllocs()
		for b.Loop() {
			c.written = nil
			c.record(d)
		}
	})
	b.Run("unstructured (before)", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
