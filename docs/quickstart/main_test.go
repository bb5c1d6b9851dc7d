package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/reconcilekit/reconcilekit/conditions"

	cachev1alpha1 "github.com/reconcilekit/reconcilekit/docs/quickstart/api/v1alpha1"
)

// TestCacheBecomesReady runs the controller on envtest until a Cache is Ready.
func TestCacheBecomesReady(t *testing.T) {
	if testing.Short() {
		t.Skip("needs envtest: run without -short, with KUBEBUILDER_ASSETS set")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{"config/crd/bases"}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	mgr, err := newManager(cfg)
	require.NoError(t, err)
	ctx, stopped := t.Context(), make(chan error, 1) // ctx ends before the cleanups run
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() { require.NoError(t, <-stopped) })
	c := mgr.GetClient() // reads from the manager's cache, as the controller does
	cache := &cachev1alpha1.Cache{ObjectMeta: metav1.ObjectMeta{Name: "sessions", Namespace: "default"}}
	require.NoError(t, c.Create(ctx, cache))
	key, dep := client.ObjectKeyFromObject(cache), &appsv1.Deployment{}
	// Ready is False until the rollout ends; envtest has no Deployment controller: play its part.
	require.Eventually(t, func() bool {
		return c.Get(ctx, key, cache) == nil && conditions.IsFalse(cache, conditions.Ready) && c.Get(ctx, key, dep) == nil
	}, time.Minute, 100*time.Millisecond)
	patch := client.MergeFrom(dep.DeepCopy())
	dep.Status = appsv1.DeploymentStatus{ObservedGeneration: dep.Generation, Replicas: 1, UpdatedReplicas: 1,
		ReadyReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: "True", Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "NewReplicaSetAvailable"}}}
	require.NoError(t, c.Status().Patch(ctx, dep, patch))
	require.Eventually(t, func() bool {
		return c.Get(ctx, key, cache) == nil && conditions.IsTrue(cache, conditions.Ready)
	}, time.Minute, 100*time.Millisecond)
}
