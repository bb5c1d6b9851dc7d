package reconciler_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest/cachelag"
)

// configOf is the name of the ConfigMap a Widget waits for: its color.
func configOf(w *testv1.Widget) string { return w.Spec.Color }

// TestWaitForWakesOnTheReferencedObject runs a controller under a
// manager: while no Widget names a ConfigMap, none is cached; the first
// Widget that names an existing one finds it; a Widget naming a ConfigMap
// that does not exist waits with ConfigReady=False ConfigNotFound (and no
// requeue); creating the ConfigMap, with no change to the Widget, wakes it
// through the metadata-only watch and it continues. The ConfigMap is
// cached as its name, namespace and resourceVersion only.
func TestWaitForWakesOnTheReferencedObject(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	var after atomic.Int32
	var r *reconciler.Reconciler[*testv1.Widget]
	name := "widget-" + strings.ToLower(t.Name())
	env.StartManager(t, func(mgr manager.Manager) error {
		var err error
		r, err = reconciler.New(mgr, reconciler.Options[*testv1.Widget]{Name: name, Steps: []widgetStep{
			reconciler.WaitFor("config", "ConfigReady", &corev1.ConfigMap{}, configOf),
			{Name: "after", Run: func(_ context.Context, s *scope) reconciler.Outcome {
				if s.Object.Namespace == ns && s.Object.Name == "w" {
					after.Add(1)
				}
				return reconciler.Continue()
			}},
		}})
		if err != nil {
			return err
		}
		// Widgets other tests left behind are not this test's.
		b := ctrl.NewControllerManagedBy(mgr).Named(name).For(&testv1.Widget{}).
			WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns }))
		for _, src := range r.ReferenceSources() {
			b = b.WatchesRawSource(src)
		}
		return b.Complete(r)
	})
	require.Len(t, r.ReferenceSources(), 1)

	// A Widget that names nothing starts no informer.
	configMaps := &metav1.PartialObjectMetadataList{}
	configMaps.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	none := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "none", Namespace: ns}}
	require.NoError(t, env.Client.Create(ctx, none))
	cond := waitForCondition(t, client.ObjectKeyFromObject(none), "ConfigReady", metav1.ConditionTrue)
	assert.Equal(t, reconciler.ReasonNotConfigured, cond.Reason)
	var notCached *cache.ErrResourceNotCached
	require.ErrorAs(t, reconciler.ReferenceCache(r).List(ctx, configMaps), &notCached, "no ConfigMap is cached while no Widget names one")

	// The first Widget naming one waits for the list: it finds an
	// existing ConfigMap at once.
	require.NoError(t, env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "early-db", Namespace: ns}}))
	early := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "early", Namespace: ns}, Spec: testv1.WidgetSpec{Color: "early-db"}}
	require.NoError(t, env.Client.Create(ctx, early))
	cond = waitForCondition(t, client.ObjectKeyFromObject(early), "ConfigReady", metav1.ConditionTrue)
	assert.Equal(t, "ConfigFound", cond.Reason)
	require.NoError(t, reconciler.ReferenceCache(r).List(ctx, configMaps))

	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}, Spec: testv1.WidgetSpec{Color: "orders-db"}}
	require.NoError(t, env.Client.Create(ctx, w))
	key := client.ObjectKeyFromObject(w)
	cond = waitForCondition(t, key, "ConfigReady", metav1.ConditionFalse)
	assert.Equal(t, "ConfigNotFound", cond.Reason)
	assert.Equal(t, `config ConfigMap "orders-db" not found in namespace "`+ns+`"`, cond.Message)
	assert.Zero(t, after.Load(), "the steps after a waiting WaitFor do not run")

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orders-db", Namespace: ns,
		Labels:      map[string]string{"team": "orders"},
		Annotations: map[string]string{"note": strings.Repeat("x", 512)}},
		Data: map[string]string{"url": "postgres://orders"}}
	require.NoError(t, env.Client.Create(ctx, cm))
	cond = waitForCondition(t, key, "ConfigReady", metav1.ConditionTrue)
	assert.Equal(t, "ConfigFound", cond.Reason)
	assert.Equal(t, `config ConfigMap "orders-db" found`, cond.Message)
	assert.True(t, conditions.IsTrue(getWidget(t, key), conditions.Ready))
	assert.Positive(t, after.Load())

	// The cache holds the ConfigMap's identity only.
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	require.NoError(t, reconciler.ReferenceCache(r).Get(ctx, client.ObjectKeyFromObject(cm), cached))
	assert.Equal(t, "orders-db", cached.Name)
	assert.Equal(t, ns, cached.Namespace)
	assert.Equal(t, cm.ResourceVersion, cached.ResourceVersion)
	assert.Empty(t, cached.Labels)
	assert.Empty(t, cached.Annotations)
	assert.Empty(t, cached.UID)
	assert.Empty(t, cached.ManagedFields)
	err := reconciler.ReferenceCache(r).Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
	assert.Error(t, err, "the reference cache holds no typed ConfigMaps (their data)")

	// Deleting it wakes the Widget again.
	require.NoError(t, env.Client.Delete(ctx, cm))
	cond = waitForCondition(t, key, "ConfigReady", metav1.ConditionFalse)
	assert.Equal(t, "ConfigNotFound", cond.Reason)
}

// TestWaitForFollowsTheReferencedContent: a step after WaitFor copies
// what the referenced ConfigMap says into the Widget's status, reading it
// through s.Client. The typed ConfigMap reads trail the apiserver by one
// version (cachelag VersionsBehind 1: the manager's cache never holds the
// newest version, as on a pass the metadata-only watch starts before the
// typed informer delivers what woke it), so the step sees the version that
// woke the pass only if s.Client does not answer with an older cached copy.
// The ConfigMap changes five times in quick succession; the Widget must end
// at the last value, and the pass that follows it reads the ConfigMap from
// the API server (fails when WaitFor's wake-up reads the typed cache, which
// never wakes the Widget again).
func TestWaitForFollowsTheReferencedContent(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	name := "widget-" + strings.ToLower(t.Name())
	var apiReader *reconcilertest.Client
	env.StartManager(t, func(mgr manager.Manager) error {
		lagged := reconcilertest.NewClient(mgr.GetClient(),
			reconcilertest.WithCacheLag(mgr.GetCache(), cachelag.Lag{Kind: "ConfigMap", VersionsBehind: 1}))
		apiReader = reconcilertest.NewClient(env.Client)
		r, err := reconciler.New(mgr, reconciler.Options[*testv1.Widget]{Name: name, Client: lagged, APIReader: apiReader,
			Steps: []widgetStep{
				reconciler.WaitFor("config", "ConfigReady", &corev1.ConfigMap{}, configOf),
				{Name: "follow", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
					var cm corev1.ConfigMap
					if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Object.Namespace, Name: configOf(s.Object)}, &cm); err != nil {
						return reconciler.Retry(err)
					}
					s.Object.Status.Note = cm.Data["value"]
					return reconciler.Continue()
				}},
			}})
		if err != nil {
			return err
		}
		b := ctrl.NewControllerManagedBy(mgr).Named(name).For(&testv1.Widget{}).
			WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns }))
		for _, src := range r.ReferenceSources() {
			b = b.WatchesRawSource(src)
		}
		return b.Complete(r)
	})

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"value": "v0"}}
	require.NoError(t, env.Client.Create(ctx, cm))
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}, Spec: testv1.WidgetSpec{Color: "settings"}}
	require.NoError(t, env.Client.Create(ctx, w))
	key := client.ObjectKeyFromObject(w)
	require.Eventually(t, func() bool { return getWidget(t, key).Status.Note == "v0" }, 30*time.Second, 20*time.Millisecond,
		"the Widget never copied the ConfigMap it names")

	for _, value := range []string{"v1", "v2", "v3", "v4", "v5"} {
		cm.Data["value"] = value
		require.NoError(t, env.Client.Update(ctx, cm))
	}
	var note string
	assert.Eventually(t, func() bool {
		note = getWidget(t, key).Status.Note
		return note == "v5"
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, "v5", note, "the Widget follows what the ConfigMap says")
	assert.Positive(t, apiReader.Count("get", "ConfigMap"), "the cache is behind what woke the pass: the step's read goes to the API server")
}

func getWidget(t *testing.T, key client.ObjectKey) *testv1.Widget {
	t.Helper()
	w := &testv1.Widget{}
	require.NoError(t, env.Client.Get(context.Background(), key, w))
	return w
}

// waitForCondition polls the apiserver until the Widget's condition has
// status, and returns it.
func waitForCondition(t *testing.T, key client.ObjectKey, typ string, status metav1.ConditionStatus) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	require.Eventually(t, func() bool {
		c = conditions.Get(getWidget(t, key), typ)
		return c != nil && c.Status == status
	}, 30*time.Second, 20*time.Millisecond, "%s never became %s", typ, status)
	return c
}

// TestWaitForWithoutManagerReadsTheAPIReader: built without a manager, a
// WaitFor step reads the referenced object metadata-only through
// Options.APIReader; an empty name is NotConfigured.
func TestWaitForWithoutManagerReadsTheAPIReader(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		reconciler.WaitFor("orders-db", "DatabaseReady", &corev1.ConfigMap{}, configOf),
	}}, func(w *testv1.Widget) { w.Spec.Color = "orders" })
	assert.Empty(t, f.r.ReferenceSources())
	res, err := f.reconcile()
	require.NoError(t, err)
	assert.True(t, res.IsZero(), "a WaitFor step relies on its watch, not on requeues")
	db := conditions.Get(f.get(), "DatabaseReady")
	require.NotNil(t, db)
	assert.Equal(t, metav1.ConditionFalse, db.Status)
	assert.Equal(t, "OrdersDbNotFound", db.Reason)
	assert.Equal(t, 1, f.reader.Count("get", "ConfigMap"), "read through the APIReader:\n%s", f.reader)

	require.NoError(t, env.Client.Create(f.ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: f.req.Namespace}}))
	_, err = f.reconcile()
	require.NoError(t, err)
	db = conditions.Get(f.get(), "DatabaseReady")
	assert.Equal(t, metav1.ConditionTrue, db.Status)
	assert.Equal(t, "OrdersDbFound", db.Reason)
	f.assertIdempotent()

	w := f.get()
	w.Spec.Color = ""
	w.Spec.Size = 2
	require.NoError(t, env.Client.Update(f.ctx, w))
	_, err = f.reconcile()
	require.NoError(t, err)
	db = conditions.Get(f.get(), "DatabaseReady")
	assert.Equal(t, metav1.ConditionTrue, db.Status)
	assert.Equal(t, reconciler.ReasonNotConfigured, db.Reason)
	assert.Equal(t, "no orders-db configured", db.Message)
}

// TestWaitForValidation: New names the step whose declaration cannot work.
func TestWaitForValidation(t *testing.T) {
	scheme, err := testenv.NewScheme()
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	for name, tt := range map[string]struct {
		step widgetStep
		want string
	}{
		"no kind":      {reconciler.WaitFor[*testv1.Widget]("db", "", nil, configOf), "the kind and the name function are required"},
		"no name func": {reconciler.WaitFor[*testv1.Widget]("db", "", &corev1.ConfigMap{}, nil), "the kind and the name function are required"},
		"digit first":  {reconciler.WaitFor("1db", "", &corev1.ConfigMap{}, configOf), "the step name must start with a letter"},
		"unknown kind": {reconciler.WaitFor("db", "", &metav1.PartialObjectMetadata{}, configOf), "kind:"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := reconciler.New(nil, reconciler.Options[*testv1.Widget]{Name: "w", Steps: []widgetStep{tt.step},
				Client: c, APIReader: c, Scheme: scheme})
			require.Error(t, err)
			assert.Contains(t, err.Error(), `reconciler: Options.Steps[0] (WaitFor "`)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
