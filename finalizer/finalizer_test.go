package finalizer_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reconcilekit/reconcilekit/finalizer"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

// The code under test gets what an operator gets: the manager's client,
// whose reads come from an informer cache that trails the apiserver, and its
// uncached APIReader for conflict re-reads. env.Client is the test's own:
// setup, other writers, and assertions on the apiserver's truth.

const (
	ours  = "apps.example.com/cleanup"
	other = "other.example.com/hold"
)

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func create(t *testing.T, ns string, finalizers ...string) *testv1.Widget {
	t.Helper()
	w := &testv1.Widget{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "w-", Namespace: ns, Finalizers: finalizers},
		Spec:       testv1.WidgetSpec{Color: "red", Size: 1},
	}
	require.NoError(t, env.Client.Create(ctxFor(t), w))
	return w
}

// get reads w from the apiserver.
func get(t *testing.T, w *testv1.Widget) *testv1.Widget {
	t.Helper()
	got := &testv1.Widget{}
	require.NoError(t, env.Client.Get(ctxFor(t), client.ObjectKeyFromObject(w), got))
	return got
}

// cached waits until m's cache holds w as the apiserver has it now, and
// returns the cached copy: what a reconcile started by the watch event for
// the last write reads.
func cached(t *testing.T, m *testenv.Manager, w *testv1.Widget) *testv1.Widget {
	t.Helper()
	want := get(t, w).ResourceVersion
	var got *testv1.Widget
	require.Eventually(t, func() bool {
		got = &testv1.Widget{}
		err := m.Client.Get(ctxFor(t), client.ObjectKeyFromObject(w), got)
		return err == nil && got.ResourceVersion == want
	}, 30*time.Second, 10*time.Millisecond, "the cache never reached resourceVersion %s of %s", want, w.Name)
	return got
}

// frozen returns m.Client as seen through a cache stuck at old: every Get of
// old's key returns old, whatever the apiserver holds — the deterministic
// form of an informer that has not yet received the latest watch event.
// Requests that reach m.Client are counted; gets counts the frozen reads.
func frozen(m *testenv.Manager, old *testv1.Widget) (c client.Client, counted *reconcilertest.Client, gets *atomic.Int32) {
	counted = reconcilertest.NewClient(m.Client)
	gets = &atomic.Int32{}
	key := client.ObjectKeyFromObject(old)
	snapshot := old.DeepCopy()
	c = interceptor.NewClient(counted, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if w, ok := obj.(*testv1.Widget); ok && k == key {
				gets.Add(1)
				snapshot.DeepCopyInto(w)
				return nil
			}
			return c.Get(ctx, k, obj, opts...)
		},
	})
	return c, counted, gets
}

// countingReader counts the reads that reach the apiserver reader.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// meddle makes a change through another client, after the test has taken
// its (now stale) copy.
type meddle struct {
	name  string
	apply func(t *testing.T, w *testv1.Widget)
	check func(t *testing.T, server *testv1.Widget)
}

var meddlers = []meddle{{
	name: "spec update",
	apply: func(t *testing.T, w *testv1.Widget) {
		fresh := get(t, w)
		fresh.Spec.Color = "blue"
		require.NoError(t, env.Client.Update(ctxFor(t), fresh))
	},
	check: func(t *testing.T, server *testv1.Widget) { assert.Equal(t, "blue", server.Spec.Color) },
}, {
	name: "status update",
	apply: func(t *testing.T, w *testv1.Widget) {
		fresh := get(t, w)
		fresh.Status.Note = "written by someone else"
		require.NoError(t, env.Client.Status().Update(ctxFor(t), fresh))
	},
	check: func(t *testing.T, server *testv1.Widget) {
		assert.Equal(t, "written by someone else", server.Status.Note)
	},
}, {
	name: "another controller's finalizer",
	apply: func(t *testing.T, w *testv1.Widget) {
		fresh := get(t, w)
		fresh.Finalizers = append(fresh.Finalizers, other)
		require.NoError(t, env.Client.Update(ctxFor(t), fresh))
	},
	check: func(t *testing.T, server *testv1.Widget) { assert.Contains(t, server.Finalizers, other) },
}}

func TestEnsureAndRemoveKeepConcurrentWrites(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	mgr := env.StartManager(t)
	reader := finalizer.WithAPIReader(mgr.APIReader)
	for _, m := range meddlers {
		t.Run("Ensure after "+m.name, func(t *testing.T) {
			stale := create(t, ns)
			m.apply(t, stale)

			changed, err := finalizer.Ensure(ctxFor(t), mgr.Client, stale, ours, reader)
			require.NoError(t, err)
			assert.True(t, changed)

			server := get(t, stale)
			m.check(t, server)
			assert.Contains(t, server.Finalizers, ours)
			assert.Equal(t, server.Finalizers, stale.Finalizers, "obj reflects the server")
			assert.Equal(t, server.ResourceVersion, stale.ResourceVersion, "obj reflects the server")
		})
		t.Run("Remove after "+m.name, func(t *testing.T) {
			stale := create(t, ns, ours)
			m.apply(t, stale)

			changed, err := finalizer.Remove(ctxFor(t), mgr.Client, stale, ours, reader)
			require.NoError(t, err)
			assert.True(t, changed)

			server := get(t, stale)
			m.check(t, server)
			assert.NotContains(t, server.Finalizers, ours)
			assert.Equal(t, server.Finalizers, stale.Finalizers, "obj reflects the server")
			assert.Equal(t, server.ResourceVersion, stale.ResourceVersion, "obj reflects the server")
		})
	}
}

// TestConcurrentWritersFromOneSnapshot races several writers that all start
// from the same copy; every conflict is someone else's success, so each
// writer needs at most n-1 retries and all of them must land.
func TestConcurrentWritersFromOneSnapshot(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	m := env.StartManager(t)
	const n = 4
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("writer%d.example.com/cleanup", i)
	}
	race := func(snapshot *testv1.Widget, op func(context.Context, client.Client, client.Object, string, ...finalizer.Option) (bool, error)) {
		var wg sync.WaitGroup
		for _, name := range names {
			obj := snapshot.DeepCopy()
			wg.Go(func() {
				changed, err := op(ctxFor(t), m.Client, obj, name, finalizer.WithAPIReader(m.APIReader))
				assert.NoError(t, err, name)
				assert.True(t, changed, name)
			})
		}
		wg.Wait()
	}

	w := create(t, ns, other)
	race(w, finalizer.Ensure)
	assert.ElementsMatch(t, append([]string{other}, names...), get(t, w).Finalizers)

	race(get(t, w), finalizer.Remove)
	assert.Equal(t, []string{other}, get(t, w).Finalizers)
}

func TestEnsureAddsNothingToADeletingObject(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	m := env.StartManager(t)
	w := create(t, ns, other)
	stale := w.DeepCopy()
	require.NoError(t, env.Client.Delete(ctxFor(t), w))
	fresh := cached(t, m, w)
	require.NotNil(t, fresh.DeletionTimestamp)

	for name, obj := range map[string]*testv1.Widget{"cached copy": fresh, "stale copy": stale} {
		changed, err := finalizer.Ensure(ctxFor(t), m.Client, obj, ours, finalizer.WithAPIReader(m.APIReader))
		require.NoError(t, err, name)
		assert.False(t, changed, name)
		assert.Equal(t, []string{other}, get(t, w).Finalizers, name)
	}
	assert.NotNil(t, stale.DeletionTimestamp, "the stale copy was re-read")
}

func TestRemove(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	m := env.StartManager(t)
	reader := finalizer.WithAPIReader(m.APIReader)

	t.Run("last finalizer of a live object", func(t *testing.T) {
		w := create(t, ns, ours)
		changed, err := finalizer.Remove(ctxFor(t), m.Client, w, ours, reader)
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Empty(t, w.Finalizers, "obj reflects the server's answer, which omits the emptied list")
		assert.Empty(t, get(t, w).Finalizers)
	})

	t.Run("last finalizer of a deleting object", func(t *testing.T) {
		w := create(t, ns, ours)
		require.NoError(t, env.Client.Delete(ctxFor(t), w))
		w = cached(t, m, w)
		stale := w.DeepCopy()

		changed, err := finalizer.Remove(ctxFor(t), m.Client, w, ours, reader)
		require.NoError(t, err)
		assert.True(t, changed)
		err = env.Client.Get(ctxFor(t), client.ObjectKeyFromObject(w), &testv1.Widget{})
		assert.True(t, apierrors.IsNotFound(err), "object is gone, got %v", err)

		changed, err = finalizer.Remove(ctxFor(t), m.Client, stale, ours, reader)
		require.NoError(t, err, "NotFound after removal is not an error")
		assert.False(t, changed)
	})

	t.Run("a stale copy never resurrects finalizers removed meanwhile", func(t *testing.T) {
		w := create(t, ns, ours, other)
		stale := w.DeepCopy()
		w.Finalizers = nil // another writer empties the list; the server then omits it
		require.NoError(t, env.Client.Update(ctxFor(t), w))

		changed, err := finalizer.Remove(ctxFor(t), m.Client, stale, ours, reader)
		require.NoError(t, err)
		assert.False(t, changed, "the re-read copy no longer lists it")
		assert.Empty(t, stale.Finalizers, "obj reflects the server")
		assert.Empty(t, get(t, w).Finalizers, "other.example.com/hold stays removed")
	})

	t.Run("never touches a re-created object of the same name", func(t *testing.T) {
		w := create(t, ns, ours)
		stale := w.DeepCopy()
		_, err := finalizer.Remove(ctxFor(t), m.Client, w, ours, reader)
		require.NoError(t, err)
		require.NoError(t, env.Client.Delete(ctxFor(t), w))
		reborn := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: ns, Finalizers: []string{ours}}}
		require.NoError(t, env.Client.Create(ctxFor(t), reborn))

		changed, err := finalizer.Remove(ctxFor(t), m.Client, stale, ours, reader)
		require.NoError(t, err)
		assert.False(t, changed)
		assert.Equal(t, []string{ours}, get(t, reborn).Finalizers, "the new object keeps its finalizer")

		stale.Finalizers = nil
		_, err = finalizer.Ensure(ctxFor(t), m.Client, stale, other, reader)
		require.ErrorContains(t, err, "re-created")
		assert.Equal(t, []string{ours}, get(t, reborn).Finalizers)
	})
}

// TestConflictRetriesReadTheAPIReader is the regression test for conflict
// retries that re-read through the client under test. With the manager's
// client that re-read comes from the informer cache; until the cache has
// seen the write that caused the 409 it returns the very copy that
// conflicted, so every retry conflicted again and Ensure and Remove failed
// once retry.DefaultRetry gave up. Here the cache is frozen at the old
// copy, so only a re-read through the APIReader succeeds.
func TestConflictRetriesReadTheAPIReader(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	m := env.StartManager(t)
	spec := meddlers[0]
	require.Equal(t, "spec update", spec.name)

	// check: the first patch conflicts, the APIReader's copy is patched.
	check := func(t *testing.T, counted *reconcilertest.Client, cacheGets *atomic.Int32, r *countingReader) {
		t.Helper()
		assert.Equal(t, 2, counted.Count(reconcilertest.Patch, "Widget"), "one patch conflicts, one lands: %v", counted.MutatingRequests())
		assert.Equal(t, int32(1), r.gets.Load(), "the conflict is re-read through the APIReader")
		assert.Zero(t, cacheGets.Load(), "and not through the cache")
	}

	t.Run("Ensure", func(t *testing.T) {
		old := create(t, ns)
		spec.apply(t, old)
		c, counted, cacheGets := frozen(m, old)
		r := &countingReader{Reader: m.APIReader}

		obj := old.DeepCopy()
		changed, err := finalizer.Ensure(ctxFor(t), c, obj, ours, finalizer.WithAPIReader(r))
		require.NoError(t, err)
		assert.True(t, changed)
		check(t, counted, cacheGets, r)
		server := get(t, old)
		spec.check(t, server)
		assert.Equal(t, []string{ours}, server.Finalizers)
		assert.Equal(t, server.ResourceVersion, obj.ResourceVersion, "obj reflects the server")
	})

	t.Run("Remove", func(t *testing.T) {
		old := create(t, ns, ours, other)
		spec.apply(t, old)
		c, counted, cacheGets := frozen(m, old)
		r := &countingReader{Reader: m.APIReader}

		changed, err := finalizer.Remove(ctxFor(t), c, old.DeepCopy(), ours, finalizer.WithAPIReader(r))
		require.NoError(t, err)
		assert.True(t, changed)
		check(t, counted, cacheGets, r)
		server := get(t, old)
		spec.check(t, server)
		assert.Equal(t, []string{other}, server.Finalizers)
	})
}

// TestConflictWithoutAReaderSendsNoDoomedPatch: without an APIReader the
// conflict is re-read through the client. A re-read from a cache that has
// not caught up returns the resourceVersion that just conflicted, and a
// patch locked to it is certain to conflict again, so none is sent: Ensure
// and Remove re-read until the retry budget is spent and return the 409
// for the caller to requeue. (Before, every retry sent a patch, five in all.)
func TestConflictWithoutAReaderSendsNoDoomedPatch(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	m := env.StartManager(t)
	ops := []struct {
		name       string
		finalizers []string
		op         func(context.Context, client.Client, client.Object, string, ...finalizer.Option) (bool, error)
	}{
		{"Ensure", nil, finalizer.Ensure},
		{"Remove", []string{ours}, finalizer.Remove},
	}
	for _, tt := range ops {
		t.Run(tt.name, func(t *testing.T) {
			old := create(t, ns, tt.finalizers...)
			meddlers[0].apply(t, old)
			c, counted, cacheGets := frozen(m, old)

			changed, err := tt.op(ctxFor(t), c, old.DeepCopy(), ours)
			require.Error(t, err)
			assert.False(t, changed)
			assert.True(t, apierrors.IsConflict(err), "the caller sees the 409 and requeues: %v", err)
			assert.ErrorContains(t, err, "pass finalizer.WithAPIReader")
			assert.Equal(t, 1, counted.Count(reconcilertest.Patch, "Widget"), "no patch from a copy known to conflict: %v", counted.MutatingRequests())
			assert.Equal(t, int32(retry.DefaultRetry.Steps-1), cacheGets.Load(), "every retry re-read")
			assert.Equal(t, tt.finalizers, get(t, old).Finalizers, "nothing was written")

			// The requeued pass, once the cache has caught up, succeeds
			// without a reader.
			changed, err = tt.op(ctxFor(t), m.Client, cached(t, m, old), ours)
			require.NoError(t, err)
			assert.True(t, changed)
		})
	}
}
