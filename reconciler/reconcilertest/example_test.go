package reconcilertest_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest/cachelag"
)

// Wrap the client a reconciler uses: every request is counted by verb and
// kind, and faults make chosen requests fail like the apiserver would. In
// a test, pass the wrapped client to the reconciler, let the object
// converge, then call AssertIdempotent(t, ctx, r, c, req).
func Example() {
	ctx := context.Background()
	c := reconcilertest.NewClient(fake.NewClientBuilder().Build(),
		reconcilertest.WithFaults(reconcilertest.Fault{Verb: reconcilertest.Create, Kind: "ConfigMap", Err: reconcilertest.ErrConflict, Rate: 1, Times: 1}))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}}
	err := c.Create(ctx, cm)
	fmt.Println("first create, conflict:", apierrors.IsConflict(err))
	fmt.Println("second create:", c.Create(ctx, cm.DeepCopy()))
	fmt.Println("mutating requests:", c.Mutations())
	fmt.Println(c)
	// Output:
	// first create, conflict: true
	// second create: <nil>
	// mutating requests: 2
	// create ConfigMap: 2
}

// Make the reconciler under test read through a cache that trails its
// writes, on every run: here Deployments read one version behind the newest
// (a step that applies a new generation and a later step that reads it
// back sees the previous, rolled-out one) and every other kind a second
// behind. mgr is a started manager, as in an envtest test; build the
// reconciler with c as its client, then ReconcileUntilQuiet and AssertIdempotent as
// usual.
func ExampleWithCacheLag() {
	var mgr manager.Manager // started, e.g. on envtest
	c := reconcilertest.NewClient(mgr.GetClient(), reconcilertest.WithCacheLag(mgr.GetCache(),
		cachelag.Lag{Kind: "Deployment", VersionsBehind: 1},
		cachelag.Lag{Delay: time.Second},
	))
	_ = c
}
