package reconciler_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

// The deletion path: Options.Cleanup steps run, with the live steps' Scope,
// client and panic handling, while the object is being deleted, and the
// finalizer goes once they all continue. These tests drive it against
// envtest through the fixture of reconciler_test.go; the events are the
// fake recorder's "Type Reason note" strings.

const (
	cleanupFinalizer = "test.reconcilekit.io/cleanup"
	// holdFinalizer is another controller's finalizer: it keeps a deleting
	// Widget around to be looked at after ours is gone.
	holdFinalizer = "other.example.com/hold"
)

func withFinalizers(names ...string) func(*testv1.Widget) {
	return func(w *testv1.Widget) { w.Finalizers = append(w.Finalizers, names...) }
}

// startDeletion runs the live pass, which ensures our finalizer, forgets
// its events and deletes the Widget: the next f.reconcile() is a deletion
// pass.
func startDeletion(t *testing.T, f *fixture) {
	t.Helper()
	_, err := f.reconcile()
	require.NoError(t, err, "the live pass")
	w := f.get()
	require.Contains(t, w.Finalizers, cleanupFinalizer, "the live pass ensured the finalizer")
	f.drainEvents()
	require.NoError(t, env.Client.Delete(f.ctx, w))
	require.NotNil(t, f.get().DeletionTimestamp, "the finalizer holds the Widget")
}

func widgetGone(t *testing.T, f *fixture) bool {
	t.Helper()
	err := env.Client.Get(f.ctx, f.req.NamespacedName, &testv1.Widget{})
	if apierrors.IsNotFound(err) {
		return true
	}
	require.NoError(t, err)
	return false
}

// typeAndReason returns "Type Reason" of each event.
func typeAndReason(evs []string) []string {
	out := []string{}
	for _, e := range evs {
		f := strings.Fields(e)
		out = append(out, f[0]+" "+f[1])
	}
	return out
}

// eventNote returns the note of a fake recorder event.
func eventNote(e string) string {
	parts := strings.SplitN(e, " ", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

func assertReady(t *testing.T, w *testv1.Widget, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	ready := conditions.Get(w, conditions.Ready)
	if !assert.NotNil(t, ready, "Ready condition") {
		return
	}
	assert.Equal(t, status, ready.Status, "Ready status")
	assert.Equal(t, reason, ready.Reason, "Ready reason")
	assert.Equal(t, message, ready.Message, "Ready message")
}

// TestCleanupLifecycle: the finalizer is on the server before any live step
// runs; a failing cleanup step keeps the deleting object and says so once
// in an event and in Ready; once it succeeds the finalizer goes, and with
// it the object.
func TestCleanupLifecycle(t *testing.T) {
	var released atomic.Int32
	var busy atomic.Bool
	busy.Store(true)
	var guarded []bool // per live pass: did the step find the finalizer on the server
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps: []widgetStep{{Name: "provision", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			server := &testv1.Widget{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s.Object), server); err != nil {
				return reconciler.Retry(err)
			}
			guarded = append(guarded, controllerutil.ContainsFinalizer(server, cleanupFinalizer) &&
				controllerutil.ContainsFinalizer(s.Object, cleanupFinalizer))
			return reconciler.Continue()
		}}},
		Finalizer: cleanupFinalizer,
		Cleanup: []widgetStep{{Name: "release-ip", Run: func(context.Context, *scope) reconciler.Outcome {
			released.Add(1)
			return reconciler.Continue()
		}}, {Name: "delete-bucket", Run: func(context.Context, *scope) reconciler.Outcome {
			if busy.Load() {
				return reconciler.Retry(errors.New("bucket busy"))
			}
			return reconciler.Continue()
		}}},
	})

	_, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, guarded, "the finalizer is written before the first step runs")
	assert.Zero(t, released.Load(), "no cleanup on a live object")
	f.drainEvents()
	require.NoError(t, env.Client.Delete(f.ctx, f.get()))

	// A failing step keeps the object, and says so in status and events.
	res, err := f.reconcile()
	require.EqualError(t, err, "cleanup step delete-bucket: bucket busy")
	assert.False(t, errors.Is(err, reconcile.TerminalError(nil)), "retried with backoff")
	assert.True(t, res.IsZero(), "no result with an error: %+v", res)
	assert.Equal(t, []string{"Warning CleanupFailed cleanup step delete-bucket: bucket busy"}, f.drainEvents(),
		"one event: the cleanup's, not a second one from Ready flipping")
	w := f.get()
	assert.Equal(t, []string{cleanupFinalizer}, w.Finalizers, "failed cleanup keeps the finalizer")
	assertReady(t, w, metav1.ConditionFalse, reconciler.ReasonCleanupFailed, "cleanup step delete-bucket: bucket busy")
	assert.Len(t, guarded, 1, "no live step runs on a deleting object")

	// Once the step succeeds, the next pass lets the object go.
	busy.Store(false)
	res, err = f.reconcile()
	require.NoError(t, err)
	assert.True(t, res.IsZero())
	assert.EqualValues(t, 2, released.Load(), "every pass starts from the first cleanup step")
	assert.Equal(t, []string{"Normal CleanupSucceeded all 2 cleanup steps succeeded; removed finalizer " + cleanupFinalizer},
		f.drainEvents())
	assert.Equal(t, 1, f.c.Mutations(), "the finalizer's removal and nothing else:\n%s", f.c)
	assert.True(t, widgetGone(t, f), "the object is gone once cleanup succeeded")

	_, err = f.reconcile()
	assert.NoError(t, err, "a missing object ends the pass quietly")
	assert.Empty(t, f.drainEvents())
}

// TestCleanupStepsStopAtTheFirstThatDoesNotContinue: cleanup steps run in
// order; the first outcome other than Continue ends the pass, keeps the
// finalizer and sets Ready=False; only Retry, Terminal and a panic are
// failures (a Warning and an error), a Wait is not.
func TestCleanupStepsStopAtTheFirstThatDoesNotContinue(t *testing.T) {
	boom := errors.New("boom")
	for _, tt := range []struct {
		name string
		run  func() reconciler.Outcome

		wantRan      []string
		wantRes      time.Duration
		wantErr      string // "" for none
		wantTerminal bool
		wantEvents   []string
		wantReason   string // of Ready; "" when the finalizer goes
		wantMessage  string
	}{{
		name: "all continue", run: reconciler.Continue,
		wantRan: []string{"first", "second", "third"}, wantEvents: []string{"Normal CleanupSucceeded"},
	}, {
		name: "wait", run: func() reconciler.Outcome { return reconciler.Wait("VolumeAttached", "volume %s still attached", "v1") },
		wantRan: []string{"first", "second"}, wantEvents: []string{},
		wantReason: "VolumeAttached", wantMessage: "cleanup step second: volume v1 still attached",
	}, {
		name: "wait with After", run: func() reconciler.Outcome {
			return reconciler.Wait("VolumeAttached", "volume %s still attached", "v1").RequeueAfter(5 * time.Second)
		},
		wantRan: []string{"first", "second"}, wantRes: 5 * time.Second, wantEvents: []string{},
		wantReason: "VolumeAttached", wantMessage: "cleanup step second: volume v1 still attached",
	}, {
		name: "error", run: func() reconciler.Outcome { return reconciler.Retry(boom) },
		wantRan: []string{"first", "second"}, wantErr: "cleanup step second: boom",
		wantEvents: []string{"Warning CleanupFailed"},
		wantReason: reconciler.ReasonCleanupFailed, wantMessage: "cleanup step second: boom",
	}, {
		name: "terminal", run: func() reconciler.Outcome { return reconciler.Terminal("BucketLocked", boom) },
		wantRan: []string{"first", "second"}, wantErr: "terminal error: cleanup step second: boom", wantTerminal: true,
		wantEvents: []string{"Warning CleanupFailed"},
		wantReason: reconciler.ReasonCleanupFailed, wantMessage: "cleanup step second: boom",
	}, {
		name: "panic", run: func() reconciler.Outcome { panic("boom") },
		wantRan: []string{"first", "second"}, wantErr: "cleanup step second: panic: boom",
		wantEvents: []string{"Warning CleanupFailed"},
		wantReason: reconciler.ReasonCleanupFailed, wantMessage: "cleanup step second: panic: boom",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			var ran []string
			record := func(name string, run func() reconciler.Outcome) widgetStep {
				return widgetStep{Name: name, Run: func(context.Context, *scope) reconciler.Outcome {
					ran = append(ran, name)
					return run()
				}}
			}
			f := newFixture(t, reconciler.Options[*testv1.Widget]{
				Finalizer: cleanupFinalizer,
				Cleanup:   []widgetStep{record("first", reconciler.Continue), record("second", tt.run), record("third", reconciler.Continue)},
			}, withFinalizers(holdFinalizer))
			startDeletion(t, f)
			require.Empty(t, ran, "no cleanup on a live object")

			res, err := f.reconcile()

			assert.Equal(t, tt.wantRan, ran, "cleanup steps run")
			if tt.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, tt.wantErr)
				assert.Equal(t, tt.wantTerminal, errors.Is(err, reconcile.TerminalError(nil)), "terminal: %v", err)
				if tt.name != "panic" {
					assert.ErrorIs(t, err, boom)
				}
			}
			assert.Equal(t, tt.wantRes, res.RequeueAfter, "RequeueAfter")
			evs := f.drainEvents()
			assert.Equal(t, tt.wantEvents, typeAndReason(evs), "events: %v", evs)
			w := f.get()
			if tt.wantReason == "" {
				assert.Equal(t, []string{holdFinalizer}, w.Finalizers, "ours is removed, the other controller's kept")
				assert.Zero(t, f.c.Count(reconcilertest.Patch, "Widget/status"), "no status write:\n%s", f.c)
				return
			}
			assert.ElementsMatch(t, []string{holdFinalizer, cleanupFinalizer}, w.Finalizers, "the finalizer stays")
			assertReady(t, w, metav1.ConditionFalse, tt.wantReason, tt.wantMessage)
		})
	}
}

// TestCleanupDeadline: past Options.CleanupDeadline every pass that cleanup
// stops warns CleanupOverdue; RemoveFinalizerAfterDeadline then removes the
// finalizer anyway. The deletionTimestamp is in the past by the time the
// pass runs, so a deadline of 1ns has always passed.
func TestCleanupDeadline(t *testing.T) {
	const overdueNote = `^cleanup has been stuck for \d+s since deletion \(deadline 1ns\): cleanup step delete-bucket: `
	const fail, wait = false, true
	for _, tt := range []struct {
		name     string
		deadline time.Duration
		force    bool
		waits    bool // the step waits rather than fails

		wantEvents []string
		wantNote   string // of CleanupOverdue, after overdueNote
		wantGone   bool
	}{{
		name: "failing past the deadline warns on every pass", deadline: time.Nanosecond, waits: fail,
		wantEvents: []string{"Warning CleanupFailed", "Warning CleanupOverdue"}, wantNote: "bucket busy",
	}, {
		name: "waiting past the deadline warns on every pass", deadline: time.Nanosecond, waits: wait,
		wantEvents: []string{"Warning CleanupOverdue"}, wantNote: "3 objects left",
	}, {
		name: "failing before the deadline is not overdue", deadline: time.Hour, force: true, waits: fail,
		wantEvents: []string{"Warning CleanupFailed"},
	}, {
		name: "RemoveFinalizerAfterDeadline without a CleanupDeadline does nothing", force: true, waits: fail,
		wantEvents: []string{"Warning CleanupFailed"},
	}, {
		name: "failing past the deadline with RemoveFinalizerAfterDeadline", deadline: time.Nanosecond, force: true, waits: fail,
		wantEvents: []string{"Warning CleanupFailed", "Warning CleanupOverdue", "Warning FinalizerForceRemoved"},
		wantNote:   "bucket busy", wantGone: true,
	}, {
		name: "waiting past the deadline with RemoveFinalizerAfterDeadline", deadline: time.Nanosecond, force: true, waits: wait,
		wantEvents: []string{"Warning CleanupOverdue", "Warning FinalizerForceRemoved"},
		wantNote:   "3 objects left", wantGone: true,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, reconciler.Options[*testv1.Widget]{
				Finalizer:                    cleanupFinalizer,
				CleanupDeadline:              tt.deadline,
				RemoveFinalizerAfterDeadline: tt.force,
				Cleanup: []widgetStep{{Name: "delete-bucket", Run: func(context.Context, *scope) reconciler.Outcome {
					if tt.waits {
						return reconciler.Wait("BucketNotEmpty", "%d objects left", 3)
					}
					return reconciler.Retry(errors.New("bucket busy"))
				}}},
			})
			startDeletion(t, f)
			passes := 2
			if tt.wantGone {
				passes = 1
			}
			for pass := 1; pass <= passes; pass++ {
				_, err := f.reconcile()
				evs := f.drainEvents()
				require.Equal(t, tt.wantEvents, typeAndReason(evs), "pass %d: %v", pass, evs)
				for _, e := range evs {
					switch {
					case strings.HasPrefix(e, "Warning CleanupOverdue "):
						assert.Regexp(t, overdueNote+regexp.QuoteMeta(tt.wantNote)+"$", eventNote(e))
					case strings.HasPrefix(e, "Warning FinalizerForceRemoved "):
						assert.Regexp(t, `^removed finalizer `+regexp.QuoteMeta(cleanupFinalizer)+` without completing cleanup, \d+s after deletion \(deadline 1ns\): cleanup step delete-bucket: `+
							regexp.QuoteMeta(tt.wantNote)+`; resources it guards may be left behind$`, eventNote(e))
					}
				}
				if tt.wantGone {
					require.NoError(t, err, "the policy chose deletion; the events say why")
					assert.True(t, widgetGone(t, f), "the finalizer was removed anyway")
					return
				}
				w := f.get()
				assert.Equal(t, []string{cleanupFinalizer}, w.Finalizers, "pass %d: kept unless the policy says otherwise", pass)
				if tt.waits {
					require.NoError(t, err, "waiting is not a failure")
					assertReady(t, w, metav1.ConditionFalse, "BucketNotEmpty", "cleanup step delete-bucket: 3 objects left")
				} else {
					require.EqualError(t, err, "cleanup step delete-bucket: bucket busy")
					assertReady(t, w, metav1.ConditionFalse, reconciler.ReasonCleanupFailed, "cleanup step delete-bucket: bucket busy")
				}
			}
		})
	}
}

// TestCleanupWaitingForTheDeadline: a Wait without After relies on a watch
// to wake it, so with a CleanupDeadline ahead the pass is requeued for the
// moment it passes, when CleanupOverdue (or the forced removal) is due.
func TestCleanupWaitingForTheDeadline(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Finalizer:       cleanupFinalizer,
		CleanupDeadline: time.Hour,
		Cleanup: []widgetStep{{Name: "delete-bucket", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Wait("BucketNotEmpty", "%d objects left", 3)
		}}},
	})
	startDeletion(t, f)
	res, err := f.reconcile()
	require.NoError(t, err)
	assert.Greater(t, res.RequeueAfter, 58*time.Minute, "requeued for the deadline")
	assert.LessOrEqual(t, res.RequeueAfter, time.Hour)
	assert.Empty(t, f.drainEvents())
}

// TestCleanupWaitingPastTheDeadlineIsNotPolled: once the deadline has
// passed (and the policy keeps the finalizer) a Wait without After must not
// be requeued every second: each such pass re-runs every cleanup step, with
// whatever external calls they make, and emits another CleanupOverdue
// Warning, forever. A watch event still wakes it, and warns again.
func TestCleanupWaitingPastTheDeadlineIsNotPolled(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Finalizer:       cleanupFinalizer,
		CleanupDeadline: time.Nanosecond,
		Cleanup: []widgetStep{{Name: "delete-bucket", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Wait("BucketNotEmpty", "%d objects left", 3)
		}}},
	})
	startDeletion(t, f)
	res, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, []string{"Warning CleanupOverdue"}, typeAndReason(f.drainEvents()))
	assert.Zero(t, res.RequeueAfter, "a deadline that has passed is no reason to poll")
}

// TestCleanupWritesAreCounted: a cleanup step's writes go through the
// pass's counting client, like a live step's, so they show in the
// reconcilekit_mutating_requests_per_reconcile metric (they did not while
// the finalizer package ran cleanup with a client of its own).
func TestCleanupWritesAreCounted(t *testing.T) {
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Finalizer: cleanupFinalizer,
		Cleanup: []widgetStep{{Name: "leave-tombstone", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: s.Object.Name + "-tombstone", Namespace: s.Object.Namespace},
				Data:       map[string]string{"deleted": s.Object.Name},
			}
			if err := s.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		}}},
	})
	startDeletion(t, f)
	count, sum := mutatingRequestsObserved(t, f.opts.Name)

	_, err := f.reconcile()
	require.NoError(t, err)
	require.True(t, widgetGone(t, f))
	assert.Equal(t, 1, f.c.Count(reconcilertest.Create, "ConfigMap"), "%s", f.c)
	assert.Equal(t, 1, f.c.Count(reconcilertest.Patch, "Widget"), "the finalizer's removal:\n%s", f.c)
	assert.Equal(t, 2, f.c.Mutations(), "%s", f.c)
	count2, sum2 := mutatingRequestsObserved(t, f.opts.Name)
	assert.Equal(t, count+1, count2, "one pass observed")
	assert.InDelta(t, 2, sum2-sum, 0, "the pass's two writes: the step's create and the finalizer's removal")
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.req.Namespace, Name: "w-tombstone"}, &corev1.ConfigMap{}))
}

// mutatingRequestsObserved returns the sample count and sum of the
// reconcilekit_mutating_requests_per_reconcile histogram of controller.
func mutatingRequestsObserved(t *testing.T, controller string) (count uint64, sum float64) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != "reconcilekit_mutating_requests_per_reconcile" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
				}
			}
		}
	}
	return 0, 0
}

// TestDeletingObjectWithoutOurFinalizerRunsNoCleanup: cleanup is what our
// finalizer guards; an object deleted before it was added (or after it was
// removed) is left to the API server and the other finalizers.
func TestDeletingObjectWithoutOurFinalizerRunsNoCleanup(t *testing.T) {
	ran := 0
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Steps: []widgetStep{{Name: "live", Run: func(context.Context, *scope) reconciler.Outcome {
			ran++
			return reconciler.Continue()
		}}},
		Finalizer: cleanupFinalizer,
		Cleanup: []widgetStep{{Name: "cleanup", Run: func(context.Context, *scope) reconciler.Outcome {
			ran++
			return reconciler.Retry(errors.New("must not run"))
		}}},
	}, withFinalizers(holdFinalizer))
	require.NoError(t, env.Client.Delete(f.ctx, f.get()))

	res, err := f.reconcile()
	require.NoError(t, err)
	assert.True(t, res.IsZero())
	assert.Zero(t, ran, "neither cleanup nor live steps run")
	assert.Zero(t, f.c.Mutations(), "nothing is written, no finalizer added:\n%s", f.c)
	assert.Empty(t, f.drainEvents())
	assert.Equal(t, []string{holdFinalizer}, f.get().Finalizers)
}

// TestCleanupEventNotesAreCut: the API server rejects event notes over 1024
// bytes, so the deletion path's notes are cut, on a rune boundary (a cut
// inside a character is not valid UTF-8), and a step's error is never read
// as a format.
func TestCleanupEventNotesAreCut(t *testing.T) {
	// Two prefixes of different parity: one of them puts any fixed byte
	// limit inside a two-byte "é".
	for _, prefix := range []string{"x", "xy"} {
		t.Run(prefix, func(t *testing.T) {
			cause := prefix + " 100% broken: " + strings.Repeat("é", 600) // over 1200 bytes
			f := newFixture(t, reconciler.Options[*testv1.Widget]{
				Finalizer:                    cleanupFinalizer,
				CleanupDeadline:              time.Nanosecond,
				RemoveFinalizerAfterDeadline: true,
				Cleanup: []widgetStep{{Name: "drop-db", Run: func(context.Context, *scope) reconciler.Outcome {
					return reconciler.Retry(errors.New(cause))
				}}},
			})
			startDeletion(t, f)
			_, err := f.reconcile()
			require.NoError(t, err)
			evs := f.drainEvents()
			require.Equal(t, []string{"Warning CleanupFailed", "Warning CleanupOverdue", "Warning FinalizerForceRemoved"}, typeAndReason(evs))
			assert.True(t, strings.HasPrefix(evs[0], "Warning CleanupFailed cleanup step drop-db: "+prefix+" 100% broken: éé"),
				"a %% in the error is not a format verb: %.80q", evs[0])
			for _, e := range evs {
				note := eventNote(e)
				assert.LessOrEqual(t, len(note), 1024, "the API server rejects longer notes")
				assert.Greater(t, len(note), 1000, "cut at the limit, not before")
				assert.True(t, utf8.ValidString(note), "valid UTF-8: %q", note[len(note)-8:])
				assert.True(t, strings.HasSuffix(note, "…"), "the cut is marked: %q", note[len(note)-8:])
			}
		})
	}
}

// Cleanup's configuration errors surface at New, naming the field.
func TestNewRejectsBadCleanupConfiguration(t *testing.T) {
	scheme, err := testenv.NewScheme()
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	run := func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }
	for _, tt := range []struct {
		name string
		opts reconciler.Options[*testv1.Widget]
		want []string // each in the error; nil: accepted
	}{{
		name: "a cleanup step with a Condition",
		opts: reconciler.Options[*testv1.Widget]{Finalizer: cleanupFinalizer,
			Cleanup: []widgetStep{{Name: "a", Run: run}, {Name: "b", Condition: "BucketDeleted", Run: run}}},
		want: []string{"Options.Cleanup[1].Condition: cleanup steps own no condition"},
	}, {
		name: "a name used by a live step and a cleanup step",
		opts: reconciler.Options[*testv1.Widget]{Steps: []widgetStep{{Name: "bucket", Run: run}}, Finalizer: cleanupFinalizer,
			Cleanup: []widgetStep{{Name: "bucket", Run: run}}},
		want: []string{`Options.Cleanup[0].Name "bucket" is not unique`},
	}, {
		name: "a name used twice in Cleanup",
		opts: reconciler.Options[*testv1.Widget]{Finalizer: cleanupFinalizer,
			Cleanup: []widgetStep{{Name: "bucket", Run: run}, {Name: "bucket", Run: run}}},
		want: []string{`Options.Cleanup[1].Name "bucket" is not unique`},
	}, {
		name: "an unnamed cleanup step and one without Run",
		opts: reconciler.Options[*testv1.Widget]{Finalizer: cleanupFinalizer,
			Cleanup: []widgetStep{{Run: run}, {Name: "b"}}},
		want: []string{"Options.Cleanup[0].Name is required", `Options.Cleanup[1].Run ("b") is nil`},
	}, {
		name: "Cleanup without Finalizer",
		opts: reconciler.Options[*testv1.Widget]{Cleanup: []widgetStep{{Name: "a", Run: run}}},
		want: []string{"Options.Finalizer is required when Options.Cleanup is set"},
	}, {
		name: "an invalid finalizer name",
		opts: reconciler.Options[*testv1.Widget]{Finalizer: "example.com/-x-", Cleanup: []widgetStep{{Name: "a", Run: run}}},
		want: []string{`Options.Finalizer: invalid finalizer name "example.com/-x-"`},
	}, {
		name: "the garbage collector's finalizer",
		opts: reconciler.Options[*testv1.Widget]{Finalizer: "orphan", Cleanup: []widgetStep{{Name: "a", Run: run}}},
		want: []string{`Options.Finalizer: invalid finalizer name "orphan": must be domain-qualified`},
	}, {
		name: "a Finalizer without Cleanup",
		opts: reconciler.Options[*testv1.Widget]{Finalizer: cleanupFinalizer},
		want: []string{`Options.Finalizer "test.reconcilekit.io/cleanup" is set but Options.Cleanup is empty`, "Options.RetiredFinalizers"},
	}, {
		name: "bad retired finalizers",
		opts: reconciler.Options[*testv1.Widget]{Finalizer: cleanupFinalizer, Cleanup: []widgetStep{{Name: "a", Run: run}},
			RetiredFinalizers: []string{"example.com/old", "example.com/-x-", "orphan", cleanupFinalizer, "example.com/old"}},
		want: []string{
			`Options.RetiredFinalizers[1]: invalid finalizer name "example.com/-x-"`,
			`Options.RetiredFinalizers[2]: "orphan" is the garbage collector's finalizer`,
			`Options.RetiredFinalizers[3]: "test.reconcilekit.io/cleanup" is Options.Finalizer, which this release still uses`,
			`Options.RetiredFinalizers[4]: "example.com/old" is listed twice`,
		},
	}, {
		name: "retired finalizers, unqualified legacy ones included, without Cleanup",
		opts: reconciler.Options[*testv1.Widget]{RetiredFinalizers: []string{cleanupFinalizer, "legacy-cleanup"}},
	}, {
		name: "a valid cleanup configuration",
		opts: reconciler.Options[*testv1.Widget]{Steps: []widgetStep{{Name: "a", Condition: "A", Run: run}},
			Finalizer: cleanupFinalizer, Cleanup: []widgetStep{{Name: "b", Run: run}},
			CleanupDeadline: time.Hour, RemoveFinalizerAfterDeadline: true},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Name, tt.opts.Client, tt.opts.APIReader, tt.opts.Scheme = "test", c, c, scheme
			r, err := reconciler.New(nil, tt.opts)
			if tt.want == nil {
				require.NoError(t, err)
				assert.NotNil(t, r)
				return
			}
			require.Error(t, err)
			for _, want := range tt.want {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

// A forced removal past the deadline still writes why: when another
// controller's finalizer keeps the object, its Ready says that our cleanup
// failed, not whatever the last live pass said.
func TestForcedRemovalStillReportsTheFailure(t *testing.T) {
	const other = "other.example.com/keep"
	f := newFixture(t, reconciler.Options[*testv1.Widget]{
		Finalizer:                    cleanupFinalizer,
		CleanupDeadline:              time.Nanosecond,
		RemoveFinalizerAfterDeadline: true,
		Cleanup: []widgetStep{{Name: "delete-bucket", Run: func(context.Context, *scope) reconciler.Outcome {
			return reconciler.Retry(errors.New("bucket busy"))
		}}},
	}, func(w *testv1.Widget) { w.Finalizers = []string{other} })
	startDeletion(t, f)
	_, err := f.reconcile()
	require.NoError(t, err, "the policy chose deletion over cleanup")
	w := f.get()
	assert.Equal(t, []string{other}, w.Finalizers)
	ready := conditions.Get(w, conditions.Ready)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, reconciler.ReasonCleanupFailed, ready.Reason)
	assert.Equal(t, "cleanup step delete-bucket: bucket busy", ready.Message)
}
