package ownership_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/ownership"
)

// A reconciler builds the apply configurations it wants from scratch on
// every pass and applies them; the second pass finds nothing to do and
// writes nothing. Apply does not change desired: read the live object with
// the client. (In a controller Client is mgr.GetClient() and APIReader
// mgr.GetAPIReader(); a fake client keeps this self-contained.)
func Example() {
	scheme, _ := testenv.NewScheme()
	owner := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "default", UID: "1234"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(testrestmapper.TestOnlyStaticRESTMapper(scheme)).Build()
	a := &ownership.Applier{Client: c, APIReader: c, Scheme: scheme, FieldManager: "webapp-operator"}

	for range 2 {
		cm := corev1ac.ConfigMap("shop-config", "").WithData(map[string]string{"color": "blue"})
		op, err := a.Apply(context.Background(), owner, cm)
		fmt.Println(op, err)
	}
	live := &corev1.ConfigMap{}
	_ = c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "shop-config"}, live)
	fmt.Println(live.Namespace, live.OwnerReferences[0].Name, live.Data["color"])

	// Prune deletes what the owner controls and no longer wants, by name.
	deleted, err := a.Prune(context.Background(), owner, &corev1.ConfigMapList{}, "shop-config")
	fmt.Println(deleted, err)
	// Output:
	// Created <nil>
	// Unchanged <nil>
	// default shop blue
	// [] <nil>
}
