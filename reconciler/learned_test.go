package reconciler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// countingMapper counts the RESTMapper's answers about ConfigMaps.
type countingMapper struct {
	meta.RESTMapper
	configMaps atomic.Int32
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if gk.Kind == "ConfigMap" {
		m.configMaps.Add(1)
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}

type mappedClient struct {
	client.Client
	mapper meta.RESTMapper
}

func (c mappedClient) RESTMapper() meta.RESTMapper { return c.mapper }

// Every pass has a client of its own, but the Applier behind Scope.Apply
// keeps what it learned across passes: a kind's scope is asked of the
// RESTMapper once, not on every pass (and so, in the same way, an object
// found matching is not compared again while it is unchanged).
func TestPassesShareWhatTheApplierLearned(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	var passes atomic.Int32
	var mapper *countingMapper
	env.StartManager(t, func(mgr manager.Manager) error {
		mapper = &countingMapper{RESTMapper: mgr.GetRESTMapper()}
		r, err := reconciler.New(mgr, reconciler.Options[*testv1.Widget]{
			Name:   "learned",
			Client: mappedClient{Client: mgr.GetClient(), mapper: mapper},
			Owns:   []client.Object{&corev1.ConfigMap{}},
			Steps: []widgetStep{{Name: "config", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				defer passes.Add(1)
				if _, err := s.Apply(ctx, corev1ac.ConfigMap(s.Object.Name+"-config", "").WithData(map[string]string{"k": "v"})); err != nil {
					return reconciler.Retry(err)
				}
				return reconciler.Continue()
			}}},
		})
		if err != nil {
			return err
		}
		return r.Builder(mgr).WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == ns
		})).Complete(r)
	})
	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}}))
	require.Eventually(t, func() bool { return passes.Load() >= 1 }, 30*time.Second, 10*time.Millisecond, "no pass")
	asked := mapper.configMaps.Load()
	require.Positive(t, asked, "the first Apply asks the ConfigMap's scope")

	for i := range 3 {
		before := passes.Load()
		// A merge patch, not Get and Update: the passes write the Widget
		// too, and an Update of an older copy conflicts with them.
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}}
		touch := fmt.Sprintf(`{"metadata":{"annotations":{"touched":%q}}}`, string(rune('a'+i)))
		require.NoError(t, env.Client.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(touch))))
		require.Eventually(t, func() bool { return passes.Load() > before }, 30*time.Second, 10*time.Millisecond, "no pass after the annotation")
	}
	assert.Equal(t, asked, mapper.configMaps.Load(), "later passes asked the RESTMapper again: each pass's Applier started from nothing")
}
