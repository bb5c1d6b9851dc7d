package sharding_test

import (
	"context"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/sharding"
)

// Where an object goes: its range, and the owner of that range among three
// replicas.
func Example() {
	const ranges = 16
	owners := sharding.Assign(ranges, []string{"webapp-operator-a", "webapp-operator-b", "webapp-operator-c"})
	uid := types.UID("6f1c3a52-2b1e-4c1f-9a57-0f8de4e5d1a9")
	r := sharding.RangeOf(uid, ranges)
	fmt.Printf("%s is in range %d, owned by %s\n", uid, r, owners[r])
	// Output: 6f1c3a52-2b1e-4c1f-9a57-0f8de4e5d1a9 is in range 8, owned by webapp-operator-c
}

// The server-side selector of a replica that owns ranges 0, 1 and 3 of 4:
// adjacent ranges are merged into one term.
func ExampleShardSelector() {
	sel, err := sharding.ShardSelector(4, []int{0, 1, 3})
	if err != nil {
		panic(err)
	}
	fmt.Println(sel)
	// Output: shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')
}

// The owned objects of the owners in ranges 2 and 5 (their Deployments,
// Services), by the label the kit writes on them.
func ExampleLabelSelector() {
	sel, _ := sharding.LabelSelector([]int{2, 5})
	fmt.Println(sel)
	// Output: sharding.reconcilekit.io/range in (2,5)
}

// A Member joins the manager of every replica, and a reconciler runs a pass
// only for the objects its replica owns. The kit's reconciler does this (and
// labels owned objects, and queues a range's objects when it is acquired)
// with reconciler.Options.Shard; this is the shape of it for a plain
// controller-runtime reconciler.
func ExampleMember() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), manager.Options{})
	if err != nil {
		os.Exit(1)
	}
	member, err := sharding.New(sharding.Options{
		Group:     "webapp-operator",
		Identity:  os.Getenv("POD_NAME"),
		Namespace: os.Getenv("POD_NAMESPACE"),
		APIReader: mgr.GetAPIReader(),
		Client:    mgr.GetClient(),
	})
	if err != nil || mgr.Add(member) != nil {
		os.Exit(1)
	}
	c := mgr.GetClient()
	r := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		var obj corev1.ConfigMap
		if err := c.Get(ctx, req.NamespacedName, &obj); err != nil {
			return reconcile.Result{}, err
		}
		ctx, end, ok := member.Begin(ctx, &obj)
		if !ok {
			return reconcile.Result{}, nil // another replica owns it
		}
		defer end()
		obj.Annotations = map[string]string{"seen-by": os.Getenv("POD_NAME")}
		return reconcile.Result{}, c.Update(ctx, &obj)
	})
	_ = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).WithEventFilter(member.Predicate()).Complete(r)
	_ = mgr.Start(ctrl.SetupSignalHandler())
}
