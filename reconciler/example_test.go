package reconciler_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// A reconciler for Widget: two steps, each owning a condition that Ready
// depends on. In an operator, pass the manager instead of a client, and
// register r with ctrl.NewControllerManagedBy(mgr).For(&v1.Widget{}).
func Example() {
	scheme, _ := testenv.NewScheme()
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default"}, Spec: testv1.WidgetSpec{Size: 3}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(w).WithStatusSubresource(w).Build()

	r, _ := reconciler.New(nil, reconciler.Options[*testv1.Widget]{
		Name: "widget-controller", Client: c, APIReader: c, Scheme: scheme,
		Steps: []reconciler.Step[*testv1.Widget]{
			{Name: "validate", Condition: "SpecValid", Run: func(_ context.Context, s *reconciler.Scope[*testv1.Widget]) reconciler.Outcome {
				return reconciler.Continue()
			}},
			{Name: "size", Condition: "Sized", Run: func(_ context.Context, s *reconciler.Scope[*testv1.Widget]) reconciler.Outcome {
				if s.Object.Spec.Size%2 == 1 {
					return reconciler.Wait("OddSize", "waiting for an even size, have %d", s.Object.Spec.Size)
				}
				return reconciler.Continue()
			}},
		},
	})
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "w"}})
	_ = c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "w"}, w)
	ready := conditions.Get(w, conditions.Ready)
	fmt.Println(err, ready.Status, ready.Reason, ready.Message)
	// Output: <nil> False OddSize waiting for an even size, have 3
}

// A manager whose informers wait out an API server outage, and whose cache
// holds only the operator's own Secrets (by label) and the ConfigMaps of its
// namespace. Should a later change leave either kind unbounded (its ByObject
// entry dropped, say), the manager warns in its log and in
// reconcilekit_unbounded_cache_informers{kind} as soon as a watch or a cached
// read starts the kind's informer. Here no manager is built (ctrl.NewManager
// asks the API server whether each ByObject kind is namespaced): the Secret
// informer is made as the manager's cache makes it, and the output is what
// that does to the gauge.
func ExampleCacheOptions() {
	managed := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "widget-operator"})
	opts := ctrl.Options{
		Cache: reconciler.CacheOptions(cache.Options{
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}:    {Label: managed},
				&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{"widgets-system": {}}},
			},
		}),
	}
	// mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), opts) in main.

	// A controller's first watch of Secrets makes the informer:
	secretInformer := func(c cache.Options) string {
		before := unboundedCacheInformers("Secret")
		c.NewInformer(&toolscache.ListWatch{}, &corev1.Secret{}, 0, toolscache.Indexers{})
		return fmt.Sprintf(`reconcilekit_unbounded_cache_informers{kind="Secret"} %+g`, unboundedCacheInformers("Secret")-before)
	}
	fmt.Println("Secrets by label:", secretInformer(opts.Cache))
	dropped := reconciler.CacheOptions(cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Namespaces: map[string]cache.Config{"widgets-system": {}}},
		},
	})
	fmt.Println("Secret entry dropped:", secretInformer(dropped))
	// Output:
	// Secrets by label: reconcilekit_unbounded_cache_informers{kind="Secret"} +0
	// Secret entry dropped: reconcilekit_unbounded_cache_informers{kind="Secret"} +1
}

// unboundedCacheInformers reads the gauge
// reconcilekit_unbounded_cache_informers{kind} from controller-runtime's
// registry, the one the manager's metrics endpoint serves.
func unboundedCacheInformers(kind string) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range families {
		if mf.GetName() != "reconcilekit_unbounded_cache_informers" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
