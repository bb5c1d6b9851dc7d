package finalizer

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

// RemoveAll removes several finalizers in one locked patch, keeps the
// others, and sends nothing when none of its names is listed.
func TestRemoveAllSendsOnePatch(t *testing.T) {
	s, err := testenv.NewScheme()
	require.NoError(t, err)
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns",
		Finalizers: []string{"old.example.com/a", other, "legacy"}}}
	var patches []string
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(w).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			data, err := p.Data(obj)
			require.NoError(t, err)
			patches = append(patches, string(data))
			return c.Patch(ctx, obj, p, opts...)
		},
	}).Build()
	ctx := context.Background()
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), w))
	rv := w.ResourceVersion

	names := []string{"old.example.com/a", "legacy", "never.example.com/added"}
	changed, err := RemoveAll(ctx, c, w, names)
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, []string{other}, w.Finalizers)
	require.Len(t, patches, 1)
	assert.JSONEq(t, `{"metadata":{"finalizers":["`+other+`"],"resourceVersion":"`+rv+`"}}`, patches[0])

	changed, err = RemoveAll(ctx, c, w, names)
	require.NoError(t, err)
	assert.False(t, changed)
	assert.Len(t, patches, 1, "none listed: nothing sent")

	_, err = RemoveAll(ctx, c, w, []string{"example.com/-x-"})
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), `invalid finalizer name "example.com/-x-"`), err.Error())
}
