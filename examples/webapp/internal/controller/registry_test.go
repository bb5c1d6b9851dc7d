package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

// TestRegistryDriftIsRepaired: the route registry is shared, so someone
// else may point a WebApp's entry elsewhere or remove it. Found by the e2e
// chaos suite's competing writer (scenario 4): nothing watched the
// registry, so such an entry stayed wrong until the WebApp itself changed,
// possibly forever. The controller now watches it and re-registers the
// WebApps whose entry drifted.
func TestRegistryDriftIsRepaired(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx := context.Background()
	env.StartManager(t, func(mgr manager.Manager) error {
		_, err := controller.Setup(mgr, ns)
		return err
	})
	app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns}, Spec: webappv2Spec("registry.example.com/web:v1", 1)}
	require.NoError(t, env.Client.Create(ctx, app))
	key := types.NamespacedName{Namespace: ns, Name: "shop"}

	// Play the Deployment controller (envtest runs none) until Ready.
	require.Eventually(t, func() bool {
		d := &appsv1.Deployment{}
		if env.Client.Get(ctx, key, d) != nil {
			return false
		}
		if d.Status.ObservedGeneration != d.Generation {
			d.Status = rolledOut(d, *d.Spec.Replicas)
			_ = env.Client.Status().Update(ctx, d) // a conflict is retried
			return false
		}
		w := &webappv2.WebApp{}
		return env.Client.Get(ctx, key, w) == nil && conditions.IsTrue(w, conditions.Ready)
	}, 30*time.Second, 50*time.Millisecond, "the WebApp never became Ready")

	entry := ns + ".shop"
	want := "http://shop." + ns + ".svc:80"
	registry := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.RegistryName}}
	entryIs := func(value string, present bool) func() bool {
		return func() bool {
			cm := &corev1.ConfigMap{}
			if env.Client.Get(ctx, client.ObjectKeyFromObject(registry), cm) != nil {
				return false
			}
			got, ok := cm.Data[entry]
			return ok == present && got == value
		}
	}
	require.Eventually(t, entryIs(want, true), 10*time.Second, 50*time.Millisecond, "the WebApp was never registered")

	for _, drift := range []string{
		`{"data":{"` + entry + `":"http://hijacked.example.com"}}`, // pointed elsewhere
		`{"data":{"` + entry + `":null}}`,                          // removed
	} {
		require.NoError(t, env.Client.Patch(ctx, registry, client.RawPatch(types.MergePatchType, []byte(drift))))
		require.Eventually(t, entryIs(want, true), 10*time.Second, 50*time.Millisecond, "registry drift %s was not repaired", drift)
	}
}

// TestDeregisterWithLaggingCache: a WebApp deleted right after its pass
// registered it, while the cached registry does not show that entry yet.
// Found by the e2e chaos suite (scenario 4, creates and deletes under
// load): cleanup looked the key up in the cache, found nothing to remove,
// and dropped the finalizer, leaving an entry that routed to a deleted
// WebApp forever. The registry here trails by one version, every run.
func TestDeregisterWithLaggingCache(t *testing.T) {
	f := newFixture(t, webappv2Spec("registry.example.com/web:v1", 1))
	ctx, ns := f.ctx, f.ns
	f.useClient(reconcilertest.NewClient(f.m.Client,
		reconcilertest.WithCacheLag(f.m.Cache, reconcilertest.Lag{Kind: "ConfigMap", Events: 1})))
	// The registry exists (another WebApp's entry), so registering is an
	// update of it, which the lag holds back.
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.RegistryName},
		Data:       map[string]string{"other.app": "http://app.other.svc:80"},
	}))
	f.reconcile()
	registry := types.NamespacedName{Namespace: ns, Name: controller.RegistryName}
	reg := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, registry, reg))
	require.Contains(t, reg.Data, ns+".shop", "registered")

	require.NoError(t, env.Client.Delete(ctx, f.app()))
	f.reconcile()

	require.NoError(t, env.Client.Get(ctx, registry, reg))
	require.NotContains(t, reg.Data, ns+".shop", "the entry of the deleted WebApp is removed")
	require.Equal(t, "http://app.other.svc:80", reg.Data["other.app"], "the other WebApp's entry survives")
	err := env.Client.Get(ctx, f.req.NamespacedName, &webappv2.WebApp{})
	require.True(t, apierrors.IsNotFound(err), "the WebApp is gone: %v", err)
}
