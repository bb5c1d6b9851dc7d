package cacheoperator_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/docs/compare/cacheoperator"
	cachev1alpha1 "github.com/reconcilekit/reconcilekit/docs/getting-started/api/v1alpha1"
)

var (
	cfg    *rest.Config
	scheme = runtime.NewScheme()
)

// TestMain starts etcd and kube-apiserver with the guide's CRD; under
// -short it starts nothing and the test skips.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "getting-started", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	var err error
	if cfg, err = env.Start(); err == nil {
		err = errors.Join(clientgoscheme.AddToScheme(scheme), cachev1alpha1.AddToScheme(scheme))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest (is KUBEBUILDER_ASSETS set?):", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// The plain operator does what the guide's does: InProgress while the
// Deployment rolls out, Ready with the ready replicas once it is rolled
// out, Stalled on a spec.memory no retry can fix.
func TestPlainOperatorBehavesAsTheGuides(t *testing.T) {
	if testing.Short() {
		t.Skip("needs envtest")
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	r := &cacheoperator.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(cacheoperator.Name)}
	require.NoError(t, r.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	require.NoError(t, err)

	ready := func(key client.ObjectKey) *metav1.Condition {
		c := &cachev1alpha1.Cache{}
		if admin.Get(ctx, key, c) != nil {
			return nil
		}
		return meta.FindStatusCondition(c.Status.Conditions, "Ready")
	}
	c := &cachev1alpha1.Cache{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "default"},
		Spec: cachev1alpha1.CacheSpec{Image: new("memcached:1.6"), Replicas: new(int32(2))}}
	require.NoError(t, admin.Create(ctx, c))
	key := client.ObjectKeyFromObject(c)
	require.Eventually(t, func() bool { r := ready(key); return r != nil && r.Reason == "InProgress" }, time.Minute, 50*time.Millisecond)

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := &appsv1.Deployment{}
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
	require.Eventually(t, func() bool { r := ready(key); return r != nil && r.Status == metav1.ConditionTrue }, time.Minute, 50*time.Millisecond)
	require.NoError(t, admin.Get(ctx, key, c))
	assert.Equal(t, new(int32(2)), c.Status.ReadyReplicas)
	assert.Equal(t, "Current", ready(key).Reason)
	assert.Equal(t, &c.Generation, c.Status.ObservedGeneration)

	bad := &cachev1alpha1.Cache{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"},
		Spec: cachev1alpha1.CacheSpec{Image: new("memcached:1.6"), Memory: new(resource.MustParse("100M"))}}
	require.NoError(t, admin.Create(ctx, bad))
	require.Eventually(t, func() bool {
		c := &cachev1alpha1.Cache{}
		return admin.Get(ctx, client.ObjectKeyFromObject(bad), c) == nil && meta.IsStatusConditionTrue(c.Status.Conditions, "Stalled")
	}, time.Minute, 50*time.Millisecond)
	assert.Equal(t, "InvalidMemory", ready(client.ObjectKeyFromObject(bad)).Reason)
}
