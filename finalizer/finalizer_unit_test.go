package finalizer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

// These tests cover Ensure and Remove where API semantics do not matter
// (the wire format, the retry discipline, name validation) and run under
// -short; the patches themselves are tested against a real API server in
// finalizer_test.go.

const (
	ours  = "apps.example.com/cleanup"
	other = "other.example.com/hold"
)

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
		changed, err := Ensure(ctx, cache, obj, ours, WithAPIReader(server))
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
	t.Run("WithAPIReader(nil) is no option", func(t *testing.T) {
		patches, cacheGets = 0, 0
		_, err := Remove(ctx, cache, old.DeepCopy(), other, WithAPIReader(nil))
		assert.NoError(t, err, "old lists no %s: nothing to do", other)
		obj := old.DeepCopy()
		obj.Finalizers = []string{other}
		_, err = Remove(ctx, cache, obj, other, WithAPIReader(nil))
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

// TestValidateNameMatchesEnsure: ValidateName, the check a caller runs where
// the name is configured (reconciler.New does), accepts exactly the names
// Ensure accepts, so a name that passed at start-up never fails a pass; and
// it rejects the unqualified names Remove still takes for legacy cleanup.
func TestValidateNameMatchesEnsure(t *testing.T) {
	s, err := testenv.NewScheme()
	require.NoError(t, err)
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"apps.example.com/cleanup", true},
		{"example.com/a_b-c.d", true},
		{"cleanup", false},
		{"orphan", false},
		{"foregroundDeletion", false},
		{"", false},
		{"example.com/", false},
		{"Example.com/x", false},
		{"example.com/clean up", false},
		{"a/b/c", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			verr := ValidateName(tt.name)
			if tt.ok {
				assert.NoError(t, verr)
			} else {
				assert.ErrorContains(t, verr, "invalid finalizer name")
			}
			w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}}
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(w).Build()
			_, eerr := Ensure(context.Background(), c, w, tt.name)
			assert.Equal(t, verr == nil, eerr == nil, "ValidateName: %v; Ensure: %v", verr, eerr)
		})
	}
	assert.ErrorContains(t, ValidateName("cleanup"), `must be domain-qualified, like "example.com/cleanup"`)
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", Finalizers: []string{"cleanup"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(w).Build()
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(w), w))
	removed, err := Remove(context.Background(), c, w, "cleanup")
	require.NoError(t, err, "Remove takes an unqualified legacy name")
	assert.True(t, removed)
}

func TestInvalidNamesSendNothing(t *testing.T) {
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", ResourceVersion: "1"}}
	_, err := Ensure(context.Background(), nil, w, "cleanup")
	assert.ErrorContains(t, err, "adding finalizer to *v1.Widget ns/w: invalid finalizer name")
	_, err = Remove(context.Background(), nil, w, "")
	assert.ErrorContains(t, err, "removing finalizer from *v1.Widget ns/w: invalid finalizer name")
}
