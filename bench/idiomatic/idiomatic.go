// Package idiomatic is the WebApp operator written with plain
// controller-runtime the way a strong team writes it in 2026, kept as the
// peer the benchmarks hold reconcilekit's WebApp operator to. It uses no
// reconcilekit package. Its choices, each the current best practice:
//
//   - The Deployment and the Service are written by server-side apply
//     (Client.Apply with client-go apply configurations, a field manager,
//     ForceOwnership) on every pass: no Get-compare-Update, no conflicts, and
//     a no-op apply changes nothing on the server (it is still a request).
//     The apply response carries the Deployment's current status, so the
//     rollout is judged on the generation this pass applied, never on an
//     older cached copy.
//   - Status is computed on a copy and merge-patched only when it changed,
//     with observedGeneration, Ready/DatabaseReady/Available and the
//     kstatus Reconciling/Stalled conditions, as the example operator sets
//     them; an Event is recorded when Ready changes.
//   - The cache strips managedFields from every object
//     (cache.TransformStripManagedFields) and holds only the Deployments and
//     Services this operator labelled, and only the registry ConfigMaps of
//     its own namespace. The dbRef Service is not in that cache: it is read
//     through the API reader (metadata only) and, while missing, the WebApp
//     is requeued every DatabaseRecheck rather than the operator caching
//     every Service in the cluster.
//   - The finalizer guards the WebApp's entry in the route registry (the
//     same single ConfigMap, RegistryName, as the example operator, behind
//     the Registry interface; ShardedConfigMapRegistry is the sharded
//     alternative for when the example's registry is sharded); finalizers
//     are added and removed by optimistic-locked merge patches.
//
// Webhooks are left out, as they are for every operator in the benchmarks.
package idiomatic

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// Names shared with the example operator, so both produce the same objects.
const (
	// ControllerName names the controller (metrics label) and is the field
	// manager of every apply and the source of its Events.
	ControllerName = "webapp-idiomatic"
	// Finalizer guards the WebApp's registry entry.
	Finalizer = "apps.example.com/cleanup"
	// RegistryName is the route registry ConfigMap in the operator's
	// namespace: key "<namespace>.<name>", value the in-cluster URL.
	RegistryName = "webapp-registry"
	// ManagedBy is the value of app.kubernetes.io/managed-by on everything
	// the operator creates; the cache selects on it.
	ManagedBy = "webapp-operator"
	// RegistryShardLabel marks the shards of a ShardedConfigMapRegistry
	// (value "shard"), as the example operator marks its own.
	RegistryShardLabel = "apps.example.com/route-registry"
	// DatabaseRecheck is how often a WebApp waiting for its dbRef Service
	// looks again.
	DatabaseRecheck = 30 * time.Second
)

// Condition types and reasons (Ready, Reconciling and Stalled are kstatus').
const (
	condReady       = "Ready"
	condReconciling = "Reconciling"
	condStalled     = "Stalled"
)

const (
	labelName     = "app.kubernetes.io/name"
	labelInstance = "app.kubernetes.io/instance"
	labelManaged  = "app.kubernetes.io/managed-by"
)

var (
	defaultCPU    = resource.MustParse("500m")
	defaultMemory = resource.MustParse("256Mi")
	fieldOwner    = client.FieldOwner(ControllerName)
)

// Registry records each WebApp's address where a gateway reads it. The
// finalizer exists for it: owner references cannot remove one entry of a
// shared object in another namespace.
type Registry interface {
	// Register makes app's entry current, writing nothing when it is.
	Register(ctx context.Context, app *webappv1.WebApp) error
	// Deregister removes app's entry; an absent one is done.
	Deregister(ctx context.Context, app *webappv1.WebApp) error
}

// ConfigMapRegistry is the single-ConfigMap registry (RegistryName in
// Namespace), read from the manager's cache and written by merge patches
// that touch one key, so concurrent passes never overwrite each other.
type ConfigMapRegistry struct {
	Client    client.Client
	Namespace string
	name      string            // RegistryName when empty
	labels    map[string]string // managed-by when empty
}

func (r ConfigMapRegistry) objectName() string {
	if r.name == "" {
		return RegistryName
	}
	return r.name
}

func registryKey(app *webappv1.WebApp) string { return app.Namespace + "." + app.Name }

func registryValue(app *webappv1.WebApp) string {
	return fmt.Sprintf("http://%s.%s.svc:80", app.Name, app.Namespace)
}

// Register implements Registry.
func (r ConfigMapRegistry) Register(ctx context.Context, app *webappv1.WebApp) error {
	key, value := registryKey(app), registryValue(app)
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: r.objectName()}, cm)
	switch {
	case apierrors.IsNotFound(err):
		if r.labels == nil {
			r.labels = map[string]string{labelManaged: ManagedBy}
		}
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.objectName(), Labels: r.labels},
			Data:       map[string]string{key: value},
		}
		if err := r.Client.Create(ctx, cm); !apierrors.IsAlreadyExists(err) {
			return err
		}
		// Created meanwhile by another pass: patch our key in.
	case err != nil:
		return err
	case cm.Data[key] == value:
		return nil
	}
	return r.patch(ctx, key, &value)
}

// Deregister implements Registry. It always patches: the cache may not hold
// an entry written moments ago, and a skipped removal is never retried.
func (r ConfigMapRegistry) Deregister(ctx context.Context, app *webappv1.WebApp) error {
	return client.IgnoreNotFound(r.patch(ctx, registryKey(app), nil))
}

func (r ConfigMapRegistry) patch(ctx context.Context, key string, value *string) error {
	patch, err := json.Marshal(map[string]any{"data": map[string]*string{key: value}})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.objectName()}}
	return r.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch))
}

// ShardedConfigMapRegistry spreads the entries over Shards ConfigMaps
// (webapp-registry-00, -01, ...: FNV-32a of "<namespace>/<name>" modulo
// Shards, the example operator's scheme at its 16 shards) in Namespace,
// so that no one object approaches the 1 MiB limit and each write rewrites
// 1/Shards of the registry. The ConfigMaps carry the managed-by label, so
// CacheOptions' cache holds them all, and RegistryShardLabel for readers.
type ShardedConfigMapRegistry struct {
	Client    client.Client
	Namespace string
	Shards    uint32
}

// ShardName is the ConfigMap that holds app's entry.
func (r ShardedConfigMapRegistry) ShardName(app *webappv1.WebApp) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(app.Namespace + "/" + app.Name))
	return fmt.Sprintf("%s-%02d", RegistryName, h.Sum32()%max(r.Shards, 1))
}

// Register implements Registry.
func (r ShardedConfigMapRegistry) Register(ctx context.Context, app *webappv1.WebApp) error {
	return ConfigMapRegistry{Client: r.Client, Namespace: r.Namespace, name: r.ShardName(app),
		labels: map[string]string{labelManaged: ManagedBy, RegistryShardLabel: "shard"}}.Register(ctx, app)
}

// Deregister implements Registry.
func (r ShardedConfigMapRegistry) Deregister(ctx context.Context, app *webappv1.WebApp) error {
	return ConfigMapRegistry{Client: r.Client, Namespace: r.Namespace, name: r.ShardName(app)}.Deregister(ctx, app)
}

// Reconciler reconciles WebApps.
type Reconciler struct {
	Client client.Client
	// APIReader reads what the cache does not hold (the dbRef Service).
	APIReader client.Reader
	Registry  Registry
	Recorder  events.EventRecorder
}

// Reconcile runs one pass for one WebApp.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &webappv1.WebApp{}
	if err := r.Client.Get(ctx, req.NamespacedName, app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, app)
	}
	if !controllerutil.ContainsFinalizer(app, Finalizer) {
		orig := app.DeepCopy()
		controllerutil.AddFinalizer(app, Finalizer)
		if err := r.Client.Patch(ctx, app, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, err
		}
	}

	orig := app.DeepCopy()
	res, passErr := r.converge(ctx, app)
	app.Status.ObservedGeneration = new(app.Generation)
	ready := meta.FindStatusCondition(app.Status.Conditions, condReady)
	app.Status.Ready = new(ready != nil && ready.Status == metav1.ConditionTrue)
	app.Status.Message = nil
	if ready != nil && ready.Message != "" {
		app.Status.Message = new(ready.Message)
	}
	if ready != nil && *app.Status.Ready {
		app.Status.Message = new("Ready: " + ready.Message)
	}
	if !equality.Semantic.DeepEqual(orig.Status, app.Status) {
		if err := r.Client.Status().Patch(ctx, app, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, err
		}
		was := meta.FindStatusCondition(orig.Status.Conditions, condReady)
		if was == nil || was.Status != ready.Status {
			kind := corev1.EventTypeNormal
			if ready.Status != metav1.ConditionTrue && passErr != nil {
				kind = corev1.EventTypeWarning
			}
			r.Recorder.Eventf(app, nil, kind, ready.Reason, "Reconcile", "Ready=%s: %s", ready.Status, ready.Message)
		}
	}
	return res, passErr
}

// converge applies the owned objects and sets the status conditions on
// app; the caller writes the status.
func (r *Reconciler) converge(ctx context.Context, app *webappv1.WebApp) (ctrl.Result, error) {
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&app.Status.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: app.Generation,
		})
	}
	waiting := func(reason, msg string) {
		set(condReady, metav1.ConditionFalse, reason, msg)
		set(condReconciling, metav1.ConditionTrue, reason, msg)
		meta.RemoveStatusCondition(&app.Status.Conditions, condStalled)
	}
	failed := func(reason string, err error) error {
		waiting(reason, err.Error())
		return err
	}

	// Database: the dbRef Service must exist.
	if app.Spec.DBRef == nil {
		set(webappv1.DatabaseReady, metav1.ConditionTrue, "NotConfigured", "no database configured")
	} else {
		ref := *app.Spec.DBRef
		svc := &metav1.PartialObjectMetadata{}
		svc.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: app.Namespace, Name: ref}, svc)
		switch {
		case apierrors.IsNotFound(err):
			msg := fmt.Sprintf("database Service %q not found in namespace %q", ref, app.Namespace)
			set(webappv1.DatabaseReady, metav1.ConditionFalse, "DatabaseNotFound", msg)
			waiting("DatabaseNotFound", msg)
			return ctrl.Result{RequeueAfter: DatabaseRecheck}, nil
		case err != nil:
			return ctrl.Result{}, failed("DatabaseError", fmt.Errorf("getting database Service %q: %w", ref, err))
		}
		set(webappv1.DatabaseReady, metav1.ConditionTrue, "DatabaseFound", fmt.Sprintf("database Service %q found", ref))
	}

	deploy := desiredDeployment(app)
	if err := r.Client.Apply(ctx, deploy, fieldOwner, client.ForceOwnership); err != nil {
		return ctrl.Result{}, failed("ApplyFailed", fmt.Errorf("applying Deployment: %w", err))
	}
	app.Status.Selector = new(labels.SelectorFromSet(selectorLabels(app)).String())
	if err := r.Client.Apply(ctx, desiredService(app), fieldOwner, client.ForceOwnership); err != nil {
		return ctrl.Result{}, failed("ApplyFailed", fmt.Errorf("applying Service: %w", err))
	}
	if err := r.Registry.Register(ctx, app); err != nil {
		return ctrl.Result{}, failed("RegistryFailed", fmt.Errorf("updating the route registry: %w", err))
	}

	// Rollout, judged on the apply's answer (the generation just applied).
	st := deploy.Status
	if st == nil {
		st = &appsv1ac.DeploymentStatusApplyConfiguration{}
	}
	app.Status.Replicas, app.Status.ReadyReplicas = new(deref(st.Replicas)), new(deref(st.ReadyReplicas))
	want := deref(deploy.Spec.Replicas)
	var progressing *appsv1ac.DeploymentConditionApplyConfiguration
	for i := range st.Conditions {
		if c := &st.Conditions[i]; c.Type != nil && *c.Type == appsv1.DeploymentProgressing {
			progressing = c
		}
	}
	name := "Deployment " + app.Name
	switch {
	case progressing != nil && progressing.Reason != nil && *progressing.Reason == "ProgressDeadlineExceeded":
		msg := fmt.Sprintf("%s: progress deadline exceeded", name)
		set(webappv1.Available, metav1.ConditionFalse, "ProgressDeadlineExceeded", msg)
		set(condReady, metav1.ConditionFalse, "ProgressDeadlineExceeded", msg)
		set(condStalled, metav1.ConditionTrue, "ProgressDeadlineExceeded", msg)
		meta.RemoveStatusCondition(&app.Status.Conditions, condReconciling)
		return ctrl.Result{}, nil
	case derefInt64(deploy.Generation) > derefInt64(st.ObservedGeneration):
		msg := name + ": Deployment generation not yet observed"
		set(webappv1.Available, metav1.ConditionFalse, "InProgress", msg)
		waiting("InProgress", msg)
	case deref(st.UpdatedReplicas) < want || deref(st.Replicas) > deref(st.UpdatedReplicas) ||
		deref(st.AvailableReplicas) < want || deref(st.ReadyReplicas) < want:
		msg := fmt.Sprintf("%s: Ready: %d/%d, updated: %d/%d", name, deref(st.ReadyReplicas), want, deref(st.UpdatedReplicas), want)
		set(webappv1.Available, metav1.ConditionFalse, "InProgress", msg)
		waiting("InProgress", msg)
	default:
		msg := fmt.Sprintf("Deployment is available. Replicas: %d", deref(st.Replicas))
		set(webappv1.Available, metav1.ConditionTrue, "Current", msg)
		set(condReady, metav1.ConditionTrue, "Current", msg)
		meta.RemoveStatusCondition(&app.Status.Conditions, condReconciling)
		meta.RemoveStatusCondition(&app.Status.Conditions, condStalled)
	}
	// The Deployment's status changes wake this WebApp through Owns().
	return ctrl.Result{}, nil
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func derefInt64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// finalize removes the registry entry, then the finalizer.
func (r *Reconciler) finalize(ctx context.Context, app *webappv1.WebApp) error {
	if !controllerutil.ContainsFinalizer(app, Finalizer) {
		return nil
	}
	if err := r.Registry.Deregister(ctx, app); err != nil {
		return fmt.Errorf("removing the route registry entry: %w", err)
	}
	orig := app.DeepCopy()
	controllerutil.RemoveFinalizer(app, Finalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, app, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})))
}

func selectorLabels(app *webappv1.WebApp) map[string]string {
	return map[string]string{labelName: "webapp", labelInstance: app.Name}
}

func objectLabels(app *webappv1.WebApp) map[string]string {
	l := selectorLabels(app)
	l[labelManaged] = ManagedBy
	return l
}

func ownerReference(app *webappv1.WebApp) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(webappv1.GroupVersion.String()).WithKind("WebApp").
		WithName(app.Name).WithUID(app.UID).
		WithController(true).WithBlockOwnerDeletion(true)
}

// desiredDeployment is the example operator's Deployment, field for field.
func desiredDeployment(app *webappv1.WebApp) *appsv1ac.DeploymentApplyConfiguration {
	replicas := int32(1)
	if app.Spec.Replicas != nil {
		replicas = *app.Spec.Replicas
	}
	cpu, memory := defaultCPU, defaultMemory
	if res := app.Spec.Resources; res != nil {
		if res.CPU != nil {
			cpu = *res.CPU
		}
		if res.Memory != nil {
			memory = *res.Memory
		}
	}
	res := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}
	container := corev1ac.Container().
		WithName("web").
		WithImage(app.Spec.Image).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080)).
		WithResources(corev1ac.ResourceRequirements().WithRequests(res).WithLimits(res)).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	if app.Spec.DBRef != nil {
		container.WithEnv(corev1ac.EnvVar().WithName("DATABASE_HOST").WithValue(fmt.Sprintf("%s.%s.svc", *app.Spec.DBRef, app.Namespace)))
	}
	return appsv1ac.Deployment(app.Name, app.Namespace).
		WithLabels(objectLabels(app)).
		WithOwnerReferences(ownerReference(app)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(app))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(objectLabels(app)).
				WithSpec(corev1ac.PodSpec().
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithContainers(container))))
}

func desiredService(app *webappv1.WebApp) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(app.Name, app.Namespace).
		WithLabels(objectLabels(app)).
		WithOwnerReferences(ownerReference(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(selectorLabels(app)).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromString("http"))))
}

// SetupWithManager registers the controller: the WebApp and what it owns.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&webappv1.WebApp{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Complete(r)
}

// CacheOptions is the manager's cache: managedFields stripped from every
// object, Deployments and Services only when this operator labelled them,
// ConfigMaps only this operator's, in its namespace.
func CacheOptions(namespace string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{labelManaged: ManagedBy})
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Label: managed},
			&corev1.Service{}:    {Label: managed},
			&corev1.ConfigMap{}:  {Label: managed, Namespaces: map[string]cache.Config{namespace: {}}},
		},
	}
}

// NewScheme returns the scheme the operator uses.
func NewScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := webappv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return scheme, nil
}

// Setup builds the reconciler for mgr (whose cache should have
// CacheOptions(namespace)) with the route registry in namespace: the
// single ConfigMap when shards is 0, else a ShardedConfigMapRegistry of
// that many shards; and registers it.
func Setup(mgr ctrl.Manager, namespace string, shards uint32) (*Reconciler, error) {
	var registry Registry = ConfigMapRegistry{Client: mgr.GetClient(), Namespace: namespace}
	if shards > 0 {
		registry = ShardedConfigMapRegistry{Client: mgr.GetClient(), Namespace: namespace, Shards: shards}
	}
	r := &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Registry:  registry,
		Recorder:  mgr.GetEventRecorder(ControllerName),
	}
	return r, r.SetupWithManager(mgr)
}

// RunOptions configure Run.
type RunOptions struct {
	// MetricsAddr serves controller-runtime's metrics (plain HTTP).
	MetricsAddr string
	// PprofAddr serves Go's pprof endpoints (empty: none).
	PprofAddr string
	// Namespace holds the route registry, sharded over Shards ConfigMaps
	// (0: one).
	Namespace string
	Shards    uint32
	// Reconcilers is how many WebApps are reconciled at once
	// (controller-runtime's MaxConcurrentReconciles; 0: its default, 1).
	Reconcilers int
}

// Run runs the operator against cfg until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, o RunOptions) error {
	scheme, err := NewScheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress: "0",
		PprofBindAddress:       o.PprofAddr,
		Cache:                  CacheOptions(o.Namespace),
		Controller:             config.Controller{MaxConcurrentReconciles: o.Reconcilers},
	})
	if err != nil {
		return fmt.Errorf("creating the idiomatic manager: %w", err)
	}
	if _, err := Setup(mgr, o.Namespace, o.Shards); err != nil {
		return fmt.Errorf("setting up the idiomatic controller: %w", err)
	}
	return mgr.Start(ctx)
}
