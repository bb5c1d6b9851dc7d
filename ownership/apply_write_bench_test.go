package ownership

import (
	"context"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// answeringClient is cachedReader whose API server accepts every apply:
// the answer is what was sent, with the metadata the server sets. With
// absent set, the cache and the API server have no object until it is
// created (and forget it again, for the next iteration).
type answeringClient struct {
	*cachedReader
	absent bool
	rv     int
	sent   int
	gets   int
	// keepSent makes Apply keep a copy of what it was sent in lastSent.
	keepSent bool
	lastSent map[string]any
}

func (c *answeringClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	if c.absent {
		return apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, key.Name)
	}
	return c.cachedReader.Get(ctx, key, obj, opts...)
}

func (c *answeringClient) Apply(_ context.Context, ac runtime.ApplyConfiguration, _ ...client.ApplyOption) error {
	c.sent++
	c.rv++
	u := ac.(runtime.Unstructured).UnstructuredContent()
	if c.keepSent {
		c.lastSent = runtime.DeepCopyJSON(u)
	}
	md := u["metadata"].(map[string]any)
	md["uid"], md["resourceVersion"] = "u-1", strconv.Itoa(c.rv)
	md["managedFields"] = []any{map[string]any{"manager": "bench", "operation": "Apply", "apiVersion": "apps/v1",
		"fieldsType": "FieldsV1", "fieldsV1": map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}}}
	if c.absent {
		// Created: the Deployment controller has written no status yet.
		md["generation"] = int64(1)
		return nil
	}
	md["generation"] = int64(2)
	u["status"] = map[string]any{"observedGeneration": int64(1), "replicas": int64(2)}
	return nil
}

// rolledOut makes the cache hold d, the answer to its creation, as the
// Deployment controller's first writes leave it: its revision annotation
// and its status.
func (c *answeringClient) rolledOut(d *appsv1.Deployment) {
	c.rv++
	c.live, c.absent = d, false
	d.ResourceVersion = strconv.Itoa(c.rv)
	if _, set := d.Annotations["deployment.kubernetes.io/revision"]; !set {
		d.Annotations["deployment.kubernetes.io/revision"] = "1"
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
}

func answeringApplier(tb testing.TB, absent bool) (*Applier, *answeringClient, client.Object) {
	a, _, owner := convergedApplier(tb)
	c := &answeringClient{cachedReader: a.Client.(*cachedReader), absent: absent}
	a.Client, a.APIReader = c, c
	return a, c, owner
}

// BenchmarkApplyCreated is the first Apply of an object, as a converging
// owner's first pass makes it: the cache has none, the configuration is
// built and sent, and the answer fills the caller's typed object
// (ownership.Into, as Scope.ApplyAndWait asks).
func BenchmarkApplyCreated(b *testing.B) {
	a, c, owner := answeringApplier(b, true)
	b.ReportAllocs()
	for b.Loop() {
		res, err := a.Apply(b.Context(), owner, testDeployment(), Into(&appsv1.Deployment{}))
		if err != nil || res != Created {
			b.Fatalf("Apply = %v, %v; want Created", res, err)
		}
	}
	if c.sent != b.N {
		b.Fatalf("%d applies sent for %d Applies", c.sent, b.N)
	}
}

// BenchmarkApplyConfigChanged is an Apply of a changed configuration (an
// owner's spec edited: a new image), as an update's first pass makes it:
// the cached object, applied with the previous configuration, is judged
// drifted and the new one sent, its answer filling the caller's typed
// object.
func BenchmarkApplyConfigChanged(b *testing.B) {
	a, c, owner := answeringApplier(b, false)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		desired := testDeployment()
		desired.Spec.Template.Spec.Containers[0].WithImage("nginx:" + strconv.Itoa(i))
		res, err := a.Apply(b.Context(), owner, desired, Into(&appsv1.Deployment{}))
		if err != nil || res != Updated {
			b.Fatalf("Apply = %v, %v; want Updated", res, err)
		}
	}
	if c.sent != b.N {
		b.Fatalf("%d applies sent for %d Applies", c.sent, b.N)
	}
}

// BenchmarkApplyCreatedThenRolledOut is what a converging owner's two
// passes cost an owned Deployment: the first creates it; the second, woken
// by the Deployment controller's writes (its revision annotation, its
// status), finds it unchanged.
func BenchmarkApplyCreatedThenRolledOut(b *testing.B) {
	a, c, owner := answeringApplier(b, true)
	b.ReportAllocs()
	for b.Loop() {
		c.absent = true
		d := &appsv1.Deployment{}
		res, err := a.Apply(b.Context(), owner, testDeployment(), Into(d))
		if err != nil || res != Created {
			b.Fatalf("Apply = %v, %v; want Created", res, err)
		}
		c.rolledOut(d)
		res, err = a.Apply(b.Context(), owner, testDeployment(), Into(&appsv1.Deployment{}))
		if err != nil || res != Unchanged {
			b.Fatalf("Apply = %v, %v; want Unchanged", res, err)
		}
	}
}
