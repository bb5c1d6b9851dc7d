package reconciler

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// computeStatus is kstatus's judgement (status.Compute) of obj, an object
// of kind gvk (objects from an informer carry no apiVersion and kind).
func computeStatus(obj client.Object, gvk schema.GroupVersionKind) (*status.Result, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return deploymentStatus(o), nil
	case *corev1.Service:
		return serviceStatus(o), nil
	}
	u, err := statusView(obj, gvk)
	if err != nil {
		return nil, err
	}
	return status.Compute(u)
}

// statusView is the part of obj that kstatus reads, as kstatus takes it:
// apiVersion and kind (its rules are per group and kind), metadata's
// generation, creationTimestamp and deletionTimestamp, and spec and status
// without the templates of the objects a workload makes (a Deployment's
// pod template, a CronJob's job template, a StatefulSet's claim
// templates), which no kstatus rule reads. Converting those is most of
// what converting a whole workload to unstructured costs, on every pass
// that judges a rollout and on every status update of one under way;
// TestStatusViewJudgesAsTheWholeObject compares both judgements.
func statusView(obj client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m := map[string]any{}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("judging %T: not a pointer to a struct", obj)
	}
	for _, name := range []string{"Spec", "Status"} {
		f, ok := v.Elem().Type().FieldByName(name)
		if !ok {
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if len(f.Index) != 1 || f.Type.Kind() != reflect.Struct || key == "" || key == "-" {
			return wholeObject(obj, gvk) // not the usual shape (promoted, a pointer, untagged): convert it all
		}
		part := v.Elem().Field(f.Index[0])
		c := reflect.New(f.Type).Elem()
		c.Set(part) // a shallow copy: the templates are dropped from it only
		for _, big := range []string{"Template", "JobTemplate", "VolumeClaimTemplates"} {
			if t := c.FieldByName(big); t.IsValid() && t.CanSet() {
				t.SetZero()
			}
		}
		converted, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.Addr().Interface())
		if err != nil {
			return nil, fmt.Errorf("judging %s %s: converting its %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), key, err)
		}
		for _, big := range []string{"template", "jobTemplate", "volumeClaimTemplates"} {
			delete(converted, big) // what remains of them: an empty template
		}
		m[key] = converted
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	if g := obj.GetGeneration(); g != 0 {
		u.SetGeneration(g)
	}
	if ts := obj.GetCreationTimestamp(); !ts.IsZero() {
		u.SetCreationTimestamp(ts)
	}
	u.SetDeletionTimestamp(obj.GetDeletionTimestamp())
	return u, nil
}

// wholeObject converts all of obj, an object of kind gvk.
func wholeObject(obj client.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("judging %s %s: converting it: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// reconciling is kstatus's InProgress result, with its Reconciling
// condition.
func reconciling(reason, msg string) *status.Result {
	return &status.Result{Status: status.InProgressStatus, Message: msg,
		Conditions: []status.Condition{{Type: status.ConditionReconciling, Status: corev1.ConditionTrue, Reason: reason, Message: msg}}}
}

// serviceStatus is kstatus's judgement of a Service (its generic checks,
// then its Service rule, in sigs.k8s.io/cli-utils v0.37.2's
// status.Compute), read from the typed object: judged on every pass of an
// owner that applies one with ApplyAndWait, where converting its spec and
// status for kstatus allocated more than the rest of the judgement
// (BenchmarkServiceStatus). A Service reports no observedGeneration.
// TestStatusViewJudgesAsTheWholeObject holds it to kstatus's judgement.
func serviceStatus(s *corev1.Service) *status.Result {
	if s.DeletionTimestamp != nil {
		return &status.Result{Status: status.TerminatingStatus, Message: "Resource scheduled for deletion", Conditions: []status.Condition{}}
	}
	for _, c := range s.Status.Conditions {
		switch {
		case c.Type == string(status.ConditionReconciling) && c.Status == metav1.ConditionTrue:
			return reconciling(c.Reason, c.Message)
		case c.Type == string(status.ConditionStalled) && c.Status == metav1.ConditionTrue:
			return &status.Result{Status: status.FailedStatus, Message: c.Message,
				Conditions: []status.Condition{{Type: status.ConditionStalled, Status: corev1.ConditionTrue, Reason: c.Reason, Message: c.Message}}}
		}
	}
	if s.Spec.Type == corev1.ServiceTypeLoadBalancer && s.Spec.ClusterIP == "" {
		return reconciling("NoIPAssigned", "ClusterIP not set. Service type: LoadBalancer")
	}
	return &status.Result{Status: status.CurrentStatus, Message: "Service is ready", Conditions: []status.Condition{}}
}

// deploymentStatus is kstatus's judgement of a Deployment (its generic
// checks, then its Deployment rules, in sigs.k8s.io/cli-utils v0.37.2's
// status.Compute), read from the typed object: the owned workload judged
// most often, on every pass that waits on a rollout and every status
// update of one under way, in a quarter of a microsecond where converting
// it whole for kstatus costs about 55 (BenchmarkStatusView). TestStatusViewJudgesAsTheWholeObject holds it
// to kstatus's judgement, message and conditions included.
func deploymentStatus(d *appsv1.Deployment) *status.Result {
	inProgress := reconciling
	// The generic checks.
	if d.DeletionTimestamp != nil {
		return &status.Result{Status: status.TerminatingStatus, Message: "Resource scheduled for deletion", Conditions: []status.Condition{}}
	}
	// An unstructured Deployment has no observedGeneration while it is 0.
	if d.Generation != 0 && d.Status.ObservedGeneration != 0 && d.Status.ObservedGeneration != d.Generation {
		return inProgress("LatestGenerationNotObserved",
			fmt.Sprintf("Deployment generation is %d, but latest observed generation is %d", d.Generation, d.Status.ObservedGeneration))
	}
	for _, c := range d.Status.Conditions {
		switch {
		case string(c.Type) == string(status.ConditionReconciling) && c.Status == corev1.ConditionTrue:
			return inProgress(c.Reason, c.Message)
		case string(c.Type) == string(status.ConditionStalled) && c.Status == corev1.ConditionTrue:
			return &status.Result{Status: status.FailedStatus, Message: c.Message,
				Conditions: []status.Condition{{Type: status.ConditionStalled, Status: corev1.ConditionTrue, Reason: c.Reason, Message: c.Message}}}
		}
	}
	// The Deployment rules.
	progressing := d.Spec.ProgressDeadlineSeconds == nil || *d.Spec.ProgressDeadlineSeconds == math.MaxInt32
	available := false
	for _, c := range d.Status.Conditions {
		switch c.Type {
		case appsv1.DeploymentProgressing:
			if c.Reason == "ProgressDeadlineExceeded" {
				return &status.Result{Status: status.FailedStatus, Message: "Progress deadline exceeded",
					Conditions: []status.Condition{{Type: status.ConditionStalled, Status: corev1.ConditionTrue, Reason: c.Reason, Message: c.Message}}}
			}
			if c.Status == corev1.ConditionTrue && c.Reason == "NewReplicaSetAvailable" {
				progressing = true
			}
		case appsv1.DeploymentAvailable:
			if c.Status == corev1.ConditionTrue {
				available = true
			}
		}
	}
	want := int32(1) // the controller's default
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	switch {
	case want > st.Replicas:
		return inProgress("LessReplicas", fmt.Sprintf("Replicas: %d/%d", st.Replicas, want))
	case want > st.UpdatedReplicas:
		return inProgress("LessUpdated", fmt.Sprintf("Updated: %d/%d", st.UpdatedReplicas, want))
	case st.Replicas > want:
		return inProgress("ExtraPods", fmt.Sprintf("Pending termination: %d", st.Replicas-want))
	case st.UpdatedReplicas > st.AvailableReplicas:
		return inProgress("LessAvailable", fmt.Sprintf("Available: %d/%d", st.AvailableReplicas, st.UpdatedReplicas))
	case want > st.ReadyReplicas:
		return inProgress("LessReady", fmt.Sprintf("Ready: %d/%d", st.ReadyReplicas, want))
	case !progressing:
		return inProgress("ReplicaSetNotAvailable", "ReplicaSet not Available")
	case !available:
		return inProgress("DeploymentNotAvailable", "Deployment not Available")
	}
	return &status.Result{Status: status.CurrentStatus, Message: fmt.Sprintf("Deployment is available. Replicas: %d", st.Replicas),
		Conditions: []status.Condition{}}
}
