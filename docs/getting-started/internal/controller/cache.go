// Package controller reconciles Caches with reconcilekit: the controller
// is a list of steps, the objects they apply, and the watches.
package controller

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/reconciler"

	cachev1alpha1 "github.com/reconcilekit/reconcilekit/docs/getting-started/api/v1alpha1"
)

// Name names the controller in logs, metrics and events, and is the
// server-side apply field manager of the objects it owns.
const Name = "cache-controller"

// The controller's permissions, generated into config/rbac/role.yaml.
// Server-side apply is a "patch" (and a "create" when the object does not
// exist yet), status is written with a patch of /status, nothing is ever
// updated whole or deleted. caches/finalizers "update" is what clusters
// running the OwnerReferencesPermissionEnforcement admission plugin demand
// for the owner references (blockOwnerDeletion) of the owned objects.
//
// +kubebuilder:rbac:groups=cache.example.com,resources=caches,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=caches/status,verbs=patch
// +kubebuilder:rbac:groups=cache.example.com,resources=caches/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=core,resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup builds the Cache reconciler and registers it with mgr, watching
// Caches and the kinds they own.
func Setup(mgr ctrl.Manager) error {
	r, err := New(mgr, reconciler.Options[*cachev1alpha1.Cache]{})
	if err != nil {
		return err
	}
	return r.SetupWithManager(mgr)
}

// New builds the Cache reconciler. Whatever opts leaves empty comes from
// mgr; tests pass a nil mgr and set Client, APIReader and Scheme (and
// Recorder, to see events) in opts.
func New(mgr ctrl.Manager, opts reconciler.Options[*cachev1alpha1.Cache]) (*reconciler.Reconciler[*cachev1alpha1.Cache], error) {
	opts.Name = Name
	opts.Owns = []client.Object{&appsv1.Deployment{}, &corev1.Service{}}
	opts.Steps = []reconciler.Step[*cachev1alpha1.Cache]{
		{Name: "config", Condition: cachev1alpha1.ConfigValid, Run: checkConfig},
		{Name: "service", Run: applyService},
		{Name: "deployment", Condition: cachev1alpha1.Available, Run: applyDeployment},
	}
	return reconciler.New(mgr, opts)
}

type scope = reconciler.Scope[*cachev1alpha1.Cache]

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

// checkConfig stops the pass on a spec no retry can fix. Terminal sets
// ConfigValid=False and Stalled=True and does not requeue: the next pass
// comes when someone edits the Cache.
func checkConfig(_ context.Context, s *scope) reconciler.Outcome {
	if _, err := memoryMiB(s.Object); err != nil {
		return reconciler.Terminal("InvalidMemory", err)
	}
	return reconciler.Continue()
}

func labelsFor(c *cachev1alpha1.Cache) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": c.Name}
}

// applyService applies the Service in front of the memcached pods. The
// controller reference comes from the Cache.
func applyService(ctx context.Context, s *scope) reconciler.Outcome {
	svc := corev1ac.Service(s.Object.Name, s.Object.Namespace).
		WithLabels(labelsFor(s.Object)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(labelsFor(s.Object)).
			WithPorts(corev1ac.ServicePort().WithName("memcached").WithPort(11211).WithTargetPort(intstr.FromString("memcached"))))
	if _, err := s.Apply(ctx, svc); err != nil {
		return reconciler.Retry(err) // it names the Service
	}
	return reconciler.Continue()
}

// desiredDeployment is built from scratch on every pass, as an apply
// configuration: it holds only the fields set here, and only those are
// applied and owned. The apiserver's defaults and other writers' fields are
// left alone and never count as drift.
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
	return appsv1ac.Deployment(c.Name, c.Namespace).WithLabels(labelsFor(c)).WithSpec(spec)
}

// applyDeployment applies the Deployment and reports its rollout on the
// Available condition, judged on the generation just applied. Its Wait
// needs no polling interval: the Deployment is owned, so its status
// changes start the next pass.
func applyDeployment(ctx context.Context, s *scope) reconciler.Outcome {
	mib, _ := memoryMiB(s.Object) // valid: the config step stops the pass otherwise
	var dep appsv1.Deployment
	out := s.ApplyAndWait(ctx, desiredDeployment(s.Object, mib), &dep)
	if dep.UID != "" { // filled by the apply
		s.Object.Status.ReadyReplicas = new(dep.Status.ReadyReplicas)
	}
	return out
}
