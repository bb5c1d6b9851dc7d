//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/klient/wait/conditions"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// TestToolchain proves the cluster runs the real control loops the operator
// library depends on, not just an apiserver: the deployment and replicaset
// controllers, the scheduler, the node's pod lifecycle (kwok), the
// EndpointSlice controller and the garbage collector.
func TestToolchain(t *testing.T) {
	const (
		app      = "toolchain-probe"
		replicas = 3
		timeout  = 2 * time.Minute
	)
	selector := map[string]string{"app": app}

	deployment := func(ns string) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns, Labels: selector},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](replicas),
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: selector},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "web",
						// kwok runs no container; on kind, hack/image.sh loads this
						// image (a tiny HTTP server on 8080), so the pods really run.
						Image: "registry.example.com/web:v1.0.0",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					}}},
				},
			},
		}
	}

	f := features.New("local cluster runs the built-in controllers").
		WithLabel("area", "toolchain").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			r := cfg.Client().Resources(ns)
			if err := r.Create(ctx, deployment(ns)); err != nil {
				t.Fatalf("create deployment: %v", err)
			}
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
				Spec: corev1.ServiceSpec{
					Selector: selector,
					Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
				},
			}
			if err := r.Create(ctx, svc); err != nil {
				t.Fatalf("create service: %v", err)
			}
			return ctx
		}).
		Assess("the deployment reaches 3 ready replicas", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns}}
			err := wait.For(conditions.New(cfg.Client().Resources()).ResourceMatch(dep, func(o k8s.Object) bool {
				d := o.(*appsv1.Deployment)
				return d.Status.ObservedGeneration >= d.Generation &&
					d.Status.ReadyReplicas == replicas && d.Status.UpdatedReplicas == replicas
			}), wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(time.Second))
			if err != nil {
				t.Fatalf("deployment %s/%s: want %d ready replicas, status %+v: %v", ns, app, replicas, dep.Status, err)
			}
			return ctx
		}).
		Assess("the service gets endpoint slices with 3 ready pod addresses", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			var got map[string]string // address -> pod
			err := wait.For(func(ctx context.Context) (bool, error) {
				var slices discoveryv1.EndpointSliceList
				if err := cfg.Client().Resources(ns).List(ctx, &slices,
					resources.WithLabelSelector(discoveryv1.LabelServiceName+"="+app)); err != nil {
					return false, err
				}
				got = readyPodAddresses(slices.Items)
				return len(got) == replicas, nil
			}, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(time.Second))
			if err != nil {
				t.Fatalf("service %s/%s: want %d ready pod addresses, have %v: %v", ns, app, replicas, got, err)
			}
			var pods corev1.PodList
			if err := cfg.Client().Resources(ns).List(ctx, &pods, resources.WithLabelSelector("app="+app)); err != nil {
				t.Fatalf("list pods: %v", err)
			}
			for _, p := range pods.Items {
				if got[p.Status.PodIP] != p.Name {
					t.Errorf("pod %s (IP %q) is not the ready endpoint for its address; endpoints %v", p.Name, p.Status.PodIP, got)
				}
			}
			return ctx
		}).
		Assess("deleting the deployment garbage-collects its replicaset and pods", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			r := cfg.Client().Resources(ns)
			dep := &appsv1.Deployment{}
			if err := r.Get(ctx, app, ns, dep); err != nil {
				t.Fatalf("get deployment: %v", err)
			}
			// The dependents must exist and be owned, or their absence later
			// would prove nothing about the garbage collector.
			owned, err := ownedCounts(ctx, r, dep)
			if err != nil {
				t.Fatal(err)
			}
			if owned.replicaSets != 1 || owned.pods != replicas {
				t.Fatalf("before deletion: want 1 owned replicaset and %d owned pods, have %+v", replicas, owned)
			}
			if err := r.Delete(ctx, dep, resources.WithDeletePropagation(string(metav1.DeletePropagationBackground))); err != nil {
				t.Fatalf("delete deployment: %v", err)
			}
			err = wait.For(func(ctx context.Context) (bool, error) {
				left, err := selectedCounts(ctx, r, "app="+app)
				return err == nil && left.replicaSets == 0 && left.pods == 0, err
			}, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(time.Second))
			if err != nil {
				left, _ := selectedCounts(ctx, r, "app="+app)
				t.Fatalf("after deleting the deployment: want no replicaset and no pod, have %+v: %v", left, err)
			}
			return ctx
		}).
		Feature()

	testenv.Test(t, f)
}

// readyPodAddresses maps each address of a ready endpoint backed by a pod to
// that pod's name.
func readyPodAddresses(slices []discoveryv1.EndpointSlice) map[string]string {
	out := map[string]string{}
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready || e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
				continue
			}
			for _, a := range e.Addresses {
				out[a] = e.TargetRef.Name
			}
		}
	}
	return out
}

type counts struct{ replicaSets, pods int }

// selectedCounts counts the replicasets and pods matching a label selector.
func selectedCounts(ctx context.Context, r *resources.Resources, selector string) (counts, error) {
	var rsl appsv1.ReplicaSetList
	var pods corev1.PodList
	if err := r.List(ctx, &rsl, resources.WithLabelSelector(selector)); err != nil {
		return counts{}, fmt.Errorf("list replicasets: %w", err)
	}
	if err := r.List(ctx, &pods, resources.WithLabelSelector(selector)); err != nil {
		return counts{}, fmt.Errorf("list pods: %w", err)
	}
	return counts{replicaSets: len(rsl.Items), pods: len(pods.Items)}, nil
}

// ownedCounts counts the replicasets controlled by dep and the pods
// controlled by those replicasets.
func ownedCounts(ctx context.Context, r *resources.Resources, dep *appsv1.Deployment) (counts, error) {
	var rsl appsv1.ReplicaSetList
	var pods corev1.PodList
	if err := r.List(ctx, &rsl); err != nil {
		return counts{}, fmt.Errorf("list replicasets: %w", err)
	}
	if err := r.List(ctx, &pods); err != nil {
		return counts{}, fmt.Errorf("list pods: %w", err)
	}
	var c counts
	rsUIDs := map[string]bool{}
	for _, rs := range rsl.Items {
		if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == dep.UID {
			c.replicaSets++
			rsUIDs[string(rs.UID)] = true
		}
	}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && rsUIDs[string(ref.UID)] {
			c.pods++
		}
	}
	return c, nil
}
