package finalizer_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/reconcilekit/reconcilekit/finalizer"
)

func Example() {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}}
	c := fake.NewClientBuilder().WithObjects(cm).Build()
	const name = "apps.example.com/cleanup"

	// While the object lives: make sure deleting it waits for cleanup.
	// With a manager's client, also pass finalizer.WithAPIReader(mgr.GetAPIReader()).
	added, err := finalizer.Ensure(ctx, c, cm, name)
	fmt.Println("finalizer added:", added, err)

	// Deleting it now only marks it: the finalizer holds it.
	_ = c.Delete(ctx, cm)
	_ = c.Get(ctx, client.ObjectKeyFromObject(cm), cm)
	fmt.Println("terminating:", cm.DeletionTimestamp != nil)

	// Once the cleanup is done, let it go.
	removed, err := finalizer.Remove(ctx, c, cm, name)
	fmt.Println("finalizer removed:", removed, err)
	gone := apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cm), cm))
	fmt.Println("object gone:", gone)
	// Output:
	// finalizer added: true <nil>
	// terminating: true
	// finalizer removed: true <nil>
	// object gone: true
}
