package reconciler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// A step that returns Retry(nil) or Terminal(reason, nil) is a bug in the
// step, but it must fail its pass with a message saying so, not crash the
// process (the step's logging ran outside the panic recovery).
func TestNilErrorOutcomesFailThePass(t *testing.T) {
	for name, out := range map[string]reconciler.Outcome{
		"Retry":    reconciler.Retry(nil),
		"Terminal": reconciler.Terminal("Broken", nil),
	} {
		t.Run(name, func(t *testing.T) {
			scheme, err := testenv.NewScheme()
			require.NoError(t, err)
			w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default"}}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(w).WithStatusSubresource(w).Build()
			r, err := reconciler.New(nil, reconciler.Options[*testv1.Widget]{
				Name: "widget-controller", Client: c, APIReader: c, Scheme: scheme,
				Steps: []reconciler.Step[*testv1.Widget]{{Name: "broken", Condition: "Done",
					Run: func(context.Context, *reconciler.Scope[*testv1.Widget]) reconciler.Outcome { return out }}},
			})
			require.NoError(t, err)
			key := types.NamespacedName{Namespace: "default", Name: "w"}
			_, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
			// The message names the function the step called.
			require.ErrorContains(t, err, "returned reconciler."+name+" with a nil error")
			require.NoError(t, c.Get(context.Background(), key, w))
			require.Contains(t, conditions.Get(w, "Done").Message, "nil error")
		})
	}
}
