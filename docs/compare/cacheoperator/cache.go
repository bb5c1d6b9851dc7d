// Package cacheoperator is the getting-started guide's Cache operator
// (docs/guide/2-controller.md, internal/controller/cache.go) written with plain
// controller-runtime, the way a strong team writes it today, as the peer
// docs/comparison.md counts the guide's operator against. Same behaviour:
// a spec.memory that is not a whole number of mebibytes of at least 16Mi
// stalls the Cache (ConfigValid=False, Stalled=True, a terminal error, no
// retries); the Service and the Deployment are written by server-side
// apply with a controller reference; the Deployment's rollout is judged
// by kstatus on the apply's answer (the generation just applied) and
// reported on Available and Ready, with Reconciling and Stalled, a failed
// rollout re-checked after five minutes; readyReplicas and
// observedGeneration are set; the status is patched only when it changed;
// an Event is recorded when Ready changes; the owned kinds are watched.
package cacheoperator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1alpha1 "github.com/reconcilekit/reconcilekit/docs/getting-started/api/v1alpha1"
)

// Name names the controller, its field manager and its events' source.
const Name = "cache-controller"

var fieldOwner = client.FieldOwner(Name)

// The same permissions as the guide's operator.
// +kubebuilder:rbac:groups=cache.example.com,resources=caches,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=caches/status,verbs=patch
// +kubebuilder:rbac:groups=cache.example.com,resources=caches/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=core,resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler reconciles Caches.
type Reconciler struct {
	client.Client
	Recorder events.EventRecorder
}

// SetupWithManager registers the controller: Caches and what they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&cachev1alpha1.Cache{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Complete(r)
}

// Reconcile runs one pass: converge, then patch the status if it changed
// and record an Event when Ready changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	c := &cachev1alpha1.Cache{}
	if err := r.Get(ctx, req.NamespacedName, c); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := c.DeepCopy()
	res, passErr := r.converge(ctx, c)
	c.Status.ObservedGeneration = new(c.Generation)
	if equality.Semantic.DeepEqual(orig.Status, c.Status) {
		return res, passErr
	}
	if err := r.Status().Patch(ctx, c, client.MergeFrom(orig)); err != nil {
		return ctrl.Result{}, errors.Join(passErr, err)
	}
	ready := meta.FindStatusCondition(c.Status.Conditions, "Ready")
	if was := meta.FindStatusCondition(orig.Status.Conditions, "Ready"); was == nil || was.Status != ready.Status {
		kind := corev1.EventTypeNormal
		if ready.Status != metav1.ConditionTrue && (passErr != nil || meta.IsStatusConditionTrue(c.Status.Conditions, "Stalled")) {
			kind = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(c, nil, kind, ready.Reason, "Reconcile", "Ready=%s: %s", ready.Status, ready.Message)
	}
	return res, passErr
}

// converge applies the owned objects and sets the conditions on c.
func (r *Reconciler) converge(ctx context.Context, c *cachev1alpha1.Cache) (ctrl.Result, error) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&c.Status.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: c.Generation})
	}
	// stop marks cond (if any) and Ready False, and the pass Stalled or
	// Reconciling.
	stop := func(cond, reason, msg string, stalled bool) {
		if cond != "" {
			set(cond, metav1.ConditionFalse, reason, msg)
		}
		set("Ready", metav1.ConditionFalse, reason, msg)
		kept, dropped := "Reconciling", "Stalled"
		if stalled {
			kept, dropped = dropped, kept
		}
		set(kept, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&c.Status.Conditions, dropped)
	}

	mib, err := memoryMiB(c)
	if err != nil {
		stop(cachev1alpha1.ConfigValid, "InvalidMemory", err.Error(), true)
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	set(cachev1alpha1.ConfigValid, metav1.ConditionTrue, "Succeeded", "")
	if err := r.Apply(ctx, desiredService(c), fieldOwner, client.ForceOwnership); err != nil {
		stop("", "ReconcileError", err.Error(), false)
		return ctrl.Result{}, fmt.Errorf("applying Service: %w", err)
	}
	dep := desiredDeployment(c, mib)
	if err := r.Apply(ctx, dep, fieldOwner, client.ForceOwnership); err != nil {
		stop(cachev1alpha1.Available, "ReconcileError", err.Error(), false)
		return ctrl.Result{}, fmt.Errorf("applying Deployment: %w", err)
	}
	// The apply's answer is the Deployment as stored: judge that
	// generation's rollout, as kstatus does.
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(dep)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the applied Deployment: %w", err)
	}
	rs, err := status.Compute(&unstructured.Unstructured{Object: m})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("computing the Deployment's status: %w", err)
	}
	if dep.Status != nil && dep.Status.ReadyReplicas != nil {
		c.Status.ReadyReplicas = dep.Status.ReadyReplicas
	}
	msg := fmt.Sprintf("Deployment %s: %s", c.Name, rs.Message)
	switch rs.Status {
	case status.CurrentStatus:
		set(cachev1alpha1.Available, metav1.ConditionTrue, "Current", rs.Message)
		set("Ready", metav1.ConditionTrue, "Current", rs.Message)
		meta.RemoveStatusCondition(&c.Status.Conditions, "Reconciling")
		meta.RemoveStatusCondition(&c.Status.Conditions, "Stalled")
	case status.FailedStatus:
		reason := "Failed"
		for _, cond := range rs.Conditions {
			if cond.Type == status.ConditionStalled && cond.Reason != "" {
				reason, msg = cond.Reason, msg+": "+cond.Message
			}
		}
		stop(cachev1alpha1.Available, reason, msg, true)
		return ctrl.Result{RequeueAfter: 5 * time.Minute}, nil
	default:
		stop(cachev1alpha1.Available, string(rs.Status), msg, false)
	}
	return ctrl.Result{}, nil
}

// memoryMiB returns the cache size in mebibytes, or an error naming the
// field when it is not a whole number of mebibytes of at least 16Mi.
func memoryMiB(c *cachev1alpha1.Cache) (int64, error) {
	q := resource.MustParse("64Mi")
	if c.Spec.Memory != nil {
		q = *c.Spec.Memory
	}
	const mi = 1 << 20
	if q.Value()%mi != 0 || q.Value() < 16*mi {
		return 0, fmt.Errorf("spec.memory %s: must be a whole number of mebibytes, at least 16Mi", q.String())
	}
	return q.Value() / mi, nil
}

func labelsFor(c *cachev1alpha1.Cache) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": c.Name}
}

func ownerReference(c *cachev1alpha1.Cache) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(cachev1alpha1.GroupVersion.String()).WithKind("Cache").
		WithName(c.Name).WithUID(c.UID).
		WithController(true).WithBlockOwnerDeletion(true)
}

func desiredService(c *cachev1alpha1.Cache) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(c.Name, c.Namespace).
		WithLabels(labelsFor(c)).
		WithOwnerReferences(ownerReference(c)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(labelsFor(c)).
			WithPorts(corev1ac.ServicePort().WithName("memcached").WithPort(11211).WithTargetPort(intstr.FromString("memcached"))))
}

// desiredDeployment is the guide's Deployment, field for field, with the
// controller reference set by hand.
func desiredDeployment(c *cachev1alpha1.Cache, mib int64) *appsv1ac.DeploymentApplyConfiguration {
	memory := *resource.NewQuantity((mib+32)<<20, resource.BinarySI)
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labelsFor(c))).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(labelsFor(c)).
			WithSpec(corev1ac.PodSpec().
				WithSecurityContext(corev1ac.PodSecurityContext().
					WithRunAsNonRoot(true).
					WithRunAsUser(11211). // the image's memcache user
					WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
				WithContainers(corev1ac.Container().
					WithName("memcached").
					WithImage(ptr.Deref(c.Spec.Image, "")).
					WithArgs("-m", strconv.FormatInt(mib, 10)).
					WithPorts(corev1ac.ContainerPort().WithName("memcached").WithContainerPort(11211)).
					WithReadinessProbe(corev1ac.Probe().
						WithTCPSocket(corev1ac.TCPSocketAction().WithPort(intstr.FromString("memcached")))).
					WithResources(corev1ac.ResourceRequirements().
						WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: memory}).
						WithLimits(corev1.ResourceList{corev1.ResourceMemory: memory})).
					WithSecurityContext(corev1ac.SecurityContext().
						WithAllowPrivilegeEscalation(false).
						WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))))))
	if c.Spec.Replicas != nil {
		spec.WithReplicas(*c.Spec.Replicas)
	}
	return appsv1ac.Deployment(c.Name, c.Namespace).WithLabels(labelsFor(c)).WithOwnerReferences(ownerReference(c)).WithSpec(spec)
}
