package sharding_test

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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

// The owned objects of the group's owners in ranges 2 and 5 (their
// Deployments, Services), by the label the kit writes on them: scoped to the
// group, so that another sharded operator's labels never move them.
func ExampleMember_LabelSelector() {
	c := fake.NewClientBuilder().Build()
	m, err := sharding.New(sharding.Options{Group: "webapp", Identity: "webapp-0", Namespace: "ops", APIReader: c, Client: c})
	if err != nil {
		panic(err)
	}
	sel, _ := m.LabelSelector([]int{2, 5})
	fmt.Println(sel)
	// Output: sharding.reconcilekit.io/range-webapp in (2,5)
}

// A Member joins the manager of every replica, and a reconciler runs a pass
// only for the objects its replica owns. The kit's reconciler does this (and
// labels owned objects, and queues a range's objects when it is acquired)
// with reconciler.Options.Shard; this is the shape of it for a plain
// controller-runtime reconciler. A replica owns nothing until the started
// manager has run the Member's lease rounds (a lone replica owns every
// range from its third round, RetryPeriod apart): the manager is not
// started here, so Begin refuses the object and the reconciler would leave
// it to another replica. TestMemberGatesAPlainReconciler runs this
// reconciler on two replicas sharing the ranges.
func ExampleMember() {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // ctrl.GetConfigOrDie() in main; never contacted here
	mgr, err := ctrl.NewManager(cfg, manager.Options{})
	if err != nil {
		panic(err)
	}
	pod, namespace := "webapp-operator-7d9f8-x2kq4", "webapp-system" // os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE") in main
	member, err := sharding.New(sharding.Options{
		Group:     "webapp-operator",
		Identity:  pod,
		Namespace: namespace,
		APIReader: mgr.GetAPIReader(),
		Client:    mgr.GetClient(),
	})
	if err != nil {
		panic(err)
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
		obj.Annotations = map[string]string{"seen-by": pod}
		return reconcile.Result{}, c.Update(ctx, &obj)
	})
	err = errors.Join(mgr.Add(member),
		ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).WithEventFilter(member.Predicate()).Complete(r))
	if err != nil {
		panic(err)
	}
	// mgr.Start(ctrl.SetupSignalHandler()) in main.

	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default",
		UID: "6f1c3a52-2b1e-4c1f-9a57-0f8de4e5d1a9"}}
	_, _, ok := member.Begin(context.Background(), obj)
	fmt.Printf("range %d of %d; owned ranges %v; pass begun: %v\n", member.RangeOf(obj), sharding.DefaultRanges, member.Owned(), ok)
	// Output: range 33 of 64; owned ranges []; pass begun: false
}
