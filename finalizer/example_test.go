package finalizer_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/reconcilekit/reconcilekit/finalizer"
)

func Example() {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}}
	c := fake.NewClientBuilder().WithObjects(cm).Build()

	// While the object lives: make sure deleting it waits for cleanup.
	changed, _ := finalizer.Ensure(ctx, c, cm, "apps.example.com/cleanup")
	fmt.Println("finalizer added:", changed)

	// Once it is being deleted: run the cleanup, then let it go.
	_ = c.Delete(ctx, cm)
	_ = c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	f := &finalizer.Finalizer[*corev1.ConfigMap]{
		Name:   "apps.example.com/cleanup",
		Client: c,
		Steps: []finalizer.Step[*corev1.ConfigMap]{{
			Name: "delete-bucket",
			Run: func(ctx context.Context, cm *corev1.ConfigMap) (finalizer.Result, error) {
				fmt.Println("deleting the bucket of", cm.Name)
				return finalizer.Result{}, nil
			},
		}},
	}
	done, _, err := f.Finalize(ctx, cm)
	fmt.Println("done:", done, err)
	// Output:
	// finalizer added: true
	// deleting the bucket of app
	// done: true <nil>
}
