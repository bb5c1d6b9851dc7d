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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"

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

// Setup builds the Cache reconciler and registers it with mgr. Owning the
// Deployment and the Service means a change to either (a rollout's
// progress, a hand edit, a deletion) starts a pass for their Cache.
func Setup(mgr ctrl.Manager) error {
	r, err := New(mgr, reconciler.Options[*cachev1alpha1.Cache]{})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&cachev1alpha1.Cache{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Complete(r)
}

// New builds the Cache reconciler. Whatever opts leaves empty comes from
// mgr; tests pass a nil mgr and set Client, APIReader and Scheme (and
// Recorder, to see events) in opts.
func New(mgr ctrl.Manager, opts reconciler.Options[*cachev1alpha1.Cache]) (*reconciler.Reconciler[*cachev1alpha1.Cache], error) {
	opts.Name = Name
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
// namespace and the controller reference come from the Cache.
func applyService(ctx context.Context, s *scope) reconciler.Outcome {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Object.Name, Labels: labelsFor(s.Object)},
		Spec: corev1.ServiceSpec{
			Selector: labelsFor(s.Object),
			Ports:    []corev1.ServicePort{{Name: "memcached", Port: 11211, TargetPort: intstr.FromString("memcached")}},
		},
	}
	if _, err := s.Apply(ctx, svc); err != nil {
		return reconciler.Error(fmt.Errorf("applying Service: %w", err))
	}
	return reconciler.Continue()
}

// desiredDeployment is built from scratch on every pass. Only the fields
// set here are applied and owned; the apiserver's defaults and other
// writers' fields are left alone and never count as drift.
func desiredDeployment(c *cachev1alpha1.Cache, mib int64) *appsv1.Deployment {
	memory := *resource.NewQuantity((mib+32)<<20, resource.BinarySI)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: labelsFor(c)},
		Spec: appsv1.DeploymentSpec{
			Replicas: c.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labelsFor(c)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labelsFor(c)},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To(int64(11211)), // the image's memcache user
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  "memcached",
						Image: c.Spec.Image,
						Args:  []string{"-m", strconv.FormatInt(mib, 10)},
						Ports: []corev1.ContainerPort{{Name: "memcached", ContainerPort: 11211}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("memcached")},
						}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: memory},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: memory},
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

// applyDeployment applies the Deployment and reports its rollout on the
// Available condition. Apply leaves the live Deployment, status included,
// in dep (the server's answer when it wrote), so no second read is needed,
// and Rollout judges the generation just applied. Its Wait needs no polling
// interval: the Deployment is owned, so its status changes start the next
// pass.
func applyDeployment(ctx context.Context, s *scope) reconciler.Outcome {
	mib, _ := memoryMiB(s.Object) // valid: the config step stops the pass otherwise
	dep := desiredDeployment(s.Object, mib)
	if _, err := s.Apply(ctx, dep); err != nil {
		return reconciler.Error(fmt.Errorf("applying Deployment: %w", err))
	}
	s.Object.Status.ReadyReplicas = dep.Status.ReadyReplicas
	return s.Rollout(dep)
}
