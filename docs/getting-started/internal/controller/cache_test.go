package controller_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"

	cachev1alpha1 "github.com/reconcilekit/reconcilekit/docs/getting-started/api/v1alpha1"
	"github.com/reconcilekit/reconcilekit/docs/getting-started/internal/controller"
)

// The operator's namespace and leader election Lease, as main.go has them.
const (
	operatorNamespace = "cache-system"
	leaderElectionID  = "cache-operator.cache.example.com"
)

var (
	scheme = runtime.NewScheme()
	// admin talks to the test apiserver as cluster-admin.
	admin client.Client
	// operator authenticates as the operator's ServiceAccount, which is
	// bound to the generated roles and nothing else.
	operator *rest.Config
)

// TestMain starts etcd and kube-apiserver from KUBEBUILDER_ASSETS with the
// generated CRD. Under -short it starts nothing and these tests skip.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(runWithEnvtest(m))
}

func runWithEnvtest(m *testing.M) int {
	env := &envtest.Environment{
		CRDDirectoryPaths:        []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest (is KUBEBUILDER_ASSETS set?):", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if err := setup(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "setting up:", err)
		return 1
	}
	return m.Run()
}

// setup creates the roles controller-gen generated (the ClusterRole, and the
// Role in the operator's namespace), binds them to the operator's
// ServiceAccount and impersonates it, so a missing RBAC marker fails these
// tests.
func setup(cfg *rest.Config) error {
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), cachev1alpha1.AddToScheme(scheme)); err != nil {
		return err
	}
	var err error
	if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	roles, err := generatedRoles(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}}); err != nil {
		return err
	}
	for _, role := range roles {
		if err := errors.Join(admin.Create(ctx, role), admin.Create(ctx, bindingFor(role))); err != nil {
			return err
		}
	}
	operator = rest.CopyConfig(cfg)
	operator.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + operatorNamespace + ":cache-operator"}
	return nil
}

// generatedRoles reads the roles controller-gen wrote.
func generatedRoles(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
	var roles []*unstructured.Unstructured
	for {
		role := &unstructured.Unstructured{}
		if err := dec.Decode(&role.Object); errors.Is(err, io.EOF) {
			return roles, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		roles = append(roles, role)
	}
}

// bindingFor binds a generated role to the operator's ServiceAccount: a
// ClusterRoleBinding for the ClusterRole, a RoleBinding in its namespace
// for the Role.
func bindingFor(role *unstructured.Unstructured) client.Object {
	meta := metav1.ObjectMeta{Name: "cache-operator", Namespace: role.GetNamespace()}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: role.GetKind(), Name: role.GetName()}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: operatorNamespace, Name: "cache-operator"}}
	if role.GetKind() == "ClusterRole" {
		return &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
	}
	return &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}
}

func requireEnvtest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs envtest: run without -short, with KUBEBUILDER_ASSETS set")
	}
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cache-test-"}}
	require.NoError(t, admin.Create(t.Context(), ns))
	return ns.Name
}

// TestCacheBecomesReady runs the controller as the operator runs it with
// --leader-elect: under a manager, with the permissions of the generated
// roles only.
func TestCacheBecomesReady(t *testing.T) {
	requireEnvtest(t)
	ctx, cancel := context.WithCancel(t.Context())
	mgr, err := ctrl.NewManager(operator, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		LeaderElection:                true,
		LeaderElectionID:              leaderElectionID,
		LeaderElectionNamespace:       operatorNamespace,
		LeaderElectionReleaseOnCancel: true,
		// A controller name may be registered once per process, and
		// go test -count=2 runs this test twice in one.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	require.NoError(t, controller.Setup(mgr))
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-stopped) })

	cache := &cachev1alpha1.Cache{
		ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: newNamespace(t)},
		Spec:       cachev1alpha1.CacheSpec{Replicas: ptr.To(int32(2)), Memory: ptr.To(resource.MustParse("128Mi"))},
	}
	require.NoError(t, admin.Create(ctx, cache))
	key := client.ObjectKeyFromObject(cache)

	// The controller creates the Deployment; the CRD defaulted the image.
	dep := &appsv1.Deployment{}
	require.Eventually(t, func() bool { return admin.Get(ctx, key, dep) == nil }, time.Minute, 100*time.Millisecond)
	assert.True(t, metav1.IsControlledBy(dep, cache))
	container := dep.Spec.Template.Spec.Containers[0]
	assert.Equal(t, "memcached:1.6.38", container.Image)
	assert.Equal(t, []string{"-m", "128"}, container.Args)
	assert.Equal(t, "160Mi", container.Resources.Limits.Memory().String())

	// Until the Deployment is rolled out, Ready says what it waits for.
	require.Eventually(t, func() bool {
		return admin.Get(ctx, key, cache) == nil && readyReason(cache) == reconciler.ReasonInProgress
	}, time.Minute, 100*time.Millisecond)
	assert.Equal(t, "Deployment sessions: Replicas: 0/2", conditions.Get(cache, conditions.Ready).Message)

	// envtest runs no Deployment controller: play its part, with the status
	// it writes once the rollout is complete.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(ctx, key, dep); err != nil {
			return err
		}
		dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation,
			Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			}}
		return admin.Status().Update(ctx, dep)
	}))

	require.Eventually(t, func() bool {
		return admin.Get(ctx, key, cache) == nil && conditions.IsTrue(cache, conditions.Ready)
	}, time.Minute, 100*time.Millisecond)
	assert.Equal(t, new(int32(2)), cache.Status.ReadyReplicas)
	assert.Equal(t, &cache.Generation, cache.Status.ObservedGeneration)
	assert.Equal(t, reconciler.ReasonCurrent, readyReason(cache))
	assert.Equal(t, "Deployment is available. Replicas: 2", conditions.Get(cache, conditions.Ready).Message)

	// Leader election ran on the Role's permissions: the leader elector's
	// Event, which names the Lease's holder, was allowed.
	lease := &coordinationv1.Lease{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: leaderElectionID}, lease))
	require.Eventually(t, func() bool {
		var events corev1.EventList
		return admin.List(ctx, &events, client.InNamespace(operatorNamespace)) == nil &&
			slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
				return e.Reason == "LeaderElection" && e.Message == ptr.Deref(lease.Spec.HolderIdentity, "")+" became leader"
			})
	}, time.Minute, 100*time.Millisecond, "no leader election Event in %s: may the Role create core events?", operatorNamespace)
}

// TestConvergesAndStalls drives the reconciler without a manager, through
// reconcilekit's request-counting, fault-injecting client. Without a manager
// nothing fills the options it leaves empty: with no Recorder, the
// reconciler records no events.
func TestConvergesAndStalls(t *testing.T) {
	requireEnvtest(t)
	ctx := t.Context()
	c := reconcilertest.NewClient(admin)
	r, err := controller.New(nil, reconciler.Options[*cachev1alpha1.Cache]{Client: c, APIReader: admin, Scheme: scheme})
	require.NoError(t, err)
	cache := &cachev1alpha1.Cache{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: newNamespace(t)}}
	require.NoError(t, admin.Create(ctx, cache))
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cache)}

	// A conflict on the status write is retried within the pass; once
	// converged, a pass over the unchanged Cache writes nothing.
	c.Inject(reconcilertest.Fault{Verb: reconcilertest.Patch, Kind: "Cache", Subresource: "status",
		Err: reconcilertest.ErrConflict, Rate: 1, Times: 1})
	reconcilertest.ReconcileUntilQuiet(t, ctx, r, c, req, 5)
	reconcilertest.AssertIdempotent(t, ctx, r, c, req)
	require.NoError(t, admin.Get(ctx, req.NamespacedName, cache))
	assert.Equal(t, reconciler.ReasonInProgress, readyReason(cache), "no Deployment controller here: the rollout never ends")

	// A spec no retry can fix stalls the Cache instead of failing in a loop.
	require.NoError(t, admin.Patch(ctx, cache, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"memory":"100M"}}`))))
	_, err = r.Reconcile(ctx, req)
	assert.ErrorIs(t, err, reconcile.TerminalError(nil))
	require.NoError(t, admin.Get(ctx, req.NamespacedName, cache))
	assert.True(t, conditions.IsTrue(cache, conditions.Stalled))
	assert.Equal(t, "InvalidMemory", readyReason(cache))
}

// readyReason returns the reason of the Cache's Ready condition, "" when it
// has none.
func readyReason(c *cachev1alpha1.Cache) string {
	if ready := conditions.Get(c, conditions.Ready); ready != nil {
		return ready.Reason
	}
	return ""
}
