package finalizer_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/finalizer"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

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

func get(t *testing.T, w *testv1.Widget) *testv1.Widget {
	t.Helper()
	got := &testv1.Widget{}
	require.NoError(t, env.Client.Get(ctxFor(t), client.ObjectKeyFromObject(w), got))
	return got
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
	for _, m := range meddlers {
		t.Run("Ensure after "+m.name, func(t *testing.T) {
			stale := create(t, ns)
			m.apply(t, stale)

			changed, err := finalizer.Ensure(ctxFor(t), env.Client, stale, ours)
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

			changed, err := finalizer.Remove(ctxFor(t), env.Client, stale, ours)
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
	const n = 4
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("writer%d.example.com/cleanup", i)
	}
	race := func(snapshot *testv1.Widget, op func(context.Context, client.Client, client.Object, string) (bool, error)) {
		var wg sync.WaitGroup
		for _, name := range names {
			obj := snapshot.DeepCopy()
			wg.Go(func() {
				changed, err := op(ctxFor(t), env.Client, obj, name)
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
	w := create(t, ns, other)
	stale := w.DeepCopy()
	require.NoError(t, env.Client.Delete(ctxFor(t), w))
	fresh := get(t, w)
	require.NotNil(t, fresh.DeletionTimestamp)

	for name, obj := range map[string]*testv1.Widget{"fresh copy": fresh, "stale copy": stale} {
		changed, err := finalizer.Ensure(ctxFor(t), env.Client, obj, ours)
		require.NoError(t, err, name)
		assert.False(t, changed, name)
		assert.Equal(t, []string{other}, get(t, w).Finalizers, name)
	}
	assert.NotNil(t, stale.DeletionTimestamp, "the stale copy was re-read")
}

func TestRemove(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)

	t.Run("last finalizer of a live object", func(t *testing.T) {
		w := create(t, ns, ours)
		changed, err := finalizer.Remove(ctxFor(t), env.Client, w, ours)
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Empty(t, w.Finalizers, "obj reflects the server's answer, which omits the emptied list")
		assert.Empty(t, get(t, w).Finalizers)
	})

	t.Run("last finalizer of a deleting object", func(t *testing.T) {
		w := create(t, ns, ours)
		require.NoError(t, env.Client.Delete(ctxFor(t), w))
		w = get(t, w)
		stale := w.DeepCopy()

		changed, err := finalizer.Remove(ctxFor(t), env.Client, w, ours)
		require.NoError(t, err)
		assert.True(t, changed)
		err = env.Client.Get(ctxFor(t), client.ObjectKeyFromObject(w), &testv1.Widget{})
		assert.True(t, apierrors.IsNotFound(err), "object is gone, got %v", err)

		changed, err = finalizer.Remove(ctxFor(t), env.Client, stale, ours)
		require.NoError(t, err, "NotFound after removal is not an error")
		assert.False(t, changed)
	})

	t.Run("a stale copy never resurrects finalizers removed meanwhile", func(t *testing.T) {
		w := create(t, ns, ours, other)
		stale := w.DeepCopy()
		w.Finalizers = nil // another writer empties the list; the server then omits it
		require.NoError(t, env.Client.Update(ctxFor(t), w))

		changed, err := finalizer.Remove(ctxFor(t), env.Client, stale, ours)
		require.NoError(t, err)
		assert.False(t, changed, "the re-read copy no longer lists it")
		assert.Empty(t, stale.Finalizers, "obj reflects the server")
		assert.Empty(t, get(t, w).Finalizers, "other.example.com/hold stays removed")
	})

	t.Run("never touches a re-created object of the same name", func(t *testing.T) {
		w := create(t, ns, ours)
		stale := w.DeepCopy()
		_, err := finalizer.Remove(ctxFor(t), env.Client, w, ours)
		require.NoError(t, err)
		require.NoError(t, env.Client.Delete(ctxFor(t), w))
		reborn := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: ns, Finalizers: []string{ours}}}
		require.NoError(t, env.Client.Create(ctxFor(t), reborn))

		changed, err := finalizer.Remove(ctxFor(t), env.Client, stale, ours)
		require.NoError(t, err)
		assert.False(t, changed)
		assert.Equal(t, []string{ours}, get(t, reborn).Finalizers, "the new object keeps its finalizer")

		stale.Finalizers = nil
		_, err = finalizer.Ensure(ctxFor(t), env.Client, stale, other)
		require.ErrorContains(t, err, "re-created")
		assert.Equal(t, []string{ours}, get(t, reborn).Finalizers)
	})
}

// recorder returns an events.k8s.io/v1 recorder writing to the envtest API
// server. It uses the Env's scheme, which knows Widget: a recorder built
// from client-go's scheme (as events.NewEventBroadcasterAdapter does) cannot
// reference a Widget and drops its events.
func recorder(t *testing.T) (events.EventRecorder, kubernetes.Interface) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, b.StartRecordingToSinkWithContext(ctx))
	t.Cleanup(func() { cancel(); b.Shutdown() })
	return b.NewRecorder(env.Scheme, "finalizer-test"), cs
}

// waitForEvent polls until an event with reason about w exists.
func waitForEvent(t *testing.T, cs kubernetes.Interface, w *testv1.Widget, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	err := wait.PollUntilContextTimeout(ctxFor(t), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := cs.EventsV1().Events(w.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Regarding.UID == w.UID && e.Reason == reason {
				found = e
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "waiting for event %s about %s", reason, w.Name)
	return found
}

func waitGone(t *testing.T, w *testv1.Widget) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctxFor(t), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), &testv1.Widget{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	require.NoError(t, err, "waiting for %s to be deleted", w.Name)
}

func TestFinalizeLifecycle(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	rec, cs := recorder(t)
	var released atomic.Int32
	var bucketBusy atomic.Bool
	bucketBusy.Store(true)
	f := &finalizer.Finalizer[*testv1.Widget]{
		Name: ours, Client: env.Client, Recorder: rec,
		Steps: []finalizer.Step[*testv1.Widget]{{
			Name: "release-ip",
			Run: func(context.Context, *testv1.Widget) (finalizer.Result, error) {
				released.Add(1)
				return finalizer.Result{}, nil
			},
		}, {
			Name: "delete-bucket",
			Run: func(context.Context, *testv1.Widget) (finalizer.Result, error) {
				if bucketBusy.Load() {
					return finalizer.Result{}, errors.New("bucket busy")
				}
				return finalizer.Result{}, nil
			},
		}},
	}

	w := create(t, ns)
	changed, err := finalizer.Ensure(ctxFor(t), env.Client, w, ours)
	require.NoError(t, err)
	require.True(t, changed)
	require.NoError(t, env.Client.Delete(ctxFor(t), w))
	w = get(t, w)
	require.NotNil(t, w.DeletionTimestamp, "the finalizer holds the object")

	// A failing step keeps the object, and says so in status and events.
	done, _, err := f.Finalize(ctxFor(t), w)
	require.ErrorContains(t, err, `cleanup step "delete-bucket": bucket busy`)
	assert.False(t, done)
	require.NoError(t, env.Client.Status().Update(ctxFor(t), w), "the caller persists status")
	server := get(t, w)
	assert.Equal(t, []string{ours}, server.Finalizers)
	ready := conditions.Get(server, conditions.Ready)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, finalizer.ReasonCleanupFailed, ready.Reason)
	assert.Equal(t, "cleanup step delete-bucket: bucket busy", ready.Message)
	ev := waitForEvent(t, cs, w, finalizer.ReasonCleanupFailed)
	assert.Equal(t, "Warning", ev.Type)
	assert.Equal(t, "cleanup step delete-bucket: bucket busy", ev.Note)

	// Once the step succeeds, the next pass lets the object go.
	bucketBusy.Store(false)
	w = get(t, w)
	done, res, err := f.Finalize(ctxFor(t), w)
	require.NoError(t, err)
	assert.True(t, done)
	assert.Zero(t, res)
	assert.Equal(t, int32(2), released.Load(), "every pass starts from the first step")
	waitGone(t, w)
	ev = waitForEvent(t, cs, w, finalizer.ReasonCleanupSucceeded)
	assert.Equal(t, "Normal", ev.Type)
}

func TestFinalizeRequeueKeepsFinalizer(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	w := create(t, ns, ours)
	require.NoError(t, env.Client.Delete(ctxFor(t), w))
	w = get(t, w)
	f := &finalizer.Finalizer[*testv1.Widget]{
		Name: ours, Client: env.Client,
		Steps: []finalizer.Step[*testv1.Widget]{{
			Name: "wait-for-volume",
			Run: func(context.Context, *testv1.Widget) (finalizer.Result, error) {
				return finalizer.Result{RequeueAfter: 5 * time.Second}, nil
			},
		}},
	}

	done, res, err := f.Finalize(ctxFor(t), w)
	require.NoError(t, err)
	assert.False(t, done)
	assert.Equal(t, 5*time.Second, res.RequeueAfter)
	assert.Equal(t, []string{ours}, get(t, w).Finalizers)
}

func TestFinalizeDeadline(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	rec, cs := recorder(t)
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("RemoveAfterDeadline=%v", force), func(t *testing.T) {
			w := create(t, ns, ours)
			require.NoError(t, env.Client.Delete(ctxFor(t), w))
			w = get(t, w)
			f := &finalizer.Finalizer[*testv1.Widget]{
				Name: ours, Client: env.Client, Recorder: rec,
				// The deletionTimestamp is already in the past: any
				// positive Deadline this small has passed.
				Deadline:            time.Nanosecond,
				RemoveAfterDeadline: force,
				Steps: []finalizer.Step[*testv1.Widget]{{
					Name: "delete-bucket",
					Run: func(context.Context, *testv1.Widget) (finalizer.Result, error) {
						return finalizer.Result{}, errors.New("bucket busy")
					},
				}},
			}

			done, _, err := f.Finalize(ctxFor(t), w)

			ev := waitForEvent(t, cs, w, finalizer.ReasonCleanupOverdue)
			assert.Equal(t, "Warning", ev.Type)
			assert.Regexp(t, `^cleanup has been stuck for \S+ since deletion \(deadline 1ns\): step delete-bucket fails: bucket busy$`, ev.Note)
			if !force {
				require.ErrorContains(t, err, "bucket busy")
				assert.False(t, done)
				assert.Equal(t, []string{ours}, get(t, w).Finalizers, "kept unless the policy says otherwise")
				return
			}
			require.NoError(t, err)
			assert.True(t, done)
			waitGone(t, w)
			ev = waitForEvent(t, cs, w, finalizer.ReasonFinalizerForceRemoved)
			assert.Equal(t, "Warning", ev.Type)
			assert.Contains(t, ev.Note, "without completing cleanup")
		})
	}
}
