package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/ownership"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

// syncCached waits until the manager's cache holds the API server's copy of
// obj's object, or knows it is gone.
func (f *fixture) syncCached(obj client.Object) {
	f.t.Helper()
	key := client.ObjectKeyFromObject(obj)
	truth := obj.DeepCopyObject().(client.Object)
	err := env.Client.Get(f.ctx, key, truth)
	gone := apierrors.IsNotFound(err)
	if !gone {
		require.NoError(f.t, err)
	}
	require.Eventually(f.t, func() bool {
		cached := obj.DeepCopyObject().(client.Object)
		err := f.m.Client.Get(f.ctx, key, cached)
		if gone {
			return apierrors.IsNotFound(err)
		}
		return err == nil && cached.GetResourceVersion() == truth.GetResourceVersion()
	}, 30*time.Second, 5*time.Millisecond, "the cache never caught up with %s", key)
}

// condition returns the Widget's condition typ from the API server.
func (f *fixture) condition(typ string) *metav1.Condition {
	f.t.Helper()
	c := conditions.Get(f.get(), typ)
	require.NotNil(f.t, c, "condition %s", typ)
	return c
}

// archive keeps a copy of the owner's settings that must outlive it
// (docs/ownership.md).
func archive(ctx context.Context, s *scope) reconciler.Outcome {
	cm := corev1ac.ConfigMap(s.Object.Name+"-archive", s.Object.Namespace).WithData(map[string]string{"size": "1"})
	if _, err := s.Apply(ctx, cm, ownership.NotOwned()); err != nil {
		return reconciler.Retry(err)
	}
	return reconciler.Continue()
}

// quota applies a ResourceQuota and waits until it is enforced
// (docs/reconciler.md).
func quota(ctx context.Context, s *scope) reconciler.Outcome {
	rq := corev1ac.ResourceQuota("quota", s.Object.Namespace).
		WithSpec(corev1ac.ResourceQuotaSpec().WithHard(corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}))
	return s.ApplyAndWaitFor(ctx, rq, &corev1.ResourceQuota{}, func(o client.Object) (bool, string) {
		if len(o.(*corev1.ResourceQuota).Status.Hard) == 0 {
			return false, "waiting for the quota controller"
		}
		return true, "quota enforced"
	})
}

// deleteNamespace deletes the tenant's Namespace and waits until it is
// gone (docs/cluster-scoped.md). The Widget does not control it here.
func deleteNamespace(ctx context.Context, s *scope) reconciler.Outcome {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Object.Namespace + "-tenant"}}
	return s.DeleteAndWait(ctx, ns, reconciler.AllowNotControlled())
}

// finishNamespaceDeletion does what envtest has no namespace controller
// for: once the namespace is empty, it clears spec.finalizers through the
// finalize subresource, and the Namespace is gone.
func finishNamespaceDeletion(ctx context.Context, c client.Client, ns *corev1.Namespace) error {
	ns.Spec.Finalizers = nil
	return c.SubResource("finalize").Update(ctx, ns)
}

// An object applied with ownership.NotOwned has no owner reference (the
// garbage collector leaves it when the owner goes), is compared before it
// is written like an owned one (a second pass writes nothing), and an
// existing object someone else wrote is still not taken.
func TestApplyNotOwnedOutlivesTheOwnerAndSkipsUnchanged(t *testing.T) {
	opts := reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}},
		Steps: []widgetStep{{Name: "archive", Condition: "Archived", Run: archive}}}

	t.Run("applied once, outlives the owner", func(t *testing.T) {
		f := newFixture(t, opts)
		reconcilertest.ReconcileUntilQuiet(t, f.ctx, f.r, f.c, f.req, 5)
		key := client.ObjectKey{Namespace: f.req.Namespace, Name: "w-archive"}
		cm := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, key, cm))
		assert.Empty(t, cm.OwnerReferences, "an archive must not be garbage-collected with its owner")
		assert.Equal(t, "1", cm.Data["size"])
		f.assertIdempotent() // the second pass writes nothing

		require.NoError(t, env.Client.Delete(f.ctx, f.get()))
		f.sync()
		require.NoError(t, env.Client.Get(f.ctx, key, cm))
		assert.Empty(t, cm.OwnerReferences)
	})
	t.Run("an object someone else wrote is refused", func(t *testing.T) {
		f := newFixture(t, opts)
		require.NoError(t, env.Client.Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w-archive", Namespace: f.req.Namespace}}))
		res, err := f.reconcile()
		require.NoError(t, err)
		assert.Equal(t, reconciler.StalledRecheck, res.RequeueAfter)
		stalled := f.condition(conditions.Stalled)
		assert.Equal(t, reconciler.ReasonAdoptionRefused, stalled.Reason)
		assert.Contains(t, stalled.Message, "ConfigMap "+f.req.Namespace+"/w-archive")
		cm := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.req.Namespace, Name: "w-archive"}, cm))
		assert.Empty(t, cm.Data, "a refused object is not written")
	})
}

// Scope.APIReader is Options.APIReader: a step's read goes to the API
// server, not the cache.
func TestScopeAPIReaderReadsTheServer(t *testing.T) {
	var found error
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{{Name: "read", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
		found = s.APIReader.Get(ctx, client.ObjectKey{Namespace: s.Object.Namespace, Name: "just-created"}, &corev1.Secret{})
		return reconciler.Continue()
	}}}})
	require.NoError(t, env.Client.Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "just-created", Namespace: f.req.Namespace}}))
	_, err := f.reconcile()
	require.NoError(t, err)
	require.NoError(t, found)
	assert.Equal(t, 1, f.reader.Count(reconcilertest.Get, "Secret"), "the read went through Options.APIReader")
	assert.Zero(t, f.c.Count(reconcilertest.Get, "Secret"), "the cached client was not asked")
}

// DeleteAndWait deletes an owned object and waits until it is gone: at
// once without finalizers, after someone else's finalizer is removed
// otherwise; and it refuses an object the owner does not control.
func TestDeleteAndWait(t *testing.T) {
	newFix := func(t *testing.T, opts ...reconciler.DeleteOption) *fixture {
		return newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}},
			Steps: []widgetStep{{Name: "delete", Condition: "OldGone", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				return s.DeleteAndWait(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: s.Object.Namespace}}, opts...)
			}}}})
	}
	create := func(f *fixture, controlled bool, finalizers ...string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: f.req.Namespace, Finalizers: finalizers}}
		if controlled {
			cm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(f.get(), testv1.GroupVersion.WithKind("Widget"))}
		}
		require.NoError(t, env.Client.Create(f.ctx, cm))
		f.syncCached(cm)
		return cm
	}
	assertGone := func(f *fixture, cm *corev1.ConfigMap) {
		t.Helper()
		err := env.Client.Get(f.ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
		c := f.condition("OldGone")
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, reconciler.ReasonDeleted, c.Reason)
	}

	t.Run("no finalizer: gone in one pass", func(t *testing.T) {
		f := newFix(t)
		cm := create(f, true)
		_, err := f.reconcile()
		require.NoError(t, err)
		assertGone(f, cm)
		f.syncCached(cm)
		f.assertIdempotent()
	})
	t.Run("a finalizer held by someone else: Wait until it is removed", func(t *testing.T) {
		f := newFix(t)
		cm := create(f, true, "example.com/hold")
		_, err := f.reconcile()
		require.NoError(t, err)
		c := f.condition("OldGone")
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, reconciler.ReasonTerminating, c.Reason)
		assert.Contains(t, c.Message, "ConfigMap "+f.req.Namespace+"/old is being deleted; waiting for finalizers example.com/hold")
		f.syncCached(cm)
		f.assertIdempotent() // waiting deletes nothing twice, writes nothing

		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(cm), cm))
		cm.Finalizers = nil
		require.NoError(t, env.Client.Update(f.ctx, cm))
		f.syncCached(cm)
		_, err = f.reconcile()
		require.NoError(t, err)
		assertGone(f, cm)
	})
	t.Run("not controlled: refused, naming the object", func(t *testing.T) {
		f := newFix(t)
		cm := create(f, false)
		_, err := f.reconcile()
		require.ErrorIs(t, err, reconcile.TerminalError(nil))
		assert.Contains(t, err.Error(), "delete ConfigMap "+f.req.Namespace+"/old: it is not controlled by Widget "+f.req.String())
		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(cm), cm), "a refused object is not deleted")
	})
	// envtest runs no namespace controller: a deleted Namespace stays
	// Terminating until its spec.finalizers are cleared through the
	// finalize subresource, as that controller does once it is empty.
	t.Run("a Namespace in envtest: Terminating until finalized", func(t *testing.T) {
		f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.Namespace{}},
			Steps: []widgetStep{{Name: "delete", Condition: "OldGone", Run: deleteNamespace}}})
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.req.Namespace + "-tenant"}}
		require.NoError(t, env.Client.Create(f.ctx, ns))
		f.syncCached(ns)
		res, err := f.reconcile()
		require.NoError(t, err)
		c := f.condition("OldGone")
		assert.Equal(t, reconciler.ReasonTerminating, c.Reason)
		assert.Positive(t, res.RequeueAfter, "an object the owner does not control is looked at again")

		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(ns), ns))
		assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
		require.NoError(t, finishNamespaceDeletion(f.ctx, env.Client, ns))
		f.syncCached(ns)
		_, err = f.reconcile()
		require.NoError(t, err)
		assert.Equal(t, reconciler.ReasonDeleted, f.condition("OldGone").Reason)
	})
	t.Run("not controlled, allowed", func(t *testing.T) {
		f := newFix(t, reconciler.AllowNotControlled())
		cm := create(f, false)
		_, err := f.reconcile()
		require.NoError(t, err)
		assertGone(f, cm)
	})
}

// ApplyAndWaitFor judges a kind kstatus calls Current as soon as it exists
// with the step's own readiness: a ResourceQuota is ready once the quota
// controller filled status.hard. envtest runs no quota controller, so the
// test writes status.hard as it would.
func TestApplyAndWaitForJudgesReadinessKstatusDoesNot(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ResourceQuota{}},
		Steps: []widgetStep{{Name: "quota", Condition: "QuotaReady", Run: quota}}})
	_, err := f.reconcile()
	require.NoError(t, err)
	c := f.condition("QuotaReady")
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, reconciler.ReasonInProgress, c.Reason)
	assert.Equal(t, "ResourceQuota "+f.req.Namespace+"/quota: waiting for the quota controller", c.Message)

	rq := &corev1.ResourceQuota{}
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.req.Namespace, Name: "quota"}, rq))
	rq.Status.Hard = rq.Spec.Hard
	rq.Status.Used = corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}
	require.NoError(t, env.Client.Status().Update(f.ctx, rq))
	f.syncCached(rq)
	_, err = f.reconcile()
	require.NoError(t, err)
	c = f.condition("QuotaReady")
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, reconciler.ReasonCurrent, c.Reason)
	assert.Equal(t, "quota enforced", c.Message)
}

// Options.ReadyReason and ReadyMessage are Ready=True's; New refuses an
// invalid reason, naming the field.
func TestReadyReasonFromOptions(t *testing.T) {
	var ran []string
	f := newFixture(t, reconciler.Options[*testv1.Widget]{ReadyReason: "TenantReady", ReadyMessage: "namespace, quota and access in place",
		Steps: []widgetStep{continueStep("a", "A", &ran)}})
	_, err := f.reconcile()
	require.NoError(t, err)
	ready := f.condition(conditions.Ready)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, "TenantReady", ready.Reason)
	assert.Equal(t, "namespace, quota and access in place", ready.Message)

	opts := f.opts
	opts.ReadyReason = "not a reason"
	_, err = reconciler.New(nil, opts)
	assert.ErrorContains(t, err, "reconciler: Options.ReadyReason:")
}
