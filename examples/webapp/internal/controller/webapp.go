// Package controller reconciles WebApps with reconcilekit: the whole
// controller is a list of steps, the objects they apply, and the watches.
package controller

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/sharding"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
)

// Name is the controller's name: field manager, event source, metrics label.
const Name = "webapp-controller"

// Finalizer guards the cleanup of a WebApp's entry in the route registry.
const Finalizer = "apps.example.com/cleanup"

// CleanupDeadline is how long a WebApp may take to be deleted before its
// cleanup counts as overdue (a CleanupOverdue event on every pass, and
// reconcilekit_cleanup_overdue_objects).
const CleanupDeadline = 10 * time.Minute

// Labels put on every object the operator creates for a WebApp.
const (
	labelName     = "app.kubernetes.io/name"
	labelInstance = "app.kubernetes.io/instance"
	labelManaged  = "app.kubernetes.io/managed-by"
	managedBy     = "webapp-operator"
)

// Defaults, applied by the webhook and again here for clusters installed
// without it.
var (
	DefaultCPU    = resource.MustParse("500m")
	DefaultMemory = resource.MustParse("256Mi")
)

// Least privilege: exactly the verbs the code uses. Owned objects are
// written by server-side apply (patch; create for the first apply) and never
// updated or deleted (the garbage collector deletes them); WebApps are only
// patched (finalizers) and their status patched; webapps/finalizers update is
// what blockOwnerDeletion requires on clusters that enforce it.
// +kubebuilder:rbac:groups=apps.example.com,resources=webapps,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps.example.com,resources=webapps/status,verbs=get;patch
// +kubebuilder:rbac:groups=apps.example.com,resources=webapps/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// Services: the WebApps' own (cached by label, CacheOptions) and the
// database Services they wait for (metadata only, in a cache of their own:
// reconciler.WaitFor), in every namespace. The route registry's ConfigMaps:
// registry.go.
// +kubebuilder:rbac:groups=core,resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Setup builds the WebApp reconciler and registers it, with its watches,
// with mgr. registryNamespace is where the route registry lives (the
// operator's namespace). shard, if not nil, makes this replica one of
// several that share the WebApps (reconciler.Options.Shard: it reconciles
// only the WebApps of the ranges shard owns, without leader election);
// the registry's merge patches of one key each are safe from any number
// of replicas. The manager's cache must be built with
// CacheOptions(registryNamespace) (or cache at least what it selects); the
// database step adds a metadata-only cache of its own for the database
// Services (reconciler.WaitFor).
func Setup(mgr ctrl.Manager, registryNamespace string, shard *sharding.Member) (*reconciler.Reconciler[*webappv2.WebApp], error) {
	r, err := New(mgr, reconciler.Options[*webappv2.WebApp]{Shard: shard}, registryNamespace)
	if err != nil {
		return nil, err
	}
	// r.Builder watches the WebApps, the kinds in Options.Owns, the
	// database Services the WebApps name (reconciler.WaitFor: no polling)
	// and the API server's recovery after an outage.
	err = r.Builder(mgr).
		// The registry is shared with whoever else reads or edits it: an
		// entry changed or removed behind the operator's back must be put
		// back, and no WebApp event would ever say so.
		Watches(&corev1.ConfigMap{}, registryDrift(mgr.GetClient(), registryNamespace)).
		Complete(r)
	return r, err
}

// New builds the WebApp reconciler. opts supplies overrides (tests pass a
// counting client); steps, conditions and cleanup are always the WebApp's.
func New(mgr ctrl.Manager, opts reconciler.Options[*webappv2.WebApp], registryNamespace string) (*reconciler.Reconciler[*webappv2.WebApp], error) {
	reg := registry{namespace: registryNamespace}
	opts.Name = Name
	opts.Owns = []client.Object{&appsv1.Deployment{}, &corev1.Service{}}
	opts.Steps = []reconciler.Step[*webappv2.WebApp]{
		reconciler.WaitFor("database", webappv2.DatabaseReady, &corev1.Service{}, databaseOf),
		{Name: "service", Run: service},
		{Name: "register", Run: reg.register},
		{Name: "deployment", Condition: webappv2.Available, Run: deployment},
	}
	opts.Finalizer = Finalizer
	opts.Cleanup = []reconciler.Step[*webappv2.WebApp]{{Name: "deregister", Run: reg.deregister}}
	if opts.CleanupDeadline == 0 {
		// Deregistering is one patch of one shard (two while a legacy
		// registry remains): a WebApp still deleting after this long is stuck (RBAC, an unreachable
		// apiserver), and reconcilekit_cleanup_overdue_objects counts it
		// for the WebAppCleanupOverdue alert. The finalizer is kept: a
		// deleted WebApp must not stay routable.
		opts.CleanupDeadline = CleanupDeadline
	}
	opts.DeriveStatus = deriveStatus
	return reconciler.New(mgr, opts)
}

type scope = reconciler.Scope[*webappv2.WebApp]

// databaseOf names the Service the database step waits for (none: "").
func databaseOf(app *webappv2.WebApp) string {
	if app.Spec.Database == nil {
		return ""
	}
	return app.Spec.Database.ServiceName
}

func selectorLabels(app *webappv2.WebApp) map[string]string {
	return map[string]string{labelName: "webapp", labelInstance: app.Name}
}

func objectLabels(app *webappv2.WebApp) map[string]string {
	l := selectorLabels(app)
	l[labelManaged] = managedBy
	return l
}

// resourcesOf returns the container's requests and limits: requests
// default to DefaultCPU and DefaultMemory, and a limit left unset is the
// request (so a WebApp that says nothing, or a v1 WebApp, is Guaranteed).
func resourcesOf(app *webappv2.WebApp) (requests, limits corev1.ResourceList) {
	put := func(l corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) {
		if q != nil {
			l[name] = *q
		}
	}
	requests = corev1.ResourceList{corev1.ResourceCPU: DefaultCPU, corev1.ResourceMemory: DefaultMemory}
	if r := app.Spec.Resources; r != nil && r.Requests != nil {
		put(requests, corev1.ResourceCPU, r.Requests.CPU)
		put(requests, corev1.ResourceMemory, r.Requests.Memory)
	}
	limits = maps.Clone(requests)
	if r := app.Spec.Resources; r != nil && r.Limits != nil {
		put(limits, corev1.ResourceCPU, r.Limits.CPU)
		put(limits, corev1.ResourceMemory, r.Limits.Memory)
	}
	return requests, limits
}

// desiredDeployment is the Deployment a WebApp asks for, as an apply
// configuration: exactly the fields we own, nothing the server defaults.
// Its pods pass Pod Security "restricted".
func desiredDeployment(app *webappv2.WebApp) *appsv1ac.DeploymentApplyConfiguration {
	requests, limits := resourcesOf(app)
	container := corev1ac.Container().
		WithName("web").
		WithImage(app.Spec.Image).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080)).
		WithResources(corev1ac.ResourceRequirements().WithRequests(requests).WithLimits(limits)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	if db := app.Spec.Database; db != nil {
		container.WithEnv(corev1ac.EnvVar().WithName("DATABASE_HOST").WithValue(fmt.Sprintf("%s.%s.svc", db.ServiceName, app.Namespace)))
	}
	return appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(objectLabels(app)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(ptr.Deref(app.Spec.Replicas, 1)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(objectLabels(app)).
				WithSpec(corev1ac.PodSpec().
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithContainers(container))))
}

// service applies the Service in front of the pods.
func service(ctx context.Context, s *scope) reconciler.Outcome {
	app := s.Object
	return s.ApplyAndWait(ctx, corev1ac.Service(app.Name, app.Namespace).
		WithLabels(objectLabels(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(selectorLabels(app)).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromString("http")))), nil)
}

// deployment applies the Deployment and reports its rollout, judged by
// kstatus on the generation just applied: Ready only once it is rolled
// out, Stalled when it exceeds its progress deadline. The status records
// the pod selector and replica counts for the scale subresource.
func deployment(ctx context.Context, s *scope) reconciler.Outcome {
	app := s.Object
	var d appsv1.Deployment
	out := s.ApplyAndWait(ctx, desiredDeployment(app), &d)
	app.Status.Selector = new(labels.SelectorFromSet(selectorLabels(app)).String())
	if d.UID != "" { // filled by the apply: the counts are the Deployment's
		app.Status.Replicas, app.Status.ReadyReplicas = new(d.Status.Replicas), new(d.Status.ReadyReplicas)
	}
	return out
}

// deriveStatus derives the printer-column fields from the conditions, so they
// cannot disagree with them.
func deriveStatus(app *webappv2.WebApp) {
	ready := conditions.Get(app, conditions.Ready)
	app.Status.Ready = new(ready != nil && ready.Status == metav1.ConditionTrue)
	switch {
	case ready == nil, ready.Message == "" && !app.Status.IsReady():
		app.Status.Message = nil
	case app.Status.IsReady():
		app.Status.Message = new("Ready: " + ready.Message)
	default:
		app.Status.Message = new(ready.Message)
	}
}
