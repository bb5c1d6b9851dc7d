package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

var env *testenv.Env

func crdDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "config", "crd", "bases")
}

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{
		CRDDirectoryPaths: []string{crdDir()},
		AddToScheme:       []func(*k8sruntime.Scheme) error{webappv2.AddToScheme},
	}))
}

// fixture drives the WebApp reconciler directly, reading through a started
// manager's informer cache (the client the operator really gets) wrapped in
// a counting client, in a fresh namespace that also holds the route
// registry.
type fixture struct {
	t   *testing.T
	ctx context.Context
	ns  string
	m   *testenv.Manager
	c   *reconcilertest.Client
	r   reconcile.Reconciler
	req reconcile.Request
}

func newFixture(t *testing.T, spec webappv2.WebAppSpec) *fixture {
	t.Helper()
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	m := env.StartManager(t)
	f := &fixture{t: t, ctx: ctx, ns: ns, m: m,
		req: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "shop"}}}
	f.useClient(reconcilertest.NewClient(m.Client))
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns}, Spec: spec}
	require.NoError(t, env.Client.Create(ctx, app))
	return f
}

// useClient rebuilds the reconciler on c.
func (f *fixture) useClient(c *reconcilertest.Client) {
	f.t.Helper()
	r, err := controller.New(nil, reconciler.Options[*webappv2.WebApp]{Client: c, APIReader: f.m.APIReader, Scheme: env.Scheme}, f.ns)
	require.NoError(f.t, err)
	f.c, f.r = c, r
}

// reconcile runs one pass as the controller would after the watch events of
// the latest writes: once the cache holds them.
func (f *fixture) reconcile() {
	f.t.Helper()
	f.sync()
	f.c.Reset()
	_, err := f.r.Reconcile(f.ctx, f.req)
	require.NoError(f.t, err)
}

// sync waits until the cache holds the apiserver's current WebApp,
// Deployment, registry shard and legacy registry.
func (f *fixture) sync() {
	f.t.Helper()
	for _, o := range []struct {
		obj client.Object
		key types.NamespacedName
	}{
		{&webappv2.WebApp{}, f.req.NamespacedName},
		{&appsv1.Deployment{}, f.req.NamespacedName},
		{&corev1.ConfigMap{}, f.shard()},
		{&corev1.ConfigMap{}, types.NamespacedName{Namespace: f.ns, Name: controller.LegacyRegistryName}},
	} {
		truth := o.obj.DeepCopyObject().(client.Object)
		err := env.Client.Get(f.ctx, o.key, truth)
		gone := apierrors.IsNotFound(err)
		if !gone {
			require.NoError(f.t, err)
		}
		require.Eventually(f.t, func() bool {
			cached := o.obj.DeepCopyObject().(client.Object)
			err := f.m.Client.Get(f.ctx, o.key, cached)
			if gone {
				return apierrors.IsNotFound(err)
			}
			return err == nil && cached.GetResourceVersion() == truth.GetResourceVersion()
		}, 30*time.Second, 5*time.Millisecond, "the cache never caught up with %T %s", o.obj, o.key)
	}
}

// shard is the registry shard that holds the WebApp's entry.
func (f *fixture) shard() types.NamespacedName {
	return types.NamespacedName{Namespace: f.ns, Name: controller.RegistryShard(f.ns, "shop")}
}

func (f *fixture) app() *webappv2.WebApp {
	f.t.Helper()
	app := &webappv2.WebApp{}
	require.NoError(f.t, env.Client.Get(f.ctx, f.req.NamespacedName, app))
	return app
}

func (f *fixture) deployment() *appsv1.Deployment {
	f.t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(f.t, env.Client.Get(f.ctx, f.req.NamespacedName, d))
	return d
}

// rollOut plays the Deployment controller (envtest runs none): it reports
// ready of the Deployment's replicas as ready.
func (f *fixture) rollOut(ready int32) {
	f.t.Helper()
	d := f.deployment()
	d.Status = rolledOut(d, ready)
	require.NoError(f.t, env.Client.Status().Update(f.ctx, d))
}

// rolledOut is the status the Deployment controller reports for d's
// generation with ready of its replicas ready.
func rolledOut(d *appsv1.Deployment, ready int32) appsv1.DeploymentStatus {
	want := *d.Spec.Replicas
	st := appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: want, UpdatedReplicas: want,
		ReadyReplicas: ready, AvailableReplicas: ready,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated"},
		},
	}
	if ready == want {
		st.Conditions[1].Reason = "NewReplicaSetAvailable"
	}
	return st
}

func TestLifecycle(t *testing.T) {
	f := newFixture(t, webappv2.WebAppSpec{Image: "registry.example.com/web:v1", Replicas: new(int32(3))})

	// Create: Deployment and Service with controller references.
	f.reconcile()
	d := f.deployment()
	svc := &corev1.Service{}
	require.NoError(t, env.Client.Get(f.ctx, f.req.NamespacedName, svc))
	for _, o := range []client.Object{d, svc} {
		ref := metav1.GetControllerOf(o)
		require.NotNil(t, ref, "%T has a controller reference", o)
		assert.Equal(t, "WebApp", ref.Kind)
		assert.Equal(t, "shop", ref.Name)
	}
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.Equal(t, "registry.example.com/web:v1", d.Spec.Template.Spec.Containers[0].Image)
	// No spec.resources: the default requests, and limits equal to them.
	res := d.Spec.Template.Spec.Containers[0].Resources
	assert.Equal(t, "500m", res.Requests.Cpu().String())
	assert.Equal(t, "256Mi", res.Requests.Memory().String())
	assert.Equal(t, res.Requests, res.Limits)
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for _, r := range evaluator.EvaluatePod(restricted, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec) {
		assert.True(t, r.Allowed, "the WebApp's pods pass Pod Security restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
	}
	app := f.app()
	assert.Contains(t, app.Finalizers, controller.Finalizer)
	assert.False(t, app.Status.IsReady())
	// Stored as false, not omitted: `kubectl get wa` shows READY false
	// instead of an empty column.
	require.NotNil(t, app.Status.Ready, "status.ready is written when false")
	assert.Equal(t, new("Deployment shop: Replicas: 0/3"), app.Status.Message)
	assert.Equal(t, new(int32(0)), app.Status.ReadyReplicas, "0 ready is written, not omitted")
	assert.True(t, conditions.IsTrue(app, conditions.Reconciling))
	assert.Equal(t, new("app.kubernetes.io/instance=shop,app.kubernetes.io/name=webapp"), app.Status.Selector)

	// The route registry has the WebApp's entry, in its shard, which is
	// labelled for readers and for the operator's cache.
	reg := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, f.shard(), reg))
	assert.Equal(t, "http://shop."+f.ns+".svc:80", reg.Data[f.ns+".shop"])
	assert.Equal(t, map[string]string{controller.RegistryLabel: "shard", "app.kubernetes.io/managed-by": "webapp-operator"}, reg.Labels)

	// Status follows the Deployment.
	f.rollOut(2)
	f.reconcile()
	app = f.app()
	assert.Equal(t, new("Deployment shop: Available: 2/3"), app.Status.Message)
	assert.Equal(t, new(int32(2)), app.Status.ReadyReplicas)
	f.rollOut(3)
	f.reconcile()
	app = f.app()
	assert.True(t, app.Status.IsReady())
	assert.Equal(t, new(int32(3)), app.Status.ReadyReplicas)
	assert.Equal(t, new(int32(3)), app.Status.Replicas)
	assert.Equal(t, &app.Generation, app.Status.ObservedGeneration)
	assert.True(t, conditions.IsTrue(app, conditions.Ready))
	assert.Nil(t, conditions.Get(app, conditions.Reconciling))

	// Converged: a pass over the unchanged WebApp writes nothing.
	f.sync()
	reconcilertest.AssertIdempotent(t, f.ctx, f.r, f.c, f.req)

	// Image change: the Deployment gets the new image, the WebApp goes
	// back to Reconciling until the rollout completes.
	app.Spec.Image = "registry.example.com/web:v2"
	require.NoError(t, env.Client.Update(f.ctx, app))
	f.reconcile()
	assert.Equal(t, "registry.example.com/web:v2", f.deployment().Spec.Template.Spec.Containers[0].Image)
	app = f.app()
	assert.False(t, app.Status.IsReady())
	assert.True(t, conditions.IsTrue(app, conditions.Reconciling))
	f.rollOut(3)
	f.reconcile()
	assert.True(t, f.app().Status.IsReady())

	// Drift: a hand edit of the Deployment is repaired; the foreign
	// annotation someone added survives.
	d = f.deployment()
	d.Spec.Template.Spec.Containers[0].Image = "evil:1"
	d.Annotations = map[string]string{"team.example.com/owner": "payments"}
	require.NoError(t, env.Client.Update(f.ctx, d))
	f.reconcile()
	d = f.deployment()
	assert.Equal(t, "registry.example.com/web:v2", d.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, "payments", d.Annotations["team.example.com/owner"])

	// Delete: cleanup removes the registry entry, then the finalizer.
	require.NoError(t, env.Client.Delete(f.ctx, f.app()))
	f.reconcile()
	require.NoError(t, env.Client.Get(f.ctx, f.shard(), reg))
	assert.NotContains(t, reg.Data, f.ns+".shop")
	err = env.Client.Get(f.ctx, f.req.NamespacedName, &webappv2.WebApp{})
	assert.True(t, apierrors.IsNotFound(err), "WebApp gone after cleanup: %v", err)
}

func TestDefaultsWithoutWebhook(t *testing.T) {
	f := newFixture(t, webappv2.WebAppSpec{Image: "web:1"})
	f.reconcile()
	d := f.deployment()
	assert.Equal(t, int32(1), *d.Spec.Replicas, "the CRD schema defaults replicas")
	res := d.Spec.Template.Spec.Containers[0].Resources
	assert.Equal(t, "500m", res.Requests.Cpu().String())
	assert.Equal(t, "256Mi", res.Limits.Memory().String())
}

// startOperator runs the controller as main.go does: a manager whose cache
// is built with controller.CacheOptions (label-scoped Deployments,
// Services and registry ConfigMaps, the registry in ns), the database
// step's metadata-only cache of the database Services, and the route registry in
// ns. It returns once the caches have synced; the manager stops with the
// test.
func startOperator(t *testing.T, ns string) ctrl.Manager {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      controller.CacheOptions(ns),
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	require.NoError(t, err)
	_, err = controller.Setup(mgr, ns, nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	syncCtx, syncCancel := context.WithTimeout(ctx, 30*time.Second)
	defer syncCancel()
	require.True(t, mgr.GetCache().WaitForCacheSync(syncCtx), "the manager's cache never synced")
	return mgr
}

// TestDatabaseAppearing runs the controller under a manager configured as
// main.go configures it: a WebApp whose database Service is missing waits
// with DatabaseReady=False, and becomes Ready as soon as the Service is
// created, with no other change (the metadata-only Service watch, not
// polling). The database Service, which the operator does not own, is
// never in the manager's typed cache; the WebApp's own Service is.
func TestDatabaseAppearing(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	mgr := startOperator(t, ns)

	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec: webappv2.WebAppSpec{Image: "web:1", Database: &webappv2.DatabaseReference{ServiceName: "orders-db"}}}
	require.NoError(t, env.Client.Create(ctx, app))
	key := client.ObjectKeyFromObject(app)

	var db *metav1.Condition
	require.Eventually(t, func() bool {
		require.NoError(t, env.Client.Get(ctx, key, app))
		db = conditions.Get(app, webappv2.DatabaseReady)
		return db != nil && db.Status == metav1.ConditionFalse
	}, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, "DatabaseNotFound", db.Reason)
	assert.Contains(t, db.Message, `"orders-db"`)
	require.NotNil(t, app.Status.Message)
	assert.Contains(t, *app.Status.Message, `database Service "orders-db" not found`)
	err := env.Client.Get(ctx, key, &appsv1.Deployment{})
	assert.True(t, apierrors.IsNotFound(err), "nothing is deployed before the database exists")

	require.NoError(t, env.Client.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "orders-db", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}},
	}))
	d := &appsv1.Deployment{}
	require.Eventually(t, func() bool { return env.Client.Get(ctx, key, d) == nil }, 30*time.Second, 100*time.Millisecond)
	assert.Equal(t, []corev1.EnvVar{{Name: "DATABASE_HOST", Value: "orders-db." + ns + ".svc"}}, d.Spec.Template.Spec.Containers[0].Env)

	// Memory: the typed cache holds the WebApp's own Service (labelled
	// managed-by) and not the database Service, nor any other Service.
	require.Eventually(t, func() bool {
		return mgr.GetClient().Get(ctx, key, &corev1.Service{}) == nil
	}, 30*time.Second, 100*time.Millisecond, "the WebApp's Service never reached the typed cache")
	var typed corev1.ServiceList
	require.NoError(t, mgr.GetClient().List(ctx, &typed, client.InNamespace(ns)))
	require.Len(t, typed.Items, 1, "only the WebApp's own Service is in the typed cache")
	assert.Equal(t, "shop", typed.Items[0].Name)
	err = mgr.GetClient().Get(ctx, types.NamespacedName{Namespace: ns, Name: "orders-db"}, &corev1.Service{})
	assert.True(t, apierrors.IsNotFound(err), "the unlabelled database Service is not in the typed cache: %v", err)

	// Play the Deployment controller; the WebApp becomes Ready.
	d.Status = rolledOut(d, 1)
	require.NoError(t, env.Client.Status().Update(ctx, d))
	require.Eventually(t, func() bool {
		require.NoError(t, env.Client.Get(ctx, key, app))
		return conditions.IsTrue(app, conditions.Ready) && conditions.IsTrue(app, webappv2.DatabaseReady)
	}, 30*time.Second, 100*time.Millisecond)
}

// TestRequestsAndLimits: v2's spec.resources says requests and limits
// apart; an unset limit is the request, an unset request the default.
func TestRequestsAndLimits(t *testing.T) {
	f := newFixture(t, webappv2.WebAppSpec{Image: "web:1", Resources: &webappv2.ResourceRequirements{
		Requests: &webappv2.ContainerResources{CPU: new(resource.MustParse("100m"))},
		Limits:   &webappv2.ContainerResources{CPU: new(resource.MustParse("2")), Memory: new(resource.MustParse("1Gi"))},
	}})
	f.reconcile()
	res := f.deployment().Spec.Template.Spec.Containers[0].Resources
	assert.Equal(t, "100m", res.Requests.Cpu().String())
	assert.Equal(t, "256Mi", res.Requests.Memory().String(), "an unset request is the default")
	assert.Equal(t, "2", res.Limits.Cpu().String())
	assert.Equal(t, "1Gi", res.Limits.Memory().String())

	app := f.app()
	app.Spec.Resources = &webappv2.ResourceRequirements{Requests: &webappv2.ContainerResources{Memory: new(resource.MustParse("64Mi"))}}
	require.NoError(t, env.Client.Update(f.ctx, app))
	f.reconcile()
	res = f.deployment().Spec.Template.Spec.Containers[0].Resources
	assert.Equal(t, "64Mi", res.Limits.Memory().String(), "an unset limit is the request")
	assert.Equal(t, "500m", res.Limits.Cpu().String())
	assert.Equal(t, res.Requests, res.Limits)
}
