package bench

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestFollowerListsAgainOnlyWhenItsVersionIsGone: a watch that ends with
// 410 Gone makes the follower list again; one that fails otherwise goes on
// from the version it had, without a new list; both after a pause, and
// the objects stay current through both.
func TestFollowerListsAgainOnlyWhenItsVersionIsGone(t *testing.T) {
	var lists, watches atomic.Int32
	failures := []metav1.Status{
		{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonGone},
		{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError},
	}
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			lists.Add(1)
			return c.List(ctx, l, opts...)
		},
		Watch: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			n := int(watches.Add(1)) - 1
			if n < len(failures) {
				w := watch.NewFake()
				go w.Error(&failures[n])
				return w, nil
			}
			return c.Watch(ctx, l, opts...)
		},
	}).Build()
	h := &harness{c: c}
	f, err := h.follow(context.Background(), "ns", &corev1.ConfigMapList{})
	require.NoError(t, err)
	defer f.Close()

	require.Eventually(t, func() bool { return watches.Load() > int32(len(failures)) }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, int32(2), lists.Load(), "one list at the start, one after the 410, none after the 500")
	require.NoError(t, c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}}))
	require.Eventually(t, func() bool { return len(f.Items()) == 1 }, 10*time.Second, 10*time.Millisecond)
}
