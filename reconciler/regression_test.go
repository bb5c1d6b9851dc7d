package reconciler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/finalizer"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

// A terminal step whose Stalled condition cannot be written must be
// retried: controller-runtime never retries a terminal error, so the
// condition explaining it would be lost until an unrelated event.
func TestTerminalPassWithFailedStatusWriteIsRetried(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "validate", Condition: "SpecValid", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Terminal("InvalidSpec", errors.New("size must be even"))
		}},
	}})
	f.c.Inject(reconcilertest.Fault{Verb: reconcilertest.Patch, Subresource: "status", Err: reconcilertest.ErrServer, Times: 1})
	_, err := f.reconcile()
	require.Error(t, err)
	assert.False(t, errors.Is(err, reconcile.TerminalError(nil)), "must be retried: %v", err)
	assert.ErrorContains(t, err, "size must be even")
	assert.ErrorContains(t, err, "writing status")

	_, err = f.reconcile()
	assert.True(t, errors.Is(err, reconcile.TerminalError(nil)), "once written, the error is terminal again: %v", err)
	assert.True(t, conditions.IsTrue(f.get(), conditions.Stalled))
}

// An Retry outcome returns no RequeueAfter from an earlier step:
// controller-runtime ignores a result returned with an error, and warns.
func TestErrorOutcomeReturnsNoResult(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "poll", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Continue().RequeueAfter(time.Minute)
		}},
		{Name: "fail", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Retry(errors.New("down")) }},
	}})
	res, err := f.reconcile()
	require.Error(t, err)
	assert.True(t, res.IsZero(), "result with an error: %+v", res)
}

// A step that edits spec or metadata other than labels and annotations of
// s.Object would see the edit dropped silently (only status, labels and
// annotations are written); the pass fails naming step and field.
func TestStepChangingSpecFailsLoudly(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*testv1.Widget)
		path string
	}{
		{"spec field", func(w *testv1.Widget) { w.Spec.Size = 9 }, "spec.size"},
		{"finalizers", func(w *testv1.Widget) { w.Finalizers = []string{"example.com/x"} }, "metadata.finalizers"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ran := false
			f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
				{Name: "sneaky", Run: func(_ context.Context, s *scope) reconciler.Outcome {
					tt.edit(s.Object)
					return reconciler.Continue()
				}},
				{Name: "after", Run: func(context.Context, *scope) reconciler.Outcome { ran = true; return reconciler.Continue() }},
			}})
			_, err := f.reconcile()
			require.Error(t, err)
			assert.ErrorContains(t, err, "step sneaky changed "+tt.path)
			assert.False(t, ran, "the pass stops at the bad step")
			w := f.get()
			assert.Equal(t, int32(1), w.Spec.Size, "nothing outside status was written")
			assert.Empty(t, w.Finalizers)
			stalled := conditions.Get(w, conditions.Stalled)
			require.NotNil(t, stalled)
			assert.Equal(t, reconciler.ReasonInvalidStep, stalled.Reason)
			assert.Contains(t, stalled.Message, tt.path)
		})
	}
}

// Ready=True says what is ready: the last dependent step's ContinueWith
// reason and message, and the event says it too.
func TestReadySaysWhatIsReady(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "config", Condition: "Configured", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.ContinueWith("Applied", "config applied")
		}},
		{Name: "rollout", Condition: "Available", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.ContinueWith("ReplicasReady", "%d/%d replicas ready", 3, 3)
		}},
	}})
	_, err := f.reconcile()
	require.NoError(t, err)
	ready := conditions.Get(f.get(), conditions.Ready)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionTrue, ready.Status)
	assert.Equal(t, "ReplicasReady", ready.Reason)
	assert.Equal(t, "3/3 replicas ready", ready.Message)
	assert.Equal(t, []string{"Normal ReplicasReady Ready=True: 3/3 replicas ready"}, trimEvents(f.drainEvents()))

	g := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "a", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }},
	}})
	_, err = g.reconcile()
	require.NoError(t, err)
	ready = conditions.Get(g.get(), conditions.Ready)
	require.NotNil(t, ready)
	assert.Equal(t, "all 1 steps succeeded", ready.Message, "no dependent: Ready still says something")
}

// A pass that starts from a stale cached copy (right after our own status
// write, woken by another event) must not repeat the Ready event, nor move
// lastTransitionTime.
func TestStaleStartRepeatsNoEvent(t *testing.T) {
	var fc frozenCache
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "a", Condition: "AReady", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.ContinueWith("Up", "up") }},
	}})
	f.sync()
	// The copy before the first status write: what a lagging cache serves.
	fc.freeze(t, f.ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.req.Namespace, Name: f.req.Name}})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.Len(t, f.drainEvents(), 1)
	before := conditions.Get(f.get(), conditions.Ready)
	require.NotNil(t, before)

	f.useClient(fc.client(f.m.Client))
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.Empty(t, f.drainEvents(), "one transition, one event")
	after := f.get()
	assert.Equal(t, before.LastTransitionTime, conditions.Get(after, conditions.Ready).LastTransitionTime)
	assert.Equal(t, 1, f.c.Mutations(), "the stale write is refused by its lock, and nothing else is written:\n%s", f.c)
}

func trimEvents(evs []string) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = strings.TrimSpace(e)
	}
	return out
}

// The finalizer is added by a patch locked to the copy the pass read; when
// that copy is stale (another writer changed the object since), the retry
// must re-read the apiserver, not the same stale cache.
func TestFinalizerAddedFromAStaleCopy(t *testing.T) {
	var fc frozenCache
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps:     []widgetStep{continueStep("a", "AReady", new([]string))},
		Finalizer: "test.reconcilekit.io/cleanup",
		Cleanup: []widgetStep{{Name: "noop", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Continue()
		}}},
	})
	f.sync()
	fc.freeze(t, f.ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.req.Namespace, Name: f.req.Name}})
	w := f.get()
	w.Labels = map[string]string{"edited": "elsewhere"}
	require.NoError(t, env.Client.Update(f.ctx, w))
	f.useClient(fc.client(f.m.Client))

	f.c.Reset()
	_, err := f.r.Reconcile(f.ctx, f.req)
	require.NoError(t, err)
	w = f.get()
	assert.Contains(t, w.Finalizers, "test.reconcilekit.io/cleanup")
	assert.Equal(t, "elsewhere", w.Labels["edited"], "the other writer's change survives")
}

// A pass that starts from a cached copy older than the previous pass's
// finalizer write re-reads the object when its finalizer patch conflicts;
// that fresher copy is the pass's baseline, not a change made by a step.
// And a step that writes its own object through s.Client (another
// finalizer) changed what is stored, which is not a step bug either.
func TestStaleFinalizerPassDoesNotStall(t *testing.T) {
	var fc frozenCache
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps: []widgetStep{{Name: "own-finalizer", Condition: "Extra", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			if _, err := finalizer.Ensure(ctx, s.Client, s.Object, "test.reconcilekit.io/extra"); err != nil {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		}}},
		Finalizer: "test.reconcilekit.io/cleanup",
		Cleanup: []widgetStep{{Name: "noop", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Continue()
		}}},
	})
	f.sync()
	// The copy before the first pass: no finalizer, no status.
	fc.freeze(t, f.ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.req.Namespace, Name: f.req.Name}})
	_, err := f.reconcile()
	require.NoError(t, err)
	require.True(t, conditions.IsTrue(f.get(), conditions.Ready))
	f.drainEvents()

	f.useClient(fc.client(f.m.Client))
	f.c.Reset()
	_, err = f.r.Reconcile(f.ctx, f.req)
	require.NoError(t, err)
	w := f.get()
	assert.Nil(t, conditions.Get(w, conditions.Stalled), "no InvalidStep from a stale start")
	assert.True(t, conditions.IsTrue(w, conditions.Ready))
	assert.Subset(t, w.Finalizers, []string{"test.reconcilekit.io/cleanup", "test.reconcilekit.io/extra"})
	assert.Empty(t, f.drainEvents())
}

// A long Ready message is cut for the event note on a rune boundary: a note
// cut inside a multi-byte character is not valid UTF-8.
func TestEventNoteCutOnARuneBoundary(t *testing.T) {
	// Two prefixes of different parity: one of them puts any fixed byte
	// limit inside a two-byte "é".
	for _, prefix := range []string{"x", "xy"} {
		t.Run(prefix, func(t *testing.T) {
			msg := prefix + strings.Repeat("é", 600) // over 1200 bytes
			f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
				{Name: "wait", Condition: "Waited", Run: func(context.Context, *scope) reconciler.Outcome {
					return reconciler.Wait("Waiting", "%s", msg)
				}},
			}})
			_, err := f.reconcile()
			require.NoError(t, err)
			evs := f.drainEvents()
			require.Len(t, evs, 1)
			assert.True(t, utf8.ValidString(evs[0]), "event note is valid UTF-8")
			assert.Contains(t, evs[0], "…")
		})
	}
}

// A pass whose finalizer patch conflicts re-reads the object through the
// APIReader; when that copy is deleting, the pass runs cleanup and removes
// the finalizer, and the object is gone before the cache has seen any of
// it. The next pass, woken by the cleanup's own writes, then reads an older
// live copy from the cache. It must not act on it: before the fix it ran
// the steps again and re-registered the deleted object, an entry nothing
// would ever remove (the e2e chaos suite's "registry holds a deleted
// WebApp"). A pass behind an earlier one reads the apiserver instead. The
// cache here is frozen at chosen copies, one reconciler serving every pass
// as in a controller.
func TestPassNeverActsBehindAnEarlierPass(t *testing.T) {
	var fc frozenCache
	registry := map[string]bool{}
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps: []widgetStep{{Name: "register", Run: func(_ context.Context, s *scope) reconciler.Outcome {
			registry[string(s.Object.UID)] = true
			return reconciler.Continue()
		}}},
		Finalizer: cleanupFinalizer,
		Cleanup: []widgetStep{{Name: "deregister", Run: func(_ context.Context, s *scope) reconciler.Outcome {
			delete(registry, string(s.Object.UID))
			return reconciler.Continue()
		}}},
	})
	f.sync()
	f.useClient(fc.client(f.m.Client))
	ref := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.req.Namespace, Name: f.req.Name}}
	asCreated := f.get()
	pass := func(cached *testv1.Widget) {
		t.Helper()
		fc.thaw()
		if cached != nil {
			fc.frozen = map[frozenKey]client.Object{keyOf(ref, f.req.NamespacedName): cached.DeepCopy()}
		} else {
			f.sync()
		}
		f.c.Reset()
		f.reader.Reset()
		res, err := f.r.Reconcile(f.ctx, f.req)
		require.NoError(t, err)
		assert.Zero(t, res.RequeueAfter, "a pass behind the cache does not wait for it")
	}

	pass(nil)
	require.True(t, registry[string(asCreated.UID)], "the first pass registered")
	live := f.get()
	require.Contains(t, live.Finalizers, cleanupFinalizer)
	require.NoError(t, env.Client.Delete(f.ctx, live))

	// The cache still serves the copy from before the first pass: the
	// pass acts on the apiserver's copy, which is deleting.
	pass(asCreated)
	require.True(t, widgetGone(t, f), "cleanup removed the finalizer")
	require.Empty(t, registry, "cleanup deregistered")

	// The cache may still serve the live copies after the deletion.
	for _, stale := range []*testv1.Widget{live, asCreated, live} {
		pass(stale)
		assert.Empty(t, registry, "a stale pass re-registered a deleted object (cached resourceVersion %s)", stale.ResourceVersion)
		assert.Zero(t, f.c.Mutations(), "%s", f.c)
		assert.Equal(t, 1, f.reader.Count(reconcilertest.Get, "Widget"), "the apiserver's copy was read:\n%s", f.reader)
	}
	pass(nil)
	assert.Empty(t, registry)
	assert.Zero(t, f.reader.Count(reconcilertest.Get, "Widget"), "once the cache knows the object is gone, no more reads:\n%s", f.reader)
}

// A pass that starts right after an earlier pass's status write, before the
// cache has it, reads the apiserver's copy: it neither sends a status patch
// doomed to conflict nor waits, and AssertIdempotent needs no cache sync.
func TestPassBehindItsOwnStatusWriteReadsTheAPIServer(t *testing.T) {
	var fc frozenCache
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "a", Condition: "AReady", Run: func(context.Context, *scope) reconciler.Outcome { return reconciler.ContinueWith("Up", "up") }},
	}})
	f.sync()
	f.useClient(fc.client(f.m.Client))
	fc.freeze(t, f.ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.req.Namespace, Name: f.req.Name}})
	f.c.Reset()
	_, err := f.r.Reconcile(f.ctx, f.req)
	require.NoError(t, err)
	require.Equal(t, 1, f.c.Mutations(), "the first pass writes status:\n%s", f.c)

	// The cache still holds the copy without status.
	f.c.Reset()
	f.reader.Reset()
	reconcilertest.AssertIdempotent(t, f.ctx, f.r, f.c, f.req)
	assert.Equal(t, 1, f.reader.Count(reconcilertest.Get, "Widget"), "%s", f.reader)
}

// A read of the pass's own typed write carries apiVersion and kind, as a
// cached read does: the write's answer comes back without them.
func TestReadOfOwnTypedWriteHasItsKind(t *testing.T) {
	var fc frozenCache
	var got metav1.TypeMeta
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "own-finalizer", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			if _, err := finalizer.Ensure(ctx, s.Client, s.Object, "test.reconcilekit.io/extra"); err != nil {
				return reconciler.Retry(err)
			}
			var w testv1.Widget
			if err := s.Client.Get(ctx, client.ObjectKeyFromObject(s.Object), &w); err != nil {
				return reconciler.Retry(err)
			}
			if !slices.Contains(w.Finalizers, "test.reconcilekit.io/extra") {
				return reconciler.Retry(errors.New("the read did not return the pass's write"))
			}
			got = w.TypeMeta
			return reconciler.Continue()
		}},
	}})
	f.sync()
	f.useClient(fc.client(f.m.Client))
	fc.freeze(t, f.ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.req.Namespace, Name: f.req.Name}})
	_, err := f.r.Reconcile(f.ctx, f.req)
	require.NoError(t, err)
	assert.Equal(t, metav1.TypeMeta{APIVersion: "test.reconcilekit.io/v1", Kind: "Widget"}, got)
}
