package reconciler

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// statusViewCases are objects in the states kstatus tells apart, of the
// kinds it has rules for and of a custom kind.
func statusViewCases() map[string]client.Object {
	meta := func(gen int64) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "x", Namespace: "ns", Generation: gen, Labels: map[string]string{"app": "x"},
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))}
	}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:v1",
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}}, Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}}}}
	deployment := func(gen int64, replicas *int32, st appsv1.DeploymentStatus) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: meta(gen), Spec: appsv1.DeploymentSpec{Replicas: replicas, Template: template,
			ProgressDeadlineSeconds: new(int32(600)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}, Status: st}
	}
	available := []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}}
	deleting := deployment(2, new(int32(2)), appsv1.DeploymentStatus{ObservedGeneration: 2})
	deleting.DeletionTimestamp = new(metav1.NewTime(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)))
	deleting.Finalizers = []string{"x"}
	noDeadline := deployment(1, nil, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1})
	noDeadline.Spec.ProgressDeadlineSeconds = nil
	statefulSet := func(strategy appsv1.StatefulSetUpdateStrategy, st appsv1.StatefulSetStatus) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: meta(3), Spec: appsv1.StatefulSetSpec{Replicas: new(int32(3)), Template: template,
			UpdateStrategy:       strategy,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}, Status: st}
	}
	job := func(st batchv1.JobStatus) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: meta(1), Spec: batchv1.JobSpec{Parallelism: new(int32(2)), Completions: new(int32(4)), Template: template}, Status: st}
	}
	widget := func(st testv1.WidgetStatus) *testv1.Widget {
		return &testv1.Widget{ObjectMeta: meta(2), Spec: testv1.WidgetSpec{Color: "blue"}, Status: st}
	}
	return map[string]client.Object{
		"deployment available": deployment(2, new(int32(2)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2,
			UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, Conditions: available}),
		"deployment generation not observed": deployment(3, new(int32(2)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2}),
		"deployment too few updated":         deployment(2, new(int32(2)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1}),
		"deployment default replicas":        deployment(2, nil, appsv1.DeploymentStatus{ObservedGeneration: 2}),
		"deployment not available": deployment(2, new(int32(1)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1,
			UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, Conditions: available[1:]}),
		"deployment deadline exceeded": deployment(2, new(int32(1)), appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "too slow"}}}),
		"deployment deleting":       deleting,
		"deployment scaled to zero": deployment(2, new(int32(0)), appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: available}),
		"deployment pending termination": deployment(2, new(int32(1)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2,
			UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, Conditions: available}),
		"deployment too few available": deployment(2, new(int32(2)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2,
			UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 1, Conditions: available}),
		"deployment too few ready": deployment(2, new(int32(2)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2,
			UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 2, Conditions: available}),
		"deployment too few replicas": deployment(2, new(int32(3)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2}),
		"deployment unobserved at 0":  deployment(2, new(int32(1)), appsv1.DeploymentStatus{}),
		"deployment reconciling": deployment(2, new(int32(1)), appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: []appsv1.DeploymentCondition{
			{Type: "Reconciling", Status: corev1.ConditionTrue, Reason: "Busy", Message: "busy"}}}),
		"deployment stalled": deployment(2, new(int32(1)), appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: []appsv1.DeploymentCondition{
			{Type: "Stalled", Status: corev1.ConditionTrue, Reason: "Stuck", Message: "stuck"}}}),
		"deployment deadline at max": func() client.Object {
			d := deployment(2, new(int32(1)), appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1,
				ReadyReplicas: 1, AvailableReplicas: 1, Conditions: available[:1]})
			d.Spec.ProgressDeadlineSeconds = new(int32(math.MaxInt32))
			return d
		}(),
		"deployment without a deadline":   noDeadline,
		"deployment without a generation": deployment(0, new(int32(1)), appsv1.DeploymentStatus{}),
		"statefulset partitioned": statefulSet(appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: new(int32(1))}},
			appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, ReadyReplicas: 3, CurrentReplicas: 1, UpdatedReplicas: 2}),
		"statefulset on delete": statefulSet(appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, ReadyReplicas: 3}),
		"statefulset rolling": statefulSet(appsv1.StatefulSetUpdateStrategy{},
			appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, ReadyReplicas: 2, CurrentRevision: "a", UpdateRevision: "b"}),
		"daemonset rolling out": &appsv1.DaemonSet{ObjectMeta: meta(1), Spec: appsv1.DaemonSetSpec{Template: template},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 2, NumberAvailable: 2, NumberReady: 2}},
		"replicaset ready": &appsv1.ReplicaSet{ObjectMeta: meta(1), Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(2)), Template: template},
			Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, FullyLabeledReplicas: 2}},
		"job running":  job(batchv1.JobStatus{Active: 2, StartTime: new(metav1.Now())}),
		"job complete": job(batchv1.JobStatus{Succeeded: 4, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}),
		"job failed": job(batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "too many"}}}),
		"cronjob": &batchv1.CronJob{ObjectMeta: meta(1), Spec: batchv1.CronJobSpec{Schedule: "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template}}}},
		"pod pending": &corev1.Pod{ObjectMeta: meta(0), Spec: template.Spec, Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}}}},
		"pod running": &corev1.Pod{ObjectMeta: meta(0), Spec: template.Spec, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		"pod crashing": &corev1.Pod{ObjectMeta: meta(0), Spec: template.Spec, Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "web", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}}},
		"service load balancer pending": &corev1.Service{ObjectMeta: meta(0), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		"service cluster ip": &corev1.Service{ObjectMeta: meta(0), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.0.0.1"}},
		"service without a type": &corev1.Service{ObjectMeta: meta(1), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "x"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}}},
		"service load balancer with an ip": &corev1.Service{ObjectMeta: meta(1), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.0.0.2"}},
		"service reconciling": &corev1.Service{ObjectMeta: meta(1), Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.3"},
			Status: corev1.ServiceStatus{Conditions: []metav1.Condition{{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Busy", Message: "busy"}}}},
		"service stalled": &corev1.Service{ObjectMeta: meta(1), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
			Status: corev1.ServiceStatus{Conditions: []metav1.Condition{{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "Stuck", Message: "stuck"}}}},
		"service with other conditions": &corev1.Service{ObjectMeta: meta(1), Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.4"},
			Status: corev1.ServiceStatus{Conditions: []metav1.Condition{{Type: "Stalled", Status: metav1.ConditionFalse, Reason: "Fine"},
				{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NotYet"}}}},
		"service deleting": func() client.Object {
			svc := &corev1.Service{ObjectMeta: meta(1), Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.5"}}
			svc.DeletionTimestamp = new(metav1.NewTime(time.Date(2026, 1, 3, 0, 0, 0, 0, time.UTC)))
			svc.Finalizers = []string{"x"}
			return svc
		}(),
		"pvc pending": &corev1.PersistentVolumeClaim{ObjectMeta: meta(0), Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}},
		"pdb": &policyv1.PodDisruptionBudget{ObjectMeta: meta(2), Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 2,
			CurrentHealthy: 1, DesiredHealthy: 2}},
		"configmap": &corev1.ConfigMap{ObjectMeta: meta(0), Data: map[string]string{"a": "b"}},
		"custom ready": widget(testv1.WidgetStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Done"}}}),
		"custom stalled": widget(testv1.WidgetStatus{ObservedGeneration: 2, Conditions: []metav1.Condition{
			{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "Broken", Message: "it broke"}}}),
		"custom generation not observed": widget(testv1.WidgetStatus{ObservedGeneration: 1}),
	}
}

func statusViewScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, testv1.AddToScheme(s))
	return s
}

// TestStatusViewJudgesAsTheWholeObject: kstatus judges the part of an
// object that statusView keeps exactly as it judges the whole object
// converted to unstructured: the same status, message and conditions.
func TestStatusViewJudgesAsTheWholeObject(t *testing.T) {
	s := statusViewScheme(t)
	for name, obj := range statusViewCases() {
		t.Run(name, func(t *testing.T) {
			gvk, err := apiutil.GVKForObject(obj, s)
			require.NoError(t, err)
			whole, err := wholeObject(obj, gvk)
			require.NoError(t, err)
			want, err := status.Compute(whole)
			require.NoError(t, err)
			got, err := computeStatus(obj, gvk)
			require.NoError(t, err)
			assert.Equal(t, want, got)

			view, err := statusView(obj, gvk)
			require.NoError(t, err)
			fromView, err := status.Compute(view)
			require.NoError(t, err)
			assert.Equal(t, want, fromView)
			_, hasTemplate, _ := unstructured.NestedFieldNoCopy(view.Object, "spec", "template")
			assert.False(t, hasTemplate, "the view leaves the pod template out")
		})
	}
}

// BenchmarkStatusView compares kstatus's judgement of a Deployment
// converted whole with its judgement of statusView.
func BenchmarkStatusView(b *testing.B) {
	d := statusViewCases()["deployment available"]
	gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u, _ := wholeObject(d, gvk)
			_, _ = status.Compute(u)
		}
	})
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = deploymentStatus(d.(*appsv1.Deployment))
		}
	})
	b.Run("compute", func(b *testing.B) {
		u, _ := statusView(d, gvk)
		b.ReportAllocs()
		for b.Loop() {
			_, _ = status.Compute(u)
		}
	})
	b.Run("view", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u, _ := statusView(d, gvk)
			_, _ = status.Compute(u)
		}
	})
}

// BenchmarkServiceStatus compares kstatus's judgement of a Service's
// statusView with serviceStatus's, as every pass of an owner that applies
// one with ApplyAndWait judges it.
func BenchmarkServiceStatus(b *testing.B) {
	svc := statusViewCases()["service without a type"]
	gvk := corev1.SchemeGroupVersion.WithKind("Service")
	b.Run("view", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u, _ := statusView(svc, gvk)
			_, _ = status.Compute(u)
		}
	})
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = computeStatus(svc, gvk)
		}
	})
}

// promoted has its spec in an embedded struct behind a pointer.
type promoted struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	*promotedSpec     `json:",inline"`
}

type promotedSpec struct {
	Spec struct {
		Replicas int32 `json:"replicas"`
	} `json:"spec"`
}

func (p *promoted) DeepCopyObject() runtime.Object { out := *p; return &out }

// TestStatusViewOfAPromotedSpec: a Spec promoted from an embedded nil
// pointer is converted with the whole object, not read through the nil
// pointer (a panic on the informer's goroutine).
func TestStatusViewOfAPromotedSpec(t *testing.T) {
	gvk := testv1.GroupVersion.WithKind("Promoted")
	u, err := statusView(&promoted{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 1}}, gvk)
	require.NoError(t, err)
	assert.Equal(t, int64(1), u.GetGeneration())
}
