package controller_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest/cachelag"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

// TestNoReadyBeforeRollout replays, on every run, the race measured on
// `make demo`: after an image update the deployment step applies the new
// Deployment, and the informer cache still holds the previous generation,
// fully rolled out. Reads of Deployments trail by one version (the cache
// lag fault), so the rollout step would judge that old copy: without
// read-your-writes the WebApp said Ready=True for the new generation before
// any pod of it existed.
func TestNoReadyBeforeRollout(t *testing.T) {
	f := newFixture(t, webappv2Spec("registry.example.com/web:v1", 2))
	f.reconcile()
	f.rollOut(2)
	f.reconcile()
	require.True(t, f.app().Status.IsReady())

	f.useClient(reconcilertest.NewClient(f.m.Client,
		reconcilertest.WithCacheLag(f.m.Cache, cachelag.Lag{Kind: "Deployment", VersionsBehind: 1})))
	app := f.app()
	app.Spec.Image = "registry.example.com/web:v2"
	require.NoError(t, env.Client.Update(f.ctx, app))
	f.reconcile()

	assert.Equal(t, "registry.example.com/web:v2", f.deployment().Spec.Template.Spec.Containers[0].Image)
	app = f.app()
	ready := conditions.Get(app, conditions.Ready)
	require.NotNil(t, ready)
	assert.Equal(t, &app.Generation, app.Status.ObservedGeneration)
	assert.Equal(t, metav1.ConditionFalse, ready.Status, "Ready for generation %d before its rollout: %+v", app.Generation, ready)
	assert.False(t, app.Status.IsReady())
	assert.True(t, conditions.IsTrue(app, conditions.Reconciling))
}

// TestRegistryCreatedConcurrently: the WebApp's registry shard is not in
// the cache yet (another WebApp's pass created it a moment ago), so
// register creates it and gets AlreadyExists. The entry must still be
// written by this pass: the registry watch re-registers only WebApps whose
// pass already got past the register step. The same path puts back the
// labels of a shard someone unlabelled (which dropped it from the cache).
func TestRegistryCreatedConcurrently(t *testing.T) {
	f := newFixture(t, webappv2Spec("web:1", 1))
	registry := f.shard()
	other := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: registry.Name},
		Data:       map[string]string{"other.app": "http://app.other.svc:80"},
	}
	require.NoError(t, env.Client.Create(f.ctx, other))
	stale := interceptor.NewClient(withWatch{f.m.Client}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.ConfigMap); ok && key == registry {
				return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	f.useClient(reconcilertest.NewClient(stale))
	f.reconcile()

	reg := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, registry, reg))
	assert.Equal(t, "http://shop."+f.ns+".svc:80", reg.Data[f.ns+".shop"], "our entry is written after AlreadyExists")
	assert.Equal(t, "http://app.other.svc:80", reg.Data["other.app"], "the other WebApp's entry survives")
	assert.Equal(t, "shard", reg.Labels[controller.RegistryLabel], "the shard is labelled")
}

// withWatch adapts a manager's client (no Watch) to the interceptor.
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, apierrors.NewMethodNotSupported(schema.GroupResource{}, "watch")
}

func webappv2Spec(image string, replicas int32) webappv2.WebAppSpec {
	return webappv2.WebAppSpec{Image: image, Replicas: &replicas}
}
