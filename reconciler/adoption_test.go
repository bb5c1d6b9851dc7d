package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/ownership"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// applyConfigStep applies the Widget's ConfigMap "<name>-config" and
// returns the error as any step would, a transient reconciler.Retry.
func applyConfigStep(opts ...ownership.ApplyOption) widgetStep {
	return widgetStep{Name: "config", Condition: "ConfigReady", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
		cm := corev1ac.ConfigMap(s.Object.Name+"-config", s.Object.Namespace).WithData(map[string]string{"k": "v"})
		if _, err := s.Apply(ctx, cm, opts...); err != nil {
			return reconciler.Retry(fmt.Errorf("applying ConfigMap: %w", err))
		}
		return reconciler.Continue()
	}}
}

// A ConfigMap by the name the Widget's step wants exists, created by
// someone else without a controller. The pass must not take it over: it
// stalls (no retry with backoff makes it adoptable), naming the object,
// and writes nothing to it; it looks again after StalledRecheck, and once
// the ConfigMap's owner has deleted it, the step creates its own.
func TestRefusedAdoptionStallsNamingTheObject(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}}, Steps: []widgetStep{applyConfigStep()}})
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w-config", Namespace: f.req.Namespace},
		Data: map[string]string{"k": "theirs"}}
	require.NoError(t, env.Client.Create(f.ctx, theirs))

	res, err := f.reconcile()
	require.NoError(t, err, "stalled, re-checked after StalledRecheck, not a terminal error nothing would ever retry")
	assert.Equal(t, reconciler.StalledRecheck, res.RequeueAfter)

	w := f.get()
	stalled := conditions.Get(w, conditions.Stalled)
	require.NotNil(t, stalled, "%+v", w.Status.Conditions)
	assert.Equal(t, metav1.ConditionTrue, stalled.Status)
	assert.Equal(t, reconciler.ReasonAdoptionRefused, stalled.Reason)
	assert.Contains(t, stalled.Message, "ConfigMap "+f.req.Namespace+"/w-config")
	cond := conditions.Get(w, "ConfigReady")
	require.NotNil(t, cond)
	assert.Equal(t, reconciler.ReasonAdoptionRefused, cond.Reason)
	assert.True(t, conditions.IsFalse(w, conditions.Ready))
	assert.Nil(t, conditions.Get(w, conditions.Reconciling))

	live := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(theirs), live))
	assert.Equal(t, theirs.ResourceVersion, live.ResourceVersion, "untouched")
	assert.Empty(t, live.OwnerReferences)

	// Its owner deletes it; the re-check creates the Widget's own.
	require.NoError(t, env.Client.Delete(f.ctx, live))
	require.Eventually(t, func() bool {
		_, err := f.reconcile()
		return err == nil && conditions.IsTrue(f.get(), conditions.Ready)
	}, 20*time.Second, 100*time.Millisecond)
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(theirs), live))
	assert.Equal(t, "v", live.Data["k"])
	assert.True(t, metav1.IsControlledBy(live, f.get()), "%+v", live.OwnerReferences)
}

// With ownership.Adopt the step takes the same ConfigMap over.
func TestAdoptOptionAdoptsThroughScope(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}}, Steps: []widgetStep{applyConfigStep(ownership.Adopt())}})
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w-config", Namespace: f.req.Namespace},
		Data: map[string]string{"k": "theirs"}}
	require.NoError(t, env.Client.Create(f.ctx, theirs))

	_, err := f.reconcile()
	require.NoError(t, err)
	w := f.get()
	assert.True(t, conditions.IsTrue(w, conditions.Ready))
	live := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(theirs), live))
	require.NotNil(t, metav1.GetControllerOf(live))
	assert.Equal(t, w.UID, metav1.GetControllerOf(live).UID)
	assert.Equal(t, "v", live.Data["k"])
}

// An object controlled by another owner is refused as before, but that is
// retried with backoff rather than stalled: the usual cause is an earlier
// incarnation of the same owner whose objects the garbage collector is
// still deleting.
func TestForeignControllerIsRetried(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}}, Steps: []widgetStep{applyConfigStep()}})
	other := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: f.req.Namespace}}
	require.NoError(t, env.Client.Create(f.ctx, other))
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "w-config", Namespace: f.req.Namespace,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(other, testv1.GroupVersion.WithKind("Widget"))}}}
	require.NoError(t, env.Client.Create(f.ctx, theirs))

	_, err := f.reconcile()
	require.Error(t, err)
	assert.False(t, errors.Is(err, reconcile.TerminalError(nil)), "retried: %v", err)
	var fce *ownership.ForeignControllerError
	assert.ErrorAs(t, err, &fce)
	w := f.get()
	assert.Nil(t, conditions.Get(w, conditions.Stalled))
	assert.True(t, conditions.IsTrue(w, conditions.Reconciling))
	live := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.req.Namespace, Name: "w-config"}, live))
	assert.Equal(t, theirs.ResourceVersion, live.ResourceVersion, "untouched")
}

// Issue #48 through a reconciler: Widget w keeps an archive in a ConfigMap
// it does not own (NotOwned); then a user creates Widget b, whose step
// applies a ConfigMap of that name as its own. The controller's field
// manager wrote the archive, but for no owner: b's pass must stall, naming
// it, and leave it alone, not become its controller (deleting b would then
// delete w's archive).
func TestArchiveWrittenForNoOwnerIsNotAdopted(t *testing.T) {
	step := widgetStep{Name: "archive", Condition: "Archived", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
		cm := corev1ac.ConfigMap("archive-x", s.Object.Namespace).WithData(map[string]string{"k": "v"})
		var opts []ownership.ApplyOption
		if s.Object.Name == "w" {
			opts = append(opts, ownership.NotOwned())
		}
		if _, err := s.Apply(ctx, cm, opts...); err != nil {
			return reconciler.Retry(fmt.Errorf("applying ConfigMap: %w", err))
		}
		return reconciler.Continue()
	}}
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}}, Steps: []widgetStep{step}})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.True(t, conditions.IsTrue(f.get(), conditions.Ready))
	key := client.ObjectKey{Namespace: f.req.Namespace, Name: "archive-x"}
	archive := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, key, archive))
	require.Empty(t, archive.OwnerReferences)

	b := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: f.req.Namespace}, Spec: testv1.WidgetSpec{Size: 1}}
	require.NoError(t, env.Client.Create(f.ctx, b))
	f.req.Name = "b"
	f.syncCached(archive)
	res, err := f.reconcile()
	require.NoError(t, err, "stalled, not an error")
	assert.Equal(t, reconciler.StalledRecheck, res.RequeueAfter)
	stalled := f.condition(conditions.Stalled)
	assert.Equal(t, reconciler.ReasonAdoptionRefused, stalled.Reason)
	assert.Contains(t, stalled.Message, "ConfigMap "+f.req.Namespace+"/archive-x")

	live := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, key, live))
	assert.Equal(t, archive.ResourceVersion, live.ResourceVersion, "untouched")
	assert.Empty(t, live.OwnerReferences, "b must not control w's archive")
}
