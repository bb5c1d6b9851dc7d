package reconcilertest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

func newFake(t *testing.T) client.Client {
	s, err := testenv.NewScheme()
	require.NoError(t, err)
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(w).WithStatusSubresource(w).Build()
}

func TestCountsByVerbKindAndSubresource(t *testing.T) {
	ctx := context.Background()
	c := reconcilertest.NewClient(newFake(t))
	w := &testv1.Widget{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w"}, w))
	require.NoError(t, c.List(ctx, &testv1.WidgetList{}))
	base := w.DeepCopy()
	w.Status.Note = "x"
	require.NoError(t, c.Status().Patch(ctx, w, client.MergeFrom(base)))
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}))
	require.NoError(t, c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}))

	assert.Equal(t, map[reconcilertest.Call]int{
		{Verb: "get", Kind: "Widget"}:                          1,
		{Verb: "list", Kind: "Widget"}:                         1,
		{Verb: "patch", Kind: "Widget", Subresource: "status"}: 1,
		{Verb: "create", Kind: "ConfigMap"}:                    1,
		{Verb: "delete", Kind: "ConfigMap"}:                    1,
	}, c.Counts())
	assert.Equal(t, 3, c.Mutations())
	assert.Equal(t, []string{"patch Widget/status", "create ConfigMap", "delete ConfigMap"}, c.MutatingRequests())
	c.Reset()
	assert.Zero(t, c.Mutations())
	assert.Empty(t, c.Counts())
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		fault  reconcilertest.Fault
		is     func(error) bool
		failed int // of 10 ConfigMap creates
	}{
		{"conflict on every create", reconcilertest.Fault{Verb: "create", Err: reconcilertest.ErrConflict, Rate: 1}, apierrors.IsConflict, 10},
		{"no Rate means every request", reconcilertest.Fault{Verb: "create", Err: reconcilertest.ErrConflict}, apierrors.IsConflict, 10},
		{"server error on mutating, 3 times", reconcilertest.Fault{Verb: "mutating", Err: reconcilertest.ErrServer, Rate: 1, Times: 3}, apierrors.IsInternalError, 3},
		{"other kind untouched", reconcilertest.Fault{Kind: "Secret", Err: reconcilertest.ErrTimeout, Rate: 1}, apierrors.IsTimeout, 0},
		{"other verb untouched", reconcilertest.Fault{Verb: "get", Err: reconcilertest.ErrTimeout, Rate: 1}, apierrors.IsTimeout, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := reconcilertest.NewClient(newFake(t), reconcilertest.WithFaults(tt.fault))
			failed := 0
			for i := range 10 {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm" + string(rune('a'+i)), Namespace: "ns"}}
				if err := c.Create(ctx, cm); err != nil {
					require.True(t, tt.is(err), "unexpected error %v", err)
					failed++
				}
			}
			assert.Equal(t, tt.failed, failed)
			assert.Equal(t, 10, c.Count("create", "ConfigMap"), "failed requests are counted too")
		})
	}
}

func TestFaultRateIsSeededAndPartial(t *testing.T) {
	ctx := context.Background()
	run := func() []bool {
		c := reconcilertest.NewClient(newFake(t), reconcilertest.WithSeed(42),
			reconcilertest.WithFaults(reconcilertest.Fault{Verb: "get", Err: reconcilertest.ErrServer, Rate: 0.5}))
		var out []bool
		for range 40 {
			out = append(out, c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "w"}, &testv1.Widget{}) != nil)
		}
		return out
	}
	a, b := run(), run()
	assert.Equal(t, a, b, "same seed, same failures")
	n := 0
	for _, f := range a {
		if f {
			n++
		}
	}
	assert.Greater(t, n, 5)
	assert.Less(t, n, 35)
}
