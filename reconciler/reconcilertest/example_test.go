package reconcilertest_test

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
// behind. In an envtest test, wrap mgr.GetClient() and pass mgr.GetCache()
// of a started manager; build the reconciler with c as its client, then
// ReconcileUntilQuiet and AssertIdempotent as usual. Here a fake client and
// fake informers stand in for them: scaled from 1 to 3 replicas through c,
// the Deployment still reads as 1 through c.
func ExampleWithCacheLag() {
	ctx := context.Background()
	apiserver := fake.NewClientBuilder().Build() // mgr.GetClient()
	informers := &informertest.FakeInformers{}   // mgr.GetCache()
	c := reconcilertest.NewClient(apiserver, reconcilertest.WithCacheLag(informers,
		cachelag.Lag{Kind: "Deployment", VersionsBehind: 1},
		cachelag.Lag{Delay: time.Second},
	))

	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	must(c.Create(ctx, d))
	d.Spec.Replicas = ptr.To[int32](3)
	must(c.Update(ctx, d))

	var read, truth appsv1.Deployment
	must(c.Get(ctx, client.ObjectKeyFromObject(d), &read))
	must(apiserver.Get(ctx, client.ObjectKeyFromObject(d), &truth))
	fmt.Println("replicas read by the reconciler:", *read.Spec.Replicas)
	fmt.Println("replicas in the API server:", *truth.Spec.Replicas)
	// Output:
	// replicas read by the reconciler: 1
	// replicas in the API server: 3
}
