package ownership_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/ownership"
)

// A reconciler builds the objects it wants from scratch on every pass and
// applies them; the second pass finds nothing to do and writes nothing. (In a
// controller Client is mgr.GetClient(); a fake client keeps this self-contained.)
func Example() {
	scheme, _ := testenv.NewScheme()
	owner := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "default", UID: "1234"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(scheme)).Build()
	a := &ownership.Applier{Client: c, Scheme: scheme, FieldManager: "webapp-operator"}

	for range 2 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shop-config"}, Data: map[string]string{"color": "blue"}}
		res, err := a.Apply(context.Background(), owner, cm)
		fmt.Println(res, err, cm.Namespace, cm.OwnerReferences[0].Name)
	}
	// Output:
	// Created <nil> default shop
	// Unchanged <nil> default shop
}
