package reconciler_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

// createConfigMaps creates ConfigMaps in f's namespace, labelled app, with
// holdFinalizer (which no controller removes) on those in held, and removes that finalizer when the test
// ends.
func createConfigMaps(t *testing.T, f *fixture, labels map[string]string, held []string, names ...string) []*corev1.ConfigMap {
	t.Helper()
	var out []*corev1.ConfigMap
	for _, name := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.req.Namespace, Labels: labels}}
		if slices.Contains(held, name) {
			cm.Finalizers = []string{holdFinalizer}
			t.Cleanup(func() {
				_ = env.Client.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			})
		}
		require.NoError(t, env.Client.Create(f.ctx, cm))
		out = append(out, cm)
	}
	return out
}

// listed returns the names of the ConfigMaps in list, deleting ones marked
// with a "-".
func listed(list *corev1.ConfigMapList) []string {
	var names []string
	for _, cm := range list.Items {
		if cm.DeletionTimestamp != nil {
			names = append(names, cm.Name+"-")
		} else {
			names = append(names, cm.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestPassDoesNotReadWhatItDeleted: a step deletes objects whose cached
// copies the cache keeps (frozen); a later step of the same pass must not
// read those copies back as if nothing happened. The object without
// finalizers is gone (Get: NotFound, List: absent); the one with a
// finalizer is deleting, and reads show it so; one re-created by someone
// else after the deletion shows as the new object. Each costs at most one
// read of the API server.
func TestPassDoesNotReadWhatItDeleted(t *testing.T) {
	var fc frozenCache
	var plainErr error
	var held, recreated corev1.ConfigMap
	var all, byLabel []string
	var newUID types.UID
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps: []widgetStep{
			{Name: "delete", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				for _, name := range []string{"plain", "held", "recreated"} {
					var cm corev1.ConfigMap
					if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Object.Namespace, Name: name}, &cm); err != nil {
						return reconciler.Retry(err)
					}
					if err := s.Client.Delete(ctx, &cm); err != nil {
						return reconciler.Retry(err)
					}
				}
				// Another writer creates the object again.
				again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "recreated", Namespace: s.Object.Namespace}}
				if err := env.Client.Create(ctx, again); err != nil {
					return reconciler.Retry(err)
				}
				newUID = again.UID
				return reconciler.Continue()
			}},
			{Name: "read", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				ns := s.Object.Namespace
				plainErr = s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, &corev1.ConfigMap{})
				if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "held"}, &held); err != nil {
					return reconciler.Retry(err)
				}
				if err := s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "recreated"}, &recreated); err != nil {
					return reconciler.Retry(err)
				}
				var list corev1.ConfigMapList
				if err := s.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
					return reconciler.Retry(err)
				}
				all = listed(&list)
				if err := s.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"app": "x"}); err != nil {
					return reconciler.Retry(err)
				}
				byLabel = listed(&list)
				return reconciler.Continue()
			}},
		},
	})
	cms := createConfigMaps(t, f, map[string]string{"app": "x"}, []string{"held"}, "plain", "held", "recreated")
	objs := make([]client.Object, len(cms))
	for i, cm := range cms {
		objs[i] = cm
	}
	fc.freeze(t, f.ctx, objs...)
	f.useClient(fc.client(f.m.Client))

	_, err := f.reconcile()
	require.NoError(t, err)
	assert.True(t, apierrors.IsNotFound(plainErr), "Get of an object the pass deleted: %v", plainErr)
	assert.NotNil(t, held.DeletionTimestamp, "Get of a deleted object that has a finalizer shows it deleting")
	assert.Equal(t, newUID, recreated.UID, "Get of an object re-created since the pass deleted it shows the new one")
	assert.Equal(t, []string{"held-", "recreated"}, all, "List after the deletions")
	assert.Equal(t, []string{"held-"}, byLabel, "List by label after the deletions (the new object has no label)")
	assert.Equal(t, 3, f.reader.Count(reconcilertest.Get, "ConfigMap"), "one read of the API server per deleted object:\n%s", f.reader)
}

// TestPassDoesNotListWhatItDeletedAll: a DeleteAllOf by label, after a step
// applied an object it covers. Later reads of the pass must return neither
// the cached copies (frozen) nor the applied one, except a deleting one,
// shown deleting; what it does not cover stays.
func TestPassDoesNotListWhatItDeletedAll(t *testing.T) {
	var fc frozenCache
	var all []string
	var appliedErr, cachedErr error
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}},
		Steps: []widgetStep{
			{Name: "apply", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				if _, err := s.Apply(ctx, corev1ac.ConfigMap("applied", s.Object.Namespace).WithLabels(map[string]string{"app": "x"})); err != nil {
					return reconciler.Retry(err)
				}
				return reconciler.Continue()
			}},
			{Name: "delete", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				if err := s.Client.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(s.Object.Namespace), client.MatchingLabels{"app": "x"}); err != nil {
					return reconciler.Retry(err)
				}
				return reconciler.Continue()
			}},
			{Name: "read", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				ns := s.Object.Namespace
				var list corev1.ConfigMapList
				if err := s.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
					return reconciler.Retry(err)
				}
				all = listed(&list)
				appliedErr = s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "applied"}, &corev1.ConfigMap{})
				cachedErr = s.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cached"}, &corev1.ConfigMap{})
				return reconciler.Continue()
			}},
		},
	})
	covered := createConfigMaps(t, f, map[string]string{"app": "x"}, []string{"held"}, "cached", "held")
	other := createConfigMaps(t, f, map[string]string{"app": "y"}, nil, "other")
	fc.freeze(t, f.ctx, covered[0], covered[1], other[0])
	f.useClient(fc.client(f.m.Client))

	_, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, []string{"held-", "other"}, all, "List after DeleteAllOf")
	assert.True(t, apierrors.IsNotFound(appliedErr), "Get of an object the pass applied, then deleted: %v", appliedErr)
	assert.True(t, apierrors.IsNotFound(cachedErr), "Get of a cached object the pass deleted: %v", cachedErr)
}

// TestPassReadsItsOwnTypedApply: a step applies a typed apply configuration
// through s.Client (not s.Apply, which sends an unstructured one: see
// TestPassReadsItsOwnWrites); a later step reads the answer, not the cached
// copy.
func TestPassReadsItsOwnTypedApply(t *testing.T) {
	var fc frozenCache
	var got, listedV string
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps: []widgetStep{
			{Name: "apply", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				cm := corev1ac.ConfigMap("cfg", s.Object.Namespace).WithData(map[string]string{"v": "2"})
				if err := s.Client.Apply(ctx, cm, client.FieldOwner("test"), client.ForceOwnership); err != nil {
					return reconciler.Retry(err)
				}
				return reconciler.Continue()
			}},
			{Name: "read", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				var cm corev1.ConfigMap
				if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Object.Namespace, Name: "cfg"}, &cm); err != nil {
					return reconciler.Retry(err)
				}
				got = cm.Data["v"]
				var list corev1.ConfigMapList
				if err := s.Client.List(ctx, &list, client.InNamespace(s.Object.Namespace)); err != nil {
					return reconciler.Retry(err)
				}
				for _, item := range list.Items {
					if item.Name == "cfg" {
						listedV = item.Data["v"]
					}
				}
				return reconciler.Continue()
			}},
		},
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: f.req.Namespace}, Data: map[string]string{"v": "1"}}
	require.NoError(t, env.Client.Create(f.ctx, cm))
	fc.freeze(t, f.ctx, cm)
	f.useClient(fc.client(f.m.Client))

	_, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, "2", got, "Get after a typed Apply in the same pass returns the applied object")
	assert.Equal(t, "2", listedV, "List after a typed Apply in the same pass returns the applied object")
}

// TestPassBehindTheCacheReadsItsOwnObjectFresh: a pass behind an earlier
// one acts on the API server's copy of its object; a step that reads the
// object through s.Client must get that copy too, not the older cached one.
func TestPassBehindTheCacheReadsItsOwnObjectFresh(t *testing.T) {
	var fc frozenCache
	var read string
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "a", Condition: "AReady", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			var w testv1.Widget
			if err := s.Client.Get(ctx, client.ObjectKeyFromObject(s.Object), &w); err != nil {
				return reconciler.Retry(err)
			}
			read = w.ResourceVersion
			return reconciler.ContinueWith("Up", "up")
		}},
	}})
	f.sync()
	f.useClient(fc.client(f.m.Client))
	fc.freeze(t, f.ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.req.Namespace, Name: f.req.Name}})
	_, err := f.r.Reconcile(f.ctx, f.req)
	require.NoError(t, err)
	require.Equal(t, 1, f.c.Mutations(), "the first pass writes status:\n%s", f.c)
	written := f.get().ResourceVersion

	// The cache still holds the copy without status: the pass reads the
	// API server's.
	f.reader.Reset()
	_, err = f.r.Reconcile(f.ctx, f.req)
	require.NoError(t, err)
	require.Equal(t, 1, f.reader.Count(reconcilertest.Get, "Widget"), "the pass read the API server:\n%s", f.reader)
	assert.Equal(t, written, read, "the step read the copy the pass acts on, not the cached one")
}
