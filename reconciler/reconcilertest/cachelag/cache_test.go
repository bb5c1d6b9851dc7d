package cachelag_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest/cachelag"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

// Unit tests: a fake client and fake informers, whose events the test
// sends itself. They run under -short.

func newFakeLagged(t *testing.T, lags ...cachelag.Lag) (*reconcilertest.Client, client.Client, *informertest.FakeInformers) {
	t.Helper()
	s, err := testenv.NewScheme()
	require.NoError(t, err)
	informers := &informertest.FakeInformers{Scheme: s}
	base := fake.NewClientBuilder().WithScheme(s).Build()
	return reconcilertest.NewClient(base, reconcilertest.WithCacheLag(informers, lags...)), base, informers
}

func configMap(ns, name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       map[string]string{"k": value},
	}
}

func readCM(ctx context.Context, r client.Reader, key client.ObjectKey) (string, error) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, key, cm)
	return cm.Data["k"], err
}

// setCM updates the ConfigMap through w from a fresh read through r: a
// read through a lagged client would carry a stale resourceVersion and
// conflict.
func setCM(ctx context.Context, r client.Reader, w client.Client, key client.ObjectKey, value string) error {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, key, cm); err != nil {
		return err
	}
	cm.Data = map[string]string{"k": value}
	return w.Update(ctx, cm)
}

func TestCacheLagFake(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "ns", Name: "cm"}

	t.Run("VersionsBehind 1 reads the version before the last write", func(t *testing.T) {
		c, base, _ := newFakeLagged(t, cachelag.Lag{Kind: "ConfigMap", VersionsBehind: 1})
		require.NoError(t, c.Create(ctx, configMap("ns", "cm", "v0")))
		got, err := readCM(ctx, c, key)
		require.NoError(t, err)
		assert.Equal(t, "v0", got, "an object with one known version reads as that version")
		for _, step := range []struct{ write, want string }{{"v1", "v0"}, {"v2", "v1"}} {
			require.NoError(t, setCM(ctx, base, c, key, step.write))
			for range 5 {
				got, err := readCM(ctx, c, key)
				require.NoError(t, err)
				assert.Equal(t, step.want, got)
			}
		}
		got, err = readCM(ctx, base, key)
		require.NoError(t, err)
		assert.Equal(t, "v2", got, "the apiserver has the newest")
	})

	t.Run("Delay hides a new object", func(t *testing.T) {
		c, base, _ := newFakeLagged(t, cachelag.Lag{Kind: "ConfigMap", Delay: time.Hour})
		require.NoError(t, c.Create(ctx, configMap("ns", "cm", "v0")))
		_, err := readCM(ctx, c, key)
		assert.True(t, apierrors.IsNotFound(err), "got %v", err)
		var list corev1.ConfigMapList
		require.NoError(t, c.List(ctx, &list))
		assert.Empty(t, list.Items)
		got, err := readCM(ctx, base, key)
		require.NoError(t, err)
		assert.Equal(t, "v0", got, "the apiserver has it")
	})

	t.Run("informer events are versions and a deletion is a tombstone", func(t *testing.T) {
		c, _, informers := newFakeLagged(t, cachelag.Lag{Kind: "ConfigMap"})
		_, err := readCM(ctx, c, key) // registers the handler
		require.True(t, apierrors.IsNotFound(err), "got %v", err)
		fi, err := informers.FakeInformerFor(ctx, &corev1.ConfigMap{})
		require.NoError(t, err)
		at := func(rv, value string) *corev1.ConfigMap {
			cm := configMap("ns", "cm", value)
			cm.ResourceVersion = rv
			return cm
		}
		fi.Add(at("10", "a"))
		got, err := readCM(ctx, c, key)
		require.NoError(t, err)
		assert.Equal(t, "a", got)
		fi.Update(at("10", "a"), at("12", "b"))
		fi.Update(at("10", "a"), at("11", "late"))
		got, err = readCM(ctx, c, key)
		require.NoError(t, err)
		assert.Equal(t, "b", got, "versions are ordered by resourceVersion, and reads never go back")
		fi.Delete(at("13", "b"))
		_, err = readCM(ctx, c, key)
		assert.True(t, apierrors.IsNotFound(err), "got %v", err)
		fi.Update(at("10", "a"), at("12", "b"))
		_, err = readCM(ctx, c, key)
		assert.True(t, apierrors.IsNotFound(err), "a late event does not bring a deleted object back")
	})

	t.Run("field selectors are refused", func(t *testing.T) {
		c, _, _ := newFakeLagged(t, cachelag.Lag{Kind: "ConfigMap"})
		err := c.List(ctx, &corev1.ConfigMapList{}, client.MatchingFields{"metadata.name": "cm"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "field selector")
	})
}

// Integration tests: a real apiserver and a started manager, whose
// informers deliver the versions other clients write.

// lagCase writes a value into an object of one kind and reads it back.
type lagCase struct {
	name string
	kind string
	// cached wraps the manager's cached client; otherwise the apiserver
	// client, so that a read the lag did not answer would see the newest
	// version at once.
	cached  bool
	initial string // the value create leaves
	create  func(ctx context.Context, c client.Client, ns string) (client.ObjectKey, error)
	write   func(ctx context.Context, r client.Reader, c client.Client, key client.ObjectKey, value string) error
	read    func(ctx context.Context, r client.Reader, key client.ObjectKey) (string, error)
}

func createCM(ctx context.Context, c client.Client, ns string) (client.ObjectKey, error) {
	cm := configMap(ns, "cm", "v0")
	return client.ObjectKeyFromObject(cm), c.Create(ctx, cm)
}

func createWidget(ctx context.Context, c client.Client, ns string) (client.ObjectKey, error) {
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}, Spec: testv1.WidgetSpec{Color: "v0"}}
	return client.ObjectKeyFromObject(w), c.Create(ctx, w)
}

func readWidgetColor(ctx context.Context, r client.Reader, key client.ObjectKey) (string, error) {
	w := &testv1.Widget{}
	err := r.Get(ctx, key, w)
	return w.Spec.Color, err
}

// applyCM server-side applies data.k = value as an unstructured apply
// configuration.
func applyCM(ctx context.Context, c client.Client, key client.ObjectKey, value string) error {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": key.Name, "namespace": key.Namespace},
		"data":     map[string]any{"k": value},
	}}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("test"), client.ForceOwnership)
}

var lagCases = []lagCase{
	{
		name: "ConfigMap update, manager's cached client", kind: "ConfigMap", cached: true, initial: "v0",
		create: createCM, write: setCM, read: readCM,
	},
	{
		name: "ConfigMap update, apiserver client", kind: "ConfigMap", initial: "v0",
		create: createCM, write: setCM, read: readCM,
	},
	{
		name: "ConfigMap unstructured server-side apply", kind: "ConfigMap", cached: true, initial: "v0",
		create: func(ctx context.Context, c client.Client, ns string) (client.ObjectKey, error) {
			key := client.ObjectKey{Namespace: ns, Name: "cm"}
			return key, applyCM(ctx, c, key, "v0")
		},
		write: func(ctx context.Context, _ client.Reader, c client.Client, key client.ObjectKey, value string) error {
			return applyCM(ctx, c, key, value)
		},
		read: readCM,
	},
	{
		name: "ConfigMap typed apply configuration", kind: "ConfigMap", cached: true, initial: "v0",
		create: createCM,
		write: func(ctx context.Context, _ client.Reader, c client.Client, key client.ObjectKey, value string) error {
			return c.Apply(ctx, corev1ac.ConfigMap(key.Name, key.Namespace).WithData(map[string]string{"k": value}),
				client.FieldOwner("test"), client.ForceOwnership)
		},
		read: readCM,
	},
	{
		name: "Widget spec update", kind: "Widget", cached: true, initial: "v0",
		create: createWidget,
		write: func(ctx context.Context, r client.Reader, c client.Client, key client.ObjectKey, value string) error {
			w := &testv1.Widget{}
			if err := r.Get(ctx, key, w); err != nil {
				return err
			}
			w.Spec.Color = value
			return c.Update(ctx, w)
		},
		read: readWidgetColor,
	},
	{
		name: "Widget status merge patch", kind: "Widget", cached: true, initial: "",
		create: createWidget,
		write: func(ctx context.Context, r client.Reader, c client.Client, key client.ObjectKey, value string) error {
			w := &testv1.Widget{}
			if err := r.Get(ctx, key, w); err != nil {
				return err
			}
			base := w.DeepCopy()
			w.Status.Note = value
			return c.Status().Patch(ctx, w, client.MergeFrom(base))
		},
		read: func(ctx context.Context, r client.Reader, key client.ObjectKey) (string, error) {
			w := &testv1.Widget{}
			err := r.Get(ctx, key, w)
			return w.Status.Note, err
		},
	},
	{
		name: "Widget written typed, read unstructured", kind: "Widget", cached: true, initial: "v0",
		create: createWidget,
		write: func(ctx context.Context, r client.Reader, c client.Client, key client.ObjectKey, value string) error {
			w := &testv1.Widget{}
			if err := r.Get(ctx, key, w); err != nil {
				return err
			}
			w.Spec.Color = value
			return c.Update(ctx, w)
		},
		read: func(ctx context.Context, r client.Reader, key client.ObjectKey) (string, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(testv1.GroupVersion.WithKind("Widget"))
			err := r.Get(ctx, key, u)
			color, _, _ := unstructured.NestedString(u.Object, "spec", "color")
			return color, err
		},
	},
}

// TestCacheLagVersionsBehindIsDeterministic: with VersionsBehind 1, after a write through
// the client, every read returns the version before it, also once the
// manager's cache has the newest version. Without the lag, the apiserver
// client case would read the newest version at once.
func TestCacheLagVersionsBehindIsDeterministic(t *testing.T) {
	testenv.Require(t)
	mgr := env.StartManager(t)
	for _, tt := range lagCases {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ns := env.Namespace(t)
			base := env.Client
			if tt.cached {
				base = mgr.Client
			}
			c := reconcilertest.NewClient(base, reconcilertest.WithCacheLag(mgr.Cache, cachelag.Lag{Kind: tt.kind, VersionsBehind: 1}))

			key, err := tt.create(ctx, c, ns)
			require.NoError(t, err)
			got, err := tt.read(ctx, c, key)
			require.NoError(t, err)
			assert.Equal(t, tt.initial, got, "one known version: that version")

			prev := tt.initial
			for _, value := range []string{"v1", "v2"} {
				require.NoError(t, tt.write(ctx, mgr.APIReader, c, key, value))
				for range 20 {
					got, err := tt.read(ctx, c, key)
					require.NoError(t, err)
					require.Equal(t, prev, got, "after writing %s", value)
				}
				truth, err := tt.read(ctx, mgr.APIReader, key)
				require.NoError(t, err)
				require.Equal(t, value, truth, "the apiserver has the newest version")
				prev = value
			}

			// The manager's cache catches up; the lag does not.
			require.Eventually(t, func() bool {
				got, err := tt.read(ctx, mgr.Cache, key)
				return err == nil && got == "v2"
			}, 30*time.Second, 20*time.Millisecond)
			got, err = tt.read(ctx, c, key)
			require.NoError(t, err)
			assert.Equal(t, "v1", got)
			assert.GreaterOrEqual(t, c.Count(reconcilertest.Get, tt.kind), 42, "lagged reads are counted")
		})
	}
}

// TestCacheLagDelay: a version is hidden until Delay after the client
// observed it, then read.
func TestCacheLagDelay(t *testing.T) {
	testenv.Require(t)
	mgr := env.StartManager(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const delay = 2 * time.Second
	c := reconcilertest.NewClient(env.Client, reconcilertest.WithCacheLag(mgr.Cache, cachelag.Lag{Kind: "ConfigMap", Delay: delay}))
	key := client.ObjectKey{Namespace: ns, Name: "cm"}

	// Reads before the delay passed see the previous state; reads after it
	// the new one. A slow machine may only ever see the latter, so the
	// assertion on a read is conditional on the time it was made at.
	written := time.Now()
	require.NoError(t, c.Create(ctx, configMap(ns, "cm", "v0")))
	_, err := readCM(ctx, c, key)
	if time.Since(written) < delay {
		require.True(t, apierrors.IsNotFound(err), "a new object is NotFound until the delay passed; got %v", err)
		var list corev1.ConfigMapList
		require.NoError(t, c.List(ctx, &list, client.InNamespace(ns)))
		if time.Since(written) < delay {
			assert.Empty(t, list.Items)
		}
	}
	require.Eventually(t, func() bool {
		got, err := readCM(ctx, c, key)
		return err == nil && got == "v0"
	}, 30*time.Second, 20*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(written), delay)

	written = time.Now()
	require.NoError(t, setCM(ctx, env.Client, c, key, "v1"))
	got, err := readCM(ctx, c, key)
	require.NoError(t, err)
	if time.Since(written) < delay {
		assert.Equal(t, "v0", got)
	}
	require.Eventually(t, func() bool {
		got, err := readCM(ctx, c, key)
		return err == nil && got == "v1"
	}, 30*time.Second, 20*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(written), delay)
}

// TestCacheLagList: List returns each object's lagged version, filtered by
// namespace and labels.
func TestCacheLagList(t *testing.T) {
	testenv.Require(t)
	mgr := env.StartManager(t)
	ctx := context.Background()
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	c := reconcilertest.NewClient(mgr.Client, reconcilertest.WithCacheLag(mgr.Cache, cachelag.Lag{Kind: "ConfigMap", VersionsBehind: 1}))
	app := ns1 // a label value no other test uses
	for _, o := range []struct{ ns, name, app string }{{ns1, "a", app}, {ns1, "b", "other"}, {ns2, "c", app}} {
		cm := configMap(o.ns, o.name, "v0")
		cm.Labels = map[string]string{"app": o.app}
		require.NoError(t, c.Create(ctx, cm))
		require.NoError(t, setCM(ctx, mgr.APIReader, c, client.ObjectKeyFromObject(cm), "v1"))
	}

	type item struct{ ns, name, value string }
	tests := []struct {
		name string
		opts []client.ListOption
		want []item
	}{
		{"namespace", []client.ListOption{client.InNamespace(ns1)}, []item{{ns1, "a", "v0"}, {ns1, "b", "v0"}}},
		{"labels in every namespace", []client.ListOption{client.MatchingLabels{"app": app}}, []item{{ns1, "a", "v0"}, {ns2, "c", "v0"}}},
		{"namespace and labels", []client.ListOption{client.InNamespace(ns2), client.MatchingLabels{"app": app}}, []item{{ns2, "c", "v0"}}},
		{"no match", []client.ListOption{client.InNamespace(ns2), client.MatchingLabels{"app": "other"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// List sorts by namespace, then name; the namespaces' names are
			// random.
			sort.Slice(tt.want, func(i, j int) bool {
				return tt.want[i].ns < tt.want[j].ns || tt.want[i].ns == tt.want[j].ns && tt.want[i].name < tt.want[j].name
			})
			var typed corev1.ConfigMapList
			require.NoError(t, c.List(ctx, &typed, tt.opts...))
			var got []item
			for _, cm := range typed.Items {
				if cm.Namespace == ns1 || cm.Namespace == ns2 {
					got = append(got, item{cm.Namespace, cm.Name, cm.Data["k"]})
				}
			}
			assert.Equal(t, tt.want, got, "typed")

			u := &unstructured.UnstructuredList{}
			u.SetAPIVersion("v1")
			u.SetKind("ConfigMapList")
			require.NoError(t, c.List(ctx, u, tt.opts...))
			got = nil
			for _, o := range u.Items {
				if o.GetNamespace() == ns1 || o.GetNamespace() == ns2 {
					v, _, _ := unstructured.NestedString(o.Object, "data", "k")
					got = append(got, item{o.GetNamespace(), o.GetName(), v})
				}
			}
			assert.Equal(t, tt.want, got, "unstructured")

			pm := &metav1.PartialObjectMetadataList{}
			pm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
			require.NoError(t, c.List(ctx, pm, tt.opts...))
			got = nil
			for _, o := range pm.Items {
				if o.Namespace == ns1 || o.Namespace == ns2 {
					got = append(got, item{o.Namespace, o.Name, "v0"})
				}
			}
			assert.Equal(t, tt.want, got, "metadata")
		})
	}

	err := c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns1), client.MatchingFields{"metadata.name": "a"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "field selector")
}

// TestCacheLagTombstone: a deletion is a version: once it is the version a
// read returns, the object is NotFound and missing from List.
func TestCacheLagTombstone(t *testing.T) {
	testenv.Require(t)
	mgr := env.StartManager(t)
	tests := []struct {
		name     string
		behind   int
		recreate bool // after the delete; with VersionsBehind 1 the tombstone is then one version back
	}{
		{"VersionsBehind 0: deleted", 0, false},
		{"VersionsBehind 1: deleted and created again", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ns := env.Namespace(t)
			c := reconcilertest.NewClient(env.Client, reconcilertest.WithCacheLag(mgr.Cache, cachelag.Lag{Kind: "ConfigMap", VersionsBehind: tt.behind}))
			cm := configMap(ns, "cm", "v0")
			key := client.ObjectKeyFromObject(cm)
			require.NoError(t, c.Create(ctx, cm))
			require.NoError(t, c.Delete(ctx, cm))
			if tt.recreate {
				require.NoError(t, c.Create(ctx, configMap(ns, "cm", "again")))
			}
			// The informer delivers the deletion: eventually NotFound.
			require.Eventually(t, func() bool {
				_, err := readCM(ctx, c, key)
				return apierrors.IsNotFound(err)
			}, 30*time.Second, 20*time.Millisecond)
			var list corev1.ConfigMapList
			require.NoError(t, c.List(ctx, &list, client.InNamespace(ns)))
			assert.Empty(t, list.Items)
			if tt.recreate {
				got, err := readCM(ctx, env.Client, key)
				require.NoError(t, err)
				assert.Equal(t, "again", got, "the apiserver has the new object")
			}
			// And it stays NotFound, whatever the informer delivers late.
			for range 20 {
				_, err := readCM(ctx, c, key)
				require.True(t, apierrors.IsNotFound(err), "got %v", err)
			}
		})
	}
}

// TestCacheLagPassThrough: kinds without a Lag read the wrapped client.
func TestCacheLagPassThrough(t *testing.T) {
	testenv.Require(t)
	mgr := env.StartManager(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	c := reconcilertest.NewClient(env.Client, reconcilertest.WithCacheLag(mgr.Cache, cachelag.Lag{Kind: "Widget", VersionsBehind: 1}))

	cmKey, err := createCM(ctx, c, ns)
	require.NoError(t, err)
	wKey, err := createWidget(ctx, c, ns)
	require.NoError(t, err)
	require.NoError(t, setCM(ctx, c, c, cmKey, "v1"), "a read of a kind without lag has the current resourceVersion")
	got, err := readCM(ctx, c, cmKey)
	require.NoError(t, err)
	assert.Equal(t, "v1", got, "ConfigMaps are not lagged")

	w := &testv1.Widget{}
	require.NoError(t, env.Client.Get(ctx, wKey, w))
	w.Spec.Color = "v1"
	require.NoError(t, c.Update(ctx, w))
	got, err = readWidgetColor(ctx, c, wKey)
	require.NoError(t, err)
	assert.Equal(t, "v0", got, "Widgets are")
	assert.Equal(t, 2, c.Count(reconcilertest.Get, "ConfigMap"))
	assert.Equal(t, 1, c.Count(reconcilertest.Get, "Widget"))
}

// TestCacheLagConvergeWaitsOutDelay: ReconcileUntilQuiet and AssertIdempotent wait
// out a Delay between passes, so a reconciler that writes what it read
// converges; without the wait the second pass would read NotFound, create
// again and fail with AlreadyExists until maxPasses ran out.
func TestCacheLagConvergeWaitsOutDelay(t *testing.T) {
	testenv.Require(t)
	mgr := env.StartManager(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	const delay = time.Second
	c := reconcilertest.NewClient(mgr.Client, reconcilertest.WithCacheLag(mgr.Cache, cachelag.Lag{Kind: "ConfigMap", Delay: delay}))
	key := client.ObjectKey{Namespace: ns, Name: "cfg"}
	// Ensures the ConfigMap exists with k=want.
	r := reconcile.Func(func(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
		cm := &corev1.ConfigMap{}
		switch err := c.Get(ctx, key, cm); {
		case apierrors.IsNotFound(err):
			return reconcile.Result{}, c.Create(ctx, configMap(ns, key.Name, "want"))
		case err != nil:
			return reconcile.Result{}, err
		case cm.Data["k"] != "want":
			cm.Data = map[string]string{"k": "want"}
			return reconcile.Result{}, c.Update(ctx, cm)
		}
		return reconcile.Result{}, nil
	})
	req := reconcile.Request{NamespacedName: key}

	start := time.Now()
	assert.Equal(t, 1, reconcilertest.ReconcileUntilQuiet(t, ctx, r, c, req, 3), "one pass creates, the next reads it back")
	assert.GreaterOrEqual(t, time.Since(start), delay, "the second pass waited for the create to be readable")
	reconcilertest.AssertIdempotent(t, ctx, r, c, req)

	// Another writer keeps changing another ConfigMap meanwhile: the pass
	// did not read it, so its hidden versions do not keep ReconcileUntilQuiet going.
	noise := configMap(ns, "noise", "0")
	require.NoError(t, env.Client.Create(ctx, noise))
	noiseCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; noiseCtx.Err() == nil; i++ {
			_ = setCM(noiseCtx, env.Client, env.Client, client.ObjectKeyFromObject(noise), fmt.Sprint(i))
			select {
			case <-noiseCtx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })

	require.NoError(t, setCM(ctx, mgr.APIReader, c, key, "drift"))
	assert.Equal(t, 1, reconcilertest.ReconcileUntilQuiet(t, ctx, r, c, req, 3), "the drift written through c is read, once readable")
	reconcilertest.AssertIdempotent(t, ctx, r, c, req)
	got, err := readCM(ctx, mgr.APIReader, key)
	require.NoError(t, err)
	assert.Equal(t, "want", got)
}
