package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

type widgetStep = reconciler.Step[*testv1.Widget]
type scope = reconciler.Scope[*testv1.Widget]

// fixture is one Widget in a fresh namespace and a reconciler for it,
// driven directly but reading through a started manager's informer cache,
// the client users' operators get, wrapped in a counting client. The
// re-read after a status conflict goes through reader, counted too.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	m      *testenv.Manager
	c      *reconcilertest.Client
	reader *reconcilertest.Client
	r      *reconciler.Reconciler[*testv1.Widget]
	opts   reconciler.Options[*testv1.Widget]
	req    reconcile.Request
	events *events.FakeRecorder
}

// useClient rebuilds the reconciler with c (counted) as its client.
func (f *fixture) useClient(c client.Client) {
	f.t.Helper()
	f.c = reconcilertest.NewClient(c)
	opts := f.opts
	opts.Client = f.c
	r, err := reconciler.New(nil, opts)
	require.NoError(f.t, err)
	f.r = r
}

func newFixture(t *testing.T, opts reconciler.Options[*testv1.Widget], mutate ...func(*testv1.Widget)) *fixture {
	t.Helper()
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}, Spec: testv1.WidgetSpec{Size: 1}}
	for _, m := range mutate {
		m(w)
	}
	require.NoError(t, env.Client.Create(ctx, w))
	m := env.StartManager(t)
	c := reconcilertest.NewClient(m.Client)
	reader := reconcilertest.NewClient(env.Client)
	rec := events.NewFakeRecorder(100)
	if opts.Name == "" {
		opts.Name = "widget-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	}
	if opts.Client == nil {
		opts.Client = c
	}
	opts.APIReader, opts.Scheme, opts.Recorder = reader, env.Scheme, rec
	r, err := reconciler.New(nil, opts)
	require.NoError(t, err)
	return &fixture{t: t, ctx: ctx, m: m, c: c, reader: reader, r: r, opts: opts, events: rec,
		req: reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "w"}}}
}

// reconcile runs one pass the way a controller would after the watch event
// of the object's latest write: once the cache holds that write.
func (f *fixture) reconcile() (ctrl.Result, error) {
	f.t.Helper()
	f.sync()
	f.c.Reset()
	f.reader.Reset()
	return f.r.Reconcile(f.ctx, f.req)
}

// sync waits until the cache holds the apiserver's current Widget (or
// knows it is gone).
func (f *fixture) sync() {
	f.t.Helper()
	truth := &testv1.Widget{}
	err := env.Client.Get(f.ctx, f.req.NamespacedName, truth)
	gone := apierrors.IsNotFound(err)
	if !gone {
		require.NoError(f.t, err)
	}
	require.Eventually(f.t, func() bool {
		cached := &testv1.Widget{}
		err := f.m.Client.Get(f.ctx, f.req.NamespacedName, cached)
		if gone {
			return apierrors.IsNotFound(err)
		}
		return err == nil && cached.ResourceVersion == truth.ResourceVersion
	}, 30*time.Second, 5*time.Millisecond, "the cache never caught up with the Widget")
}

// assertIdempotent is reconcilertest.AssertIdempotent once the cache is in
// sync, as it is when a resync finds a converged object.
func (f *fixture) assertIdempotent() {
	f.t.Helper()
	f.sync()
	reconcilertest.AssertIdempotent(f.t, f.ctx, f.r, f.c, f.req)
}

func (f *fixture) get() *testv1.Widget {
	f.t.Helper()
	w := &testv1.Widget{}
	require.NoError(f.t, env.Client.Get(f.ctx, f.req.NamespacedName, w))
	return w
}

func (f *fixture) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func continueStep(name, cond string, ran *[]string) widgetStep {
	return widgetStep{Name: name, Condition: cond, Run: func(context.Context, *scope) reconciler.Outcome {
		*ran = append(*ran, name)
		return reconciler.Continue()
	}}
}

func TestStepsRunInOrderAndReadySummarises(t *testing.T) {
	var ran []string
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		continueStep("a", "AReady", &ran),
		continueStep("b", "", &ran),
		continueStep("c", "CReady", &ran),
	}})
	res, err := f.reconcile()
	require.NoError(t, err)
	assert.True(t, res.IsZero())
	assert.Equal(t, []string{"a", "b", "c"}, ran)

	w := f.get()
	assert.Equal(t, w.Generation, w.Status.ObservedGeneration)
	assert.True(t, conditions.IsTrue(w, conditions.Ready))
	assert.True(t, conditions.IsTrue(w, "AReady"))
	assert.True(t, conditions.IsTrue(w, "CReady"))
	assert.Nil(t, conditions.Get(w, conditions.Reconciling))
	assert.Nil(t, conditions.Get(w, conditions.Stalled))
	for _, c := range w.Status.Conditions {
		assert.Equal(t, w.Generation, c.ObservedGeneration, c.Type)
	}
	assert.Equal(t, 1, f.c.Count(reconcilertest.Patch, "Widget"), "one status write:\n%s", f.c)

	f.assertIdempotent()
}

func TestWaitingStepLeavesReadyFalseWithoutError(t *testing.T) {
	var ran []string
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		continueStep("a", "AReady", &ran),
		{Name: "b", Condition: "BReady", Run: func(context.Context, *scope) reconciler.Outcome {
			ran = append(ran, "b")
			return reconciler.Wait("DatabaseMissing", "secret %q not found", "db")
		}},
		continueStep("c", "CReady", &ran),
	}})
	res, err := f.reconcile()
	require.NoError(t, err)
	assert.True(t, res.IsZero(), "a wait relies on watches, not requeues")
	assert.Equal(t, []string{"a", "b"}, ran, "steps after a wait do not run")

	w := f.get()
	ready := conditions.Get(w, conditions.Ready)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, "DatabaseMissing", ready.Reason)
	assert.Equal(t, `secret "db" not found`, ready.Message)
	assert.True(t, conditions.IsTrue(w, conditions.Reconciling))
	assert.Nil(t, conditions.Get(w, conditions.Stalled))
	f.assertIdempotent()
}

// A step without a condition that stops the pass leaves the conditions of
// the steps after it as an older generation left them; Ready must not keep
// saying True for the new generation.
func TestStoppedPassIsNeverReady(t *testing.T) {
	var outcome reconciler.Outcome
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "deploy", Run: func(context.Context, *scope) reconciler.Outcome { return outcome }},
		continueStep("check", "Available", new([]string)),
	}})
	outcome = reconciler.Continue()
	_, err := f.reconcile()
	require.NoError(t, err)
	require.True(t, conditions.IsTrue(f.get(), conditions.Ready))

	w := f.get()
	w.Spec.Size = 2
	require.NoError(t, env.Client.Update(f.ctx, w))
	for _, tt := range []struct {
		name       string
		outcome    reconciler.Outcome
		wantReason string
		wantMsg    string
	}{
		{"error", reconciler.Retry(errors.New("boom")), reconciler.ReasonError, "step deploy: boom"},
		{"wait", reconciler.Wait("Resizing", "1/2 resized"), "Resizing", "step deploy: 1/2 resized"},
		{"terminal", reconciler.Terminal("InvalidSize", errors.New("size 2 is not allowed")), "InvalidSize", "step deploy: size 2 is not allowed"},
	} {
		outcome = tt.outcome
		_, _ = f.reconcile()
		w := f.get()
		ready := conditions.Get(w, conditions.Ready)
		require.NotNil(t, ready, tt.name)
		assert.Equal(t, metav1.ConditionFalse, ready.Status, tt.name)
		assert.Equal(t, tt.wantReason, ready.Reason, tt.name)
		assert.Equal(t, tt.wantMsg, ready.Message, tt.name)
		assert.Equal(t, w.Generation, ready.ObservedGeneration, tt.name)
		assert.True(t, conditions.IsTrue(w, "Available"), "%s: the skipped step's condition is left alone", tt.name)
	}

	outcome = reconciler.Continue()
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.True(t, conditions.IsTrue(f.get(), conditions.Ready), "a finished pass is Ready again")
}

func TestWaitAfterRequeues(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "poll", Condition: "Polled", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Wait("NotYet", "external system not ready").RequeueAfter(30 * time.Second)
		}},
	}})
	res, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, res.RequeueAfter)
}

func TestTerminalErrorStallsWithoutRequeue(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "validate", Condition: "SpecValid", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Terminal("InvalidSpec", errors.New("size must be even"))
		}},
	}})
	res, err := f.reconcile()
	require.Error(t, err)
	assert.True(t, errors.Is(err, reconcile.TerminalError(nil)), "a terminal error is not retried: %v", err)
	assert.True(t, res.IsZero())

	w := f.get()
	stalled := conditions.Get(w, conditions.Stalled)
	require.NotNil(t, stalled)
	assert.Equal(t, metav1.ConditionTrue, stalled.Status)
	assert.Equal(t, "InvalidSpec", stalled.Reason)
	assert.Contains(t, stalled.Message, "size must be even")
	assert.True(t, conditions.IsFalse(w, conditions.Ready))
	assert.Nil(t, conditions.Get(w, conditions.Reconciling))

	evs := f.drainEvents()
	assert.True(t, slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Warning InvalidSpec") }), "%v", evs)
}

func TestTransientErrorIsRetriedAndKeepsEarlierStatus(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "note", Condition: "Noted", Run: func(_ context.Context, s *scope) reconciler.Outcome {
			s.Object.Status.Note = "written by step note"
			return reconciler.Continue()
		}},
		{Name: "flaky", Condition: "Flaky", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Retry(errors.New("backend unavailable"))
		}},
	}})
	_, err := f.reconcile()
	require.Error(t, err)
	assert.False(t, errors.Is(err, reconcile.TerminalError(nil)), "a transient error is retried with backoff")
	assert.Contains(t, err.Error(), "step flaky")

	w := f.get()
	assert.Equal(t, "written by step note", w.Status.Note, "status from steps before the failure is kept")
	assert.True(t, conditions.IsTrue(w, "Noted"))
	flaky := conditions.Get(w, "Flaky")
	require.NotNil(t, flaky)
	assert.Equal(t, reconciler.ReasonError, flaky.Reason)
	assert.True(t, conditions.IsTrue(w, conditions.Reconciling))
}

func TestPanicBecomesCondition(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "boom", Condition: "Boom", Run: func(context.Context, *scope) reconciler.Outcome {
			panic("boom")
		}},
	}})
	_, err := f.reconcile()
	require.ErrorContains(t, err, "panic")
	boom := conditions.Get(f.get(), "Boom")
	require.NotNil(t, boom)
	assert.Equal(t, reconciler.ReasonPanic, boom.Reason)
}

func TestNoStatusWriteWhenNothingChanged(t *testing.T) {
	passes := 0
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "count", Condition: "Counted", Run: func(context.Context, *scope) reconciler.Outcome {
			passes++
			return reconciler.ContinueWith("Counted", "size is %d", 1)
		}},
	}})
	_, err := f.reconcile()
	require.NoError(t, err)
	first := f.get().ResourceVersion
	for range 3 {
		_, err := f.reconcile()
		require.NoError(t, err)
		assert.Zero(t, f.c.Mutations(), "pass over an unchanged object wrote:\n%s", f.c)
	}
	assert.Equal(t, first, f.get().ResourceVersion)
	assert.Equal(t, 4, passes)

	// A spec change bumps the generation: exactly one status write follows.
	w := f.get()
	w.Spec.Size = 2
	require.NoError(t, env.Client.Update(f.ctx, w))
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, 1, f.c.Mutations(), "%s", f.c)
	w = f.get()
	assert.Equal(t, w.Generation, w.Status.ObservedGeneration)
}

// TestEventsFollowReady drives one object through a life of outcomes and
// checks the events of each pass: at most one, about Ready, only when Ready
// appears, flips, or fails for a new reason.
func TestEventsFollowReady(t *testing.T) {
	var outcome reconciler.Outcome
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		continueStep("a", "AReady", new([]string)),
		{Name: "b", Condition: "BReady", Run: func(context.Context, *scope) reconciler.Outcome { return outcome }},
	}})
	for _, pass := range []struct {
		name    string
		outcome reconciler.Outcome
		want    []string // event prefixes, in order
	}{
		{"first pass, waiting", reconciler.Wait("RollingOut", "0/2 replicas"), []string{"Normal RollingOut Ready=False: 0/2 replicas"}},
		{"still waiting, new reason", reconciler.Wait("ReplicasUnavailable", "1/2 replicas"), nil},
		{"failing while not Ready", reconciler.Retry(errors.New("boom")), []string{"Warning ReconcileError Ready=False"}},
		{"the same failure again", reconciler.Retry(errors.New("boom")), nil},
		{"Ready", reconciler.Continue(), []string{"Normal Succeeded Ready=True"}},
		{"Ready, unchanged", reconciler.Continue(), nil},
		{"stalled", reconciler.Terminal("InvalidSpec", errors.New("size must be even")), []string{"Warning InvalidSpec Ready=False"}},
		{"recovered", reconciler.Continue(), []string{"Normal Succeeded Ready=True"}},
	} {
		outcome = pass.outcome
		_, _ = f.reconcile()
		got := f.drainEvents()
		require.Len(t, got, len(pass.want), "%s: %v", pass.name, got)
		for i, want := range pass.want {
			assert.True(t, strings.HasPrefix(got[i], want), "%s: got %q, want %q...", pass.name, got[i], want)
		}
	}
}

func TestConcurrentStatusWriterIsNotLost(t *testing.T) {
	var once sync.Once
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "race", Condition: "Raced", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			once.Do(func() {
				// Another writer updates status after our read.
				other := &testv1.Widget{}
				require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(s.Object), other))
				other.Status.Note = "set by another writer"
				require.NoError(t, conditions.MarkTrue(other, "Foreign", "SetElsewhere", ""))
				require.NoError(t, env.Client.Status().Update(ctx, other))
			})
			return reconciler.Continue()
		}},
	}})
	_, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, 2, f.c.Count(reconcilertest.Patch, "Widget"), "a conflicting status write, then one on the fresh copy:\n%s", f.c)
	assert.Equal(t, 1, f.reader.Count(reconcilertest.Get, "Widget"), "the conflict was resolved by re-reading from the apiserver:\n%s", f.reader)
	w := f.get()
	assert.Equal(t, "set by another writer", w.Status.Note)
	assert.True(t, conditions.IsTrue(w, "Foreign"), "the other writer's condition survives")
	assert.True(t, conditions.IsTrue(w, "Raced"), "our condition is written")
	assert.True(t, conditions.IsTrue(w, conditions.Ready))
}

func TestDeletionRunsCleanupBeforeTheObjectDisappears(t *testing.T) {
	var cleaned atomic.Int32
	fail := true
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps:     []widgetStep{continueStep("a", "AReady", new([]string))},
		Finalizer: "test.reconcilekit.io/cleanup",
		Cleanup: []widgetStep{{Name: "release", Run: func(context.Context, *scope) reconciler.Outcome {
			if fail {
				return reconciler.Retry(errors.New("external API down"))
			}
			cleaned.Add(1)
			return reconciler.Continue()
		}}},
	})
	_, err := f.reconcile()
	require.NoError(t, err)
	w := f.get()
	require.Contains(t, w.Finalizers, "test.reconcilekit.io/cleanup", "finalizer is ensured before steps run")
	f.drainEvents()

	require.NoError(t, env.Client.Delete(f.ctx, w))
	_, err = f.reconcile()
	require.ErrorContains(t, err, "external API down")
	events := f.drainEvents()
	require.Len(t, events, 1, "the finalizer's event, not a second one from Ready flipping: %v", events)
	assert.True(t, strings.HasPrefix(events[0], "Warning CleanupFailed cleanup step release: external API down"), events[0])
	w = f.get()
	assert.Contains(t, w.Finalizers, "test.reconcilekit.io/cleanup", "failed cleanup keeps the finalizer")
	ready := conditions.Get(w, conditions.Ready)
	require.NotNil(t, ready)
	assert.Equal(t, "CleanupFailed", ready.Reason, "kubectl describe shows why it is stuck")

	fail = false
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.EqualValues(t, 1, cleaned.Load())
	events = f.drainEvents()
	require.Len(t, events, 1, "%v", events)
	assert.True(t, strings.HasPrefix(events[0], "Normal CleanupSucceeded"), events[0])
	err = env.Client.Get(f.ctx, f.req.NamespacedName, &testv1.Widget{})
	assert.True(t, apierrors.IsNotFound(err), "object is gone once cleanup succeeded: %v", err)
	_, err = f.reconcile()
	assert.NoError(t, err, "a missing object ends the pass quietly")
}

func TestPauseAnnotationStopsWrites(t *testing.T) {
	ran := 0
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps: []widgetStep{{Name: "a", Condition: "AReady", Run: func(context.Context, *scope) reconciler.Outcome {
			ran++
			return reconciler.Continue()
		}}},
		Finalizer: "test.reconcilekit.io/cleanup",
		Cleanup: []widgetStep{{Name: "noop", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Continue()
		}}},
	}, func(w *testv1.Widget) { w.Annotations = map[string]string{reconciler.PausedAnnotation: "true"} })

	_, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, 1, f.c.Mutations(), "only the Paused condition is written:\n%s", f.c)
	w := f.get()
	assert.True(t, conditions.IsTrue(w, reconciler.Paused))
	assert.Empty(t, w.Finalizers, "a paused object gets no finalizer")

	w.Spec.Size = 7
	require.NoError(t, env.Client.Update(f.ctx, w))
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.Zero(t, f.c.Mutations(), "%s", f.c)
	assert.Zero(t, ran)

	w = f.get()
	delete(w.Annotations, reconciler.PausedAnnotation)
	require.NoError(t, env.Client.Update(f.ctx, w))
	_, err = f.reconcile()
	require.NoError(t, err)
	w = f.get()
	assert.Equal(t, 1, ran)
	assert.Nil(t, conditions.Get(w, reconciler.Paused))
	assert.True(t, conditions.IsTrue(w, conditions.Ready))
}

func TestOwnedObjectsThroughScope(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}}, Steps: []widgetStep{
		{Name: "configmap", Condition: "ConfigReady", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			cm := corev1ac.ConfigMap(s.Object.Name+"-config", s.Object.Namespace).
				WithData(map[string]string{"size": fmt.Sprint(s.Object.Spec.Size)})
			if _, err := s.Apply(ctx, cm); err != nil {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		}},
	}})
	reconcilertest.ReconcileUntilQuiet(t, f.ctx, f.r, f.c, f.req, 5)
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, types.NamespacedName{Namespace: f.req.Namespace, Name: "w-config"}, cm))
	assert.Equal(t, "1", cm.Data["size"])
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, "Widget", cm.OwnerReferences[0].Kind)
	f.assertIdempotent()
}

func TestConvergesUnderInjectedFaults(t *testing.T) {
	for _, fault := range []reconcilertest.Fault{
		{Verb: "mutating", Err: reconcilertest.ErrConflict, Rate: 0.5},
		{Verb: "mutating", Err: reconcilertest.ErrServer, Rate: 0.5},
		{Verb: reconcilertest.Get, Err: reconcilertest.ErrTimeout, Rate: 0.3},
	} {
		t.Run(fault.Err.Error(), func(t *testing.T) {
			f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}},
				Steps: []widgetStep{{Name: "configmap", Condition: "ConfigReady", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
					cm := corev1ac.ConfigMap("cfg", s.Object.Namespace).WithData(map[string]string{"k": "v"})
					if _, err := s.Apply(ctx, cm); err != nil {
						return reconciler.Retry(err)
					}
					return reconciler.Continue()
				}}},
				Finalizer: "test.reconcilekit.io/cleanup",
				Cleanup: []widgetStep{{Name: "noop", Run: func(context.Context, *scope) reconciler.Outcome {
					return reconciler.Continue()
				}}},
			})
			f.c.Inject(fault)
			converged := false
			for range 40 {
				if _, err := f.reconcile(); err == nil && conditions.IsTrue(f.get(), conditions.Ready) {
					converged = true
					break
				}
			}
			require.True(t, converged, "did not converge under %v", fault.Err)
			f.c.ClearFaults()
			f.assertIdempotent()
		})
	}
}

func TestMetricsAreRegistered(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Name: "metrics-test", Steps: []widgetStep{
		{Name: "fails", Condition: "Fails", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Retry(errors.New("nope"))
		}},
	}})
	_, _ = f.reconcile()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	found := map[string]bool{}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "metrics-test" {
					found[mf.GetName()] = true
				}
			}
		}
	}
	for _, name := range []string{
		"reconcilekit_step_duration_seconds",
		"reconcilekit_step_errors_total",
		"reconcilekit_mutating_requests_per_reconcile",
	} {
		assert.True(t, found[name], "metric %s with controller=metrics-test", name)
	}
}

// countingReconciler counts how often the controller calls Reconcile, and
// when.
type countingReconciler struct {
	reconcile.Reconciler
	calls atomic.Int32
	mu    sync.Mutex
	at    []time.Time
}

func (c *countingReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c.mu.Lock()
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	c.calls.Add(1)
	return c.Reconciler.Reconcile(ctx, req)
}

// gaps returns the time between successive calls.
func (c *countingReconciler) gaps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(c.at); i++ {
		out = append(out, c.at[i].Sub(c.at[i-1]))
	}
	return out
}

// TestRequeueBehaviourUnderAManager runs the reconciler in a real
// controller: a terminal error is reconciled once and not again, a
// transient error is retried, with backoff rather than in a hot loop.
func TestRequeueBehaviourUnderAManager(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)

	build := func(name string, out reconciler.Outcome, preds ...predicate.Predicate) *countingReconciler {
		r, err := reconciler.New(mgr, reconciler.Options[*testv1.Widget]{Name: name, Steps: []widgetStep{
			{Name: "only", Condition: "Only", Run: func(context.Context, *scope) reconciler.Outcome { return out }},
		}})
		require.NoError(t, err)
		cr := &countingReconciler{Reconciler: r}
		require.NoError(t, ctrl.NewControllerManagedBy(mgr).Named(name).For(&testv1.Widget{}, builder.WithPredicates(preds...)).
			WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetNamespace() == ns && o.GetName() == name
			})).
			WithOptions(controller.Options{SkipNameValidation: new(true)}).Complete(cr))
		return cr
	}
	terminal := build("terminal", reconciler.Terminal("Bad", errors.New("bad spec")))
	// The watch event of its own status write would wake the transient
	// widget too, at any time under load; without it the only wake-ups
	// are the retries, so every gap between calls has a known lower bound.
	transient := build("transient", reconciler.Retry(errors.New("try again")), predicate.GenerationChangedPredicate{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()

	for _, name := range []string{"terminal", "transient"} {
		require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
	}
	// Wait until the transient reconciler has retried several times.
	const retries = 8
	require.Eventually(t, func() bool { return transient.calls.Load() > retries }, 30*time.Second, 20*time.Millisecond)
	// Each retry waits out controller-runtime's per-item exponential
	// backoff (5ms, doubling per failure) from the end of the failed call,
	// so the n-th gap is at least 5ms·2^(n-1): the gaps grow. Lower bounds
	// only, which load cannot break; a hot loop has gaps of a few ms.
	gaps := transient.gaps()
	require.GreaterOrEqual(t, len(gaps), retries)
	for n, gap := range gaps[:retries] {
		backoff := 5 * time.Millisecond << n
		assert.GreaterOrEqual(t, gap, backoff, "retry %d came %v after the call before it, sooner than the backoff of %v (gaps: %v)",
			n+1, gap, backoff, gaps)
	}
	// In that window the terminal widget was reconciled for its create
	// event and for the watch event of its own status write, and never
	// retried: a retry loop would have matched the transient count.
	assert.LessOrEqual(t, terminal.calls.Load(), int32(3))
	assert.GreaterOrEqual(t, terminal.calls.Load(), int32(1))
	stalled := &testv1.Widget{}
	require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "terminal"}, stalled))
	assert.True(t, conditions.IsTrue(stalled, conditions.Stalled))
}
