package finalizer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

// These tests cover Finalize's control flow, where API semantics do not
// matter; the patches themselves are tested against a real API server in
// finalizer_test.go.

const (
	ours  = "apps.example.com/cleanup"
	other = "other.example.com/hold"
)

// fakeWorld is a fake client holding one deleting Widget, plus a recorder.
type fakeWorld struct {
	c   client.Client
	rec *events.FakeRecorder
	w   *testv1.Widget
}

func newFakeWorld(t *testing.T, deletedAgo time.Duration, finalizers ...string) fakeWorld {
	t.Helper()
	s, err := testenv.NewScheme()
	require.NoError(t, err)
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{
		Name: "w", Namespace: "ns", Finalizers: finalizers,
		DeletionTimestamp: &metav1.Time{Time: time.Now().Add(-deletedAgo)},
	}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(w).WithStatusSubresource(w).Build()
	got := &testv1.Widget{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(w), got))
	return fakeWorld{c: c, rec: events.NewFakeRecorder(32), w: got}
}

func (fw fakeWorld) serverFinalizers(t *testing.T) []string {
	t.Helper()
	got := &testv1.Widget{}
	require.NoError(t, fw.c.Get(context.Background(), client.ObjectKeyFromObject(fw.w), got))
	return got.Finalizers
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// reasons returns "<type> <reason>" for each recorded event.
func reasons(evs []string) []string {
	var out []string
	for _, e := range evs {
		f := strings.Fields(e)
		out = append(out, f[0]+" "+f[1])
	}
	return out
}

func TestFinalizeControlFlow(t *testing.T) {
	boom := errors.New("boom")
	ok := func(context.Context, *testv1.Widget) (Result, error) { return Result{}, nil }
	wait := func(context.Context, *testv1.Widget) (Result, error) { return Result{RequeueAfter: time.Minute}, nil }
	fail := func(context.Context, *testv1.Widget) (Result, error) { return Result{}, boom }

	tests := []struct {
		name       string
		deletedAgo time.Duration
		finalizers []string
		second     func(context.Context, *testv1.Widget) (Result, error)
		deadline   time.Duration
		force      bool

		wantDone       bool
		wantRes        Result
		wantErr        bool
		wantRan        []string
		wantFinalizers []string
		wantEvents     []string
		wantCondition  bool
	}{{
		name: "finalizer absent: done without running steps", finalizers: []string{other}, second: ok,
		wantDone: true, wantFinalizers: []string{other},
	}, {
		name: "all steps succeed: finalizer removed, others kept", finalizers: []string{other, ours}, second: ok,
		wantDone: true, wantRan: []string{"first", "second", "third"}, wantFinalizers: []string{other},
		wantEvents: []string{"Normal CleanupSucceeded"},
	}, {
		name: "requeue stops the pass and keeps the finalizer", finalizers: []string{ours, other}, second: wait,
		wantRes: Result{RequeueAfter: time.Minute}, wantRan: []string{"first", "second"},
		wantFinalizers: []string{ours, other},
	}, {
		name: "failure stops the pass, warns and sets the condition", finalizers: []string{ours, other}, second: fail,
		wantErr: true, wantRan: []string{"first", "second"}, wantFinalizers: []string{ours, other},
		wantEvents: []string{"Warning CleanupFailed"}, wantCondition: true,
	}, {
		name: "failure before the deadline is not overdue", deletedAgo: time.Hour, finalizers: []string{ours, other},
		second: fail, deadline: 2 * time.Hour, force: true,
		wantErr: true, wantRan: []string{"first", "second"}, wantFinalizers: []string{ours, other},
		wantEvents: []string{"Warning CleanupFailed"}, wantCondition: true,
	}, {
		name: "failure past the deadline warns but keeps the finalizer", deletedAgo: 2 * time.Hour,
		finalizers: []string{ours, other}, second: fail, deadline: time.Hour,
		wantErr: true, wantRan: []string{"first", "second"}, wantFinalizers: []string{ours, other},
		wantEvents: []string{"Warning CleanupFailed", "Warning CleanupOverdue"}, wantCondition: true,
	}, {
		name: "failure past the deadline with RemoveAfterDeadline removes it", deletedAgo: 2 * time.Hour,
		finalizers: []string{ours, other}, second: fail, deadline: time.Hour, force: true,
		wantDone: true, wantRan: []string{"first", "second"}, wantFinalizers: []string{other},
		wantEvents:    []string{"Warning CleanupFailed", "Warning CleanupOverdue", "Warning FinalizerForceRemoved"},
		wantCondition: true,
	}, {
		name: "waiting past the deadline warns but keeps the finalizer", deletedAgo: 2 * time.Hour,
		finalizers: []string{ours, other}, second: wait, deadline: time.Hour,
		wantRes: Result{RequeueAfter: time.Minute}, wantRan: []string{"first", "second"},
		wantFinalizers: []string{ours, other}, wantEvents: []string{"Warning CleanupOverdue"},
	}, {
		name: "waiting past the deadline with RemoveAfterDeadline removes it", deletedAgo: 2 * time.Hour,
		finalizers: []string{ours, other}, second: wait, deadline: time.Hour, force: true,
		wantDone: true, wantRan: []string{"first", "second"}, wantFinalizers: []string{other},
		wantEvents: []string{"Warning CleanupOverdue", "Warning FinalizerForceRemoved"},
	}, {
		name: "RemoveAfterDeadline without a Deadline does nothing", deletedAgo: 1000 * time.Hour,
		finalizers: []string{ours, other}, second: fail, force: true,
		wantErr: true, wantRan: []string{"first", "second"}, wantFinalizers: []string{ours, other},
		wantEvents: []string{"Warning CleanupFailed"}, wantCondition: true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			fw := newFakeWorld(t, tt.deletedAgo, tt.finalizers...)
			var ran []string
			record := func(name string, run func(context.Context, *testv1.Widget) (Result, error)) Step[*testv1.Widget] {
				return Step[*testv1.Widget]{Name: name, Run: func(ctx context.Context, w *testv1.Widget) (Result, error) {
					ran = append(ran, name)
					return run(ctx, w)
				}}
			}
			f := &Finalizer[*testv1.Widget]{
				Name: ours, Client: fw.c, Recorder: fw.rec, Deadline: tt.deadline, RemoveAfterDeadline: tt.force,
				Steps: []Step[*testv1.Widget]{record("first", ok), record("second", tt.second), record("third", ok)},
			}

			done, res, err := f.Finalize(ctx, fw.w)

			assert.Equal(t, tt.wantDone, done, "done")
			assert.Equal(t, tt.wantRes, res, "result")
			if tt.wantErr {
				require.Error(t, err)
				assert.ErrorIs(t, err, boom)
				assert.Contains(t, err.Error(), `cleanup step "second"`)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.wantRan, ran, "steps run")
			assert.Equal(t, tt.wantFinalizers, fw.serverFinalizers(t), "finalizers on the server")
			assert.Equal(t, tt.wantEvents, reasons(drain(fw.rec.Events)), "events")
			ready := conditions.Get(fw.w, conditions.Ready)
			if !tt.wantCondition {
				assert.Nil(t, ready, "Ready condition")
				return
			}
			require.NotNil(t, ready, "Ready condition")
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Equal(t, ReasonCleanupFailed, ready.Reason)
			assert.Equal(t, "cleanup step second: boom", ready.Message)
		})
	}
}

func TestFinalizeEventNotes(t *testing.T) {
	ctx := context.Background()
	fw := newFakeWorld(t, 3*time.Hour, ours, other)
	f := &Finalizer[*testv1.Widget]{
		Name: ours, Client: fw.c, Recorder: fw.rec, Deadline: time.Hour, RemoveAfterDeadline: true,
		Steps: []Step[*testv1.Widget]{{Name: "drop-db", Run: func(context.Context, *testv1.Widget) (Result, error) {
			return Result{}, errors.New("100% broken: " + strings.Repeat("x", 2*noteLimit))
		}}},
	}
	_, _, err := f.Finalize(ctx, fw.w)
	require.NoError(t, err)

	evs := drain(fw.rec.Events)
	require.Len(t, evs, 3)
	assert.True(t, strings.HasPrefix(evs[0], "Warning CleanupFailed cleanup step drop-db: 100% broken: xxx"),
		"a %% in the error is not treated as a format verb: %q", evs[0][:60])
	assert.Regexp(t, `^Warning CleanupOverdue cleanup has been stuck for 3h0m\d+s since deletion \(deadline 1h0m0s\): step drop-db fails: 100% broken`, evs[1])
	assert.Regexp(t, `^Warning FinalizerForceRemoved removed finalizer apps.example.com/cleanup without completing cleanup`, evs[2])
	for _, e := range evs {
		note := strings.SplitN(e, " ", 3)[2]
		assert.LessOrEqual(t, len(note), noteLimit, "the API server rejects longer notes")
	}
}

func TestFinalizeRejectsMisuse(t *testing.T) {
	fw := newFakeWorld(t, 0, ours)
	ok := func(context.Context, *testv1.Widget) (Result, error) { return Result{}, nil }
	tests := []struct {
		name    string
		f       Finalizer[*testv1.Widget]
		obj     *testv1.Widget
		wantErr string
	}{
		{"unqualified name", Finalizer[*testv1.Widget]{Name: "cleanup", Client: fw.c}, fw.w, "must be domain-qualified"},
		{"invalid name", Finalizer[*testv1.Widget]{Name: "a.com/-x-", Client: fw.c}, fw.w, "invalid finalizer name"},
		{"no client", Finalizer[*testv1.Widget]{Name: ours}, fw.w, "Client is nil"},
		{"unnamed step", Finalizer[*testv1.Widget]{Name: ours, Client: fw.c, Steps: []Step[*testv1.Widget]{{Run: ok}}}, fw.w, "Steps[0].Name is empty"},
		{"duplicate step", Finalizer[*testv1.Widget]{Name: ours, Client: fw.c, Steps: []Step[*testv1.Widget]{{Name: "a", Run: ok}, {Name: "a", Run: ok}}}, fw.w, `Steps[1].Name "a" is not unique`},
		{"step without Run", Finalizer[*testv1.Widget]{Name: ours, Client: fw.c, Steps: []Step[*testv1.Widget]{{Name: "a"}}}, fw.w, "Steps[0] (a).Run is nil"},
		{"object not being deleted", Finalizer[*testv1.Widget]{Name: ours, Client: fw.c}, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "live", Namespace: "ns", Finalizers: []string{ours}}}, "Widget ns/live is not being deleted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, _, err := tt.f.Finalize(context.Background(), tt.obj)
			require.ErrorContains(t, err, tt.wantErr)
			assert.False(t, done)
		})
	}
	assert.Equal(t, []string{ours}, fw.serverFinalizers(t), "nothing was removed")
}

// TestPatchCarriesOnlyFinalizersAndLock pins the wire format the envtest
// suite relies on: the patch names no spec or status field and is locked to
// the resourceVersion obj was read at.
func TestPatchCarriesOnlyFinalizersAndLock(t *testing.T) {
	s, err := testenv.NewScheme()
	require.NoError(t, err)
	w := &testv1.Widget{
		ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", Finalizers: []string{other}},
		Spec:       testv1.WidgetSpec{Color: "red"},
	}
	var patches []string
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(w).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			data, err := p.Data(obj)
			require.NoError(t, err)
			patches = append(patches, string(p.Type())+" "+string(data))
			return c.Patch(ctx, obj, p, opts...)
		},
	}).Build()
	ctx := context.Background()
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), w))
	w.Spec.Color = "unsaved edit that must not be sent"
	rv := w.ResourceVersion

	changed, err := Ensure(ctx, c, w, ours)
	require.NoError(t, err)
	require.True(t, changed)
	assert.Equal(t, "red", w.Spec.Color, "obj holds the server's copy afterwards")
	rv2 := w.ResourceVersion
	changed, err = Remove(ctx, c, w, other)
	require.NoError(t, err)
	require.True(t, changed)

	require.Len(t, patches, 2)
	assert.JSONEq(t, `{"metadata":{"finalizers":["other.example.com/hold","apps.example.com/cleanup"],"resourceVersion":"`+rv+`"}}`,
		strings.TrimPrefix(patches[0], "application/merge-patch+json "))
	assert.JSONEq(t, `{"metadata":{"finalizers":["apps.example.com/cleanup"],"resourceVersion":"`+rv2+`"}}`,
		strings.TrimPrefix(patches[1], "application/merge-patch+json "))
}

// TestConflictReReadsTheReader covers without a control plane what
// TestConflictRetriesReadTheAPIReader and
// TestConflictWithoutAReaderSendsNoDoomedPatch check against a real
// apiserver: after a conflict, the re-read goes to the APIReader when one is
// given, and a re-read that returns the copy that conflicted is not patched.
func TestConflictReReadsTheReader(t *testing.T) {
	s, err := testenv.NewScheme()
	require.NoError(t, err)
	ctx := context.Background()
	server := fake.NewClientBuilder().WithScheme(s).
		WithObjects(&testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}}).Build()
	old := &testv1.Widget{}
	require.NoError(t, server.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w"}, old))
	moved := old.DeepCopy()
	moved.Spec.Color = "blue" // someone else's write, which the cache below never sees
	require.NoError(t, server.Update(ctx, moved))

	var patches, cacheGets int
	cache := interceptor.NewClient(server, interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			cacheGets++
			old.DeepCopyInto(obj.(*testv1.Widget))
			return nil
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, p, opts...)
		},
	})

	t.Run("without a reader", func(t *testing.T) {
		patches, cacheGets = 0, 0
		changed, err := Ensure(ctx, cache, old.DeepCopy(), ours)
		require.Error(t, err)
		assert.False(t, changed)
		assert.True(t, apierrors.IsConflict(err), "%v", err)
		assert.Equal(t, 1, patches, "no patch from the copy that conflicted")
		assert.Equal(t, retry.DefaultRetry.Steps-1, cacheGets, "re-read on every retry")
	})
	t.Run("with a reader", func(t *testing.T) {
		patches, cacheGets = 0, 0
		obj := old.DeepCopy()
		changed, err := Ensure(ctx, cache, obj, ours, APIReader(server))
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Equal(t, 2, patches)
		assert.Zero(t, cacheGets)
		assert.Equal(t, "blue", obj.Spec.Color, "obj holds the server's copy")
		assert.Equal(t, []string{ours}, obj.Finalizers)
	})
	t.Run("a re-read older than the copy that conflicted", func(t *testing.T) {
		mid := &testv1.Widget{}
		require.NoError(t, server.Get(ctx, client.ObjectKeyFromObject(old), mid))
		newer := mid.DeepCopy()
		newer.Spec.Color = "green"
		require.NoError(t, server.Update(ctx, newer))
		patches, cacheGets = 0, 0
		_, err := Ensure(ctx, cache, mid, "mid.example.com/x") // the cache returns old, older than mid
		assert.True(t, apierrors.IsConflict(err), "%v", err)
		assert.Equal(t, 1, patches, "no patch from a copy older than the one that conflicted")
	})
	t.Run("APIReader(nil) is no option", func(t *testing.T) {
		patches, cacheGets = 0, 0
		_, err := Remove(ctx, cache, old.DeepCopy(), other, APIReader(nil))
		assert.NoError(t, err, "old lists no %s: nothing to do", other)
		obj := old.DeepCopy()
		obj.Finalizers = []string{other}
		_, err = Remove(ctx, cache, obj, other, APIReader(nil))
		assert.True(t, apierrors.IsConflict(err), "%v", err)
		assert.Equal(t, retry.DefaultRetry.Steps-1, cacheGets, "re-read through the client")
	})
}

func TestNoRequestWhenNothingChanges(t *testing.T) {
	s, err := testenv.NewScheme()
	require.NoError(t, err)
	deleting := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns",
		DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{other}, ResourceVersion: "1"}}
	calls := 0
	c := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			calls++
			return nil
		},
	}).Build()
	ctx := context.Background()

	changed, err := Ensure(ctx, c, deleting, ours)
	require.NoError(t, err)
	assert.False(t, changed, "Ensure on a deleting object")
	changed, err = Ensure(ctx, c, deleting, other)
	require.NoError(t, err)
	assert.False(t, changed, "Ensure of a present finalizer")
	changed, err = Remove(ctx, c, deleting, ours)
	require.NoError(t, err)
	assert.False(t, changed, "Remove of an absent finalizer")
	assert.Zero(t, calls)
	assert.Equal(t, []string{other}, deleting.Finalizers)
}

func TestValidateName(t *testing.T) {
	tests := []struct {
		name      string
		qualified bool
		wantErr   string
	}{
		{"apps.example.com/cleanup", true, ""},
		{"example.com/a_b-c.d", true, ""},
		{"cleanup", false, ""},
		{"cleanup", true, "must be domain-qualified"},
		{"orphan", true, "must be domain-qualified"},
		{"", false, "invalid finalizer name"},
		{"example.com/", true, "invalid finalizer name"},
		{"Example.com/x", true, "invalid finalizer name"},
		{"example.com/has space", true, "invalid finalizer name"},
		{"a/b/c", true, "invalid finalizer name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateName(tt.name, tt.qualified)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestInvalidNamesSendNothing(t *testing.T) {
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", ResourceVersion: "1"}}
	_, err := Ensure(context.Background(), nil, w, "cleanup")
	assert.ErrorContains(t, err, "adding finalizer to *v1.Widget ns/w: invalid finalizer name")
	_, err = Remove(context.Background(), nil, w, "")
	assert.ErrorContains(t, err, "removing finalizer from *v1.Widget ns/w: invalid finalizer name")
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"0123456789abc", 10, "0123456…"},
		{"ééééé", 8, "éé…"}, // 2-byte runes: never cut one in half
	}
	for _, tt := range tests {
		got := truncate(tt.in, tt.n)
		assert.Equal(t, tt.want, got)
		assert.LessOrEqual(t, len(got), tt.n)
	}
}
