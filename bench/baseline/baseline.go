// Package baseline is the WebApp operator written the way the operator
// tutorial writes it (/work/shared/reference/operator-tutorial.zh.txt,
// "控制器调谐逻辑"), kept only as the yardstick the benchmarks compare
// reconcilekit's WebApp operator with. Do not copy it: every pass writes
// the Deployment, the Service and the status whether anything changed or
// not, and the manager caches every Deployment and Service in the cluster
// with its managedFields.
//
// It reconciles the same API (examples/webapp/api/v1) on the same cluster
// so that the only difference measured is how the operator is written.
// Webhooks are left out of both operators in the benchmarks.
package baseline

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// Finalizer is the tutorial's finalizer.
const Finalizer = "webapp.example.com/cleanup"

// ControllerName is the name controller-runtime gives the baseline
// controller (the lower-cased kind); its metrics carry it.
const ControllerName = "webapp"

// Reconciler is the tutorial's WebAppReconciler.
type Reconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// Reconcile is the tutorial's pass: Get, finalizer, create-or-update the
// Deployment and the Service, then Status().Update, unconditionally.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var app webappv1.WebApp
	if err := r.Get(ctx, req.NamespacedName, &app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if !app.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(&app, Finalizer) {
			// The tutorial's handleCleanup has nothing to clean up here.
			controllerutil.RemoveFinalizer(&app, Finalizer)
			if err := r.Update(ctx, &app); err != nil {
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{}, nil
	}

	if !controllerutil.ContainsFinalizer(&app, Finalizer) {
		controllerutil.AddFinalizer(&app, Finalizer)
		if err := r.Update(ctx, &app); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.reconcileDeployment(ctx, &app); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileService(ctx, &app); err != nil {
		return ctrl.Result{}, err
	}
	return r.updateStatus(ctx, &app)
}

func replicasOf(app *webappv1.WebApp) int32 {
	if app.Spec.Replicas != nil {
		return *app.Spec.Replicas
	}
	return 1
}

// buildResources is the tutorial's helper: the spec's CPU and memory as
// requests and limits, with the webhook's defaults.
func buildResources(r *webappv1.ContainerResources) corev1.ResourceRequirements {
	cpu, memory := resource.MustParse("500m"), resource.MustParse("256Mi")
	if r != nil && r.CPU != nil {
		cpu = *r.CPU
	}
	if r != nil && r.Memory != nil {
		memory = *r.Memory
	}
	list := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}
	return corev1.ResourceRequirements{Requests: list, Limits: list}
}

func (r *Reconciler) reconcileDeployment(ctx context.Context, app *webappv1.WebApp) error {
	replicas := replicasOf(app)
	desired := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:      app.Name,
			Namespace: app.Namespace,
			Labels:    map[string]string{"app": app.Name, "managed": "webapp-operator"},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app.Name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app.Name}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:      "web",
						Image:     app.Spec.Image,
						Ports:     []corev1.ContainerPort{{ContainerPort: 8080}},
						Resources: buildResources(app.Spec.Resources),
					}},
				},
			},
		},
	}
	if err := ctrl.SetControllerReference(app, desired, r.Scheme); err != nil {
		return err
	}

	var existing appsv1.Deployment
	err := r.Get(ctx, client.ObjectKey{Name: app.Name, Namespace: app.Namespace}, &existing)
	if errors.IsNotFound(err) {
		return r.Create(ctx, desired)
	} else if err != nil {
		return err
	}
	// Update the existing Deployment (only the spec, keeping the status).
	existing.Spec = desired.Spec
	return r.Update(ctx, &existing)
}

// reconcileService is the Deployment's create-or-update applied to the
// Service (the tutorial leaves it to the reader). The apiserver keeps the
// allocated clusterIP when an update leaves it empty.
func (r *Reconciler) reconcileService(ctx context.Context, app *webappv1.WebApp) error {
	desired := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:      app.Name,
			Namespace: app.Namespace,
			Labels:    map[string]string{"app": app.Name, "managed": "webapp-operator"},
		},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app.Name},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if err := ctrl.SetControllerReference(app, desired, r.Scheme); err != nil {
		return err
	}

	var existing corev1.Service
	err := r.Get(ctx, client.ObjectKey{Name: app.Name, Namespace: app.Namespace}, &existing)
	if errors.IsNotFound(err) {
		return r.Create(ctx, desired)
	} else if err != nil {
		return err
	}
	existing.Spec.Selector = desired.Spec.Selector
	existing.Spec.Ports = desired.Spec.Ports
	return r.Update(ctx, &existing)
}

func (r *Reconciler) updateStatus(ctx context.Context, app *webappv1.WebApp) (ctrl.Result, error) {
	var deploy appsv1.Deployment
	if err := r.Get(ctx, client.ObjectKey{Name: app.Name, Namespace: app.Namespace}, &deploy); err != nil {
		return ctrl.Result{}, err
	}
	app.Status.ReadyReplicas = new(deploy.Status.ReadyReplicas)
	app.Status.Ready = new(deploy.Status.ReadyReplicas == *deploy.Spec.Replicas)
	if app.Status.IsReady() {
		app.Status.Message = new("Deployment is ready")
	} else {
		app.Status.Message = new(fmt.Sprintf("Waiting for %d/%d replicas", deploy.Status.ReadyReplicas, *deploy.Spec.Replicas))
	}
	if err := r.Status().Update(ctx, app); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// SetupWithManager is the kubebuilder scaffold's: the WebApp and the
// objects it owns.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&webappv1.WebApp{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Complete(r)
}

// RunOptions configure Run.
type RunOptions struct {
	// MetricsAddr serves controller-runtime's metrics (plain HTTP).
	MetricsAddr string
	// PprofAddr serves Go's pprof endpoints (empty: none).
	PprofAddr string
	// Reconcilers is how many WebApps are reconciled at once
	// (controller-runtime's MaxConcurrentReconciles; 0: its default, 1).
	Reconcilers int
}

// Run runs the baseline operator against cfg until ctx is done. The manager
// has the scaffold's defaults: one cache of every watched kind in every
// namespace, nothing stripped, no leader election.
func Run(ctx context.Context, cfg *rest.Config, o RunOptions) error {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := webappv1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: "0",
		PprofBindAddress:       o.PprofAddr,
		Controller:             config.Controller{MaxConcurrentReconciles: o.Reconcilers},
	})
	if err != nil {
		return fmt.Errorf("creating the baseline manager: %w", err)
	}
	if err := (&Reconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the baseline controller: %w", err)
	}
	return mgr.Start(ctx)
}
