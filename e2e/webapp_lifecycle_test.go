//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// The sample of examples/webapp/config/samples.
const (
	sampleName     = "webapp-sample"
	sampleImage    = "registry.example.com/web:v2.1.0"
	sampleReplicas = 3
)

// TestWebAppLifecycle follows the sample WebApp from creation through a
// rollout, scaling and self-healing.
func TestWebAppLifecycle(t *testing.T) {
	const newImage = "registry.example.com/web:v2.2.0"

	f := features.New("the sample WebApp, from creation to self-healing").
		WithLabel("area", "lifecycle").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			sample := filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "config", "samples", "apps_v1_webapp.yaml")
			harness.MustKubectl(ctx, t, "apply", "-n", Namespace(ctx, t), "-f", sample)
			return ctx
		}).
		Assess("the sample becomes Ready with an owned Deployment and Service", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			w := waitWebAppReady(ctx, t, cfg, ns, sampleName, sampleReplicas)
			// The same, as a user would wait for it.
			harness.MustKubectl(ctx, t, "wait", "-n", ns, "--for=condition=Ready", "webapp/"+sampleName, "--timeout=60s")

			for _, c := range []struct{ typ, status, reason string }{
				{webappv1.DatabaseReady, "True", "NotConfigured"},
				{webappv1.Available, "True", "Current"},
				// Ready says what is ready: Available's reason and message.
				{conditionReady, "True", "Current"},
			} {
				got := meta.FindStatusCondition(w.Status.Conditions, c.typ)
				if got == nil || string(got.Status) != c.status || (c.reason != "" && got.Reason != c.reason) || got.ObservedGeneration != w.Generation {
					t.Errorf("condition %s = %+v, want status %s reason %q at generation %d", c.typ, got, c.status, c.reason, w.Generation)
				}
			}
			if c := meta.FindStatusCondition(w.Status.Conditions, conditionReconciling); c != nil && c.Status == metav1.ConditionTrue {
				t.Errorf("Reconciling=True on a Ready WebApp: %+v", c)
			}
			if want := "app.kubernetes.io/instance=webapp-sample,app.kubernetes.io/name=webapp"; ptr.Deref(w.Status.Selector, "") != want {
				t.Errorf("status.selector = %q, want %q", ptr.Deref(w.Status.Selector, ""), want)
			}
			if want := fmt.Sprintf("Ready: Deployment is available. Replicas: %d", sampleReplicas); ptr.Deref(w.Status.Message, "") != want {
				t.Errorf("status.message = %q, want %q", ptr.Deref(w.Status.Message, ""), want)
			}
			if !slices.Contains(w.Finalizers, webappFinalizer) {
				t.Errorf("finalizers %v lack %s", w.Finalizers, webappFinalizer)
			}

			r := cfg.Client().Resources(ns)
			var d appsv1.Deployment
			if err := r.Get(ctx, sampleName, ns, &d); err != nil {
				t.Fatal(err)
			}
			requireControlledBy(t, &d, w)
			if !deploymentRolledOut(&d, sampleReplicas) {
				t.Errorf("Deployment not rolled out: %s", describeDeployment(&d))
			}
			web := d.Spec.Template.Spec.Containers[0]
			want := corev1.ResourceList{corev1.ResourceCPU: quantity("250m"), corev1.ResourceMemory: quantity("128Mi")}
			if web.Image != sampleImage || !equalResources(web.Resources.Requests, want) || !equalResources(web.Resources.Limits, want) {
				t.Errorf("Deployment container: image %s, resources %+v; want %s with requests = limits = 250m/128Mi", web.Image, web.Resources, sampleImage)
			}

			var svc corev1.Service
			if err := r.Get(ctx, sampleName, ns, &svc); err != nil {
				t.Fatal(err)
			}
			requireControlledBy(t, &svc, w)
			if !maps.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 || svc.Spec.Ports[0].TargetPort.StrVal != "http" {
				t.Errorf("Service: selector %v, ports %+v; want the Deployment's selector %v and port 80 -> http", svc.Spec.Selector, svc.Spec.Ports, d.Spec.Selector.MatchLabels)
			}

			pods, err := readyPodsByImage(ctx, cfg, ns, sampleName)
			if err != nil {
				t.Fatal(err)
			}
			if pods[sampleImage] != sampleReplicas || len(pods) != 1 {
				t.Errorf("ready pods by image %v, want %d of %s", pods, sampleReplicas, sampleImage)
			}
			requireRegistryEntry(ctx, t, cfg, ns, sampleName, true)
			return ctx
		}).
		Assess("an image update rolls out, through Reconciling, back to Ready", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			r := cfg.Client().Resources(ns)
			before, err := getWebApp(ctx, cfg, ns, sampleName)
			if err != nil {
				t.Fatal(err)
			}
			oldRS := map[types.UID]bool{}
			var rsl appsv1.ReplicaSetList
			if err := r.List(ctx, &rsl, resources.WithLabelSelector(labelInstance+"="+sampleName)); err != nil {
				t.Fatal(err)
			}
			for _, rs := range rsl.Items {
				oldRS[rs.UID] = true
			}

			// Every version of the WebApp and of its Deployment from now on,
			// in the order etcd wrote them.
			rollout := watchRollout(ctx, t, cfg, ns, sampleName)

			after := patchWebApp(ctx, t, cfg, ns, sampleName, fmt.Sprintf(`{"spec":{"image":%q}}`, newImage))
			if after.Generation <= before.Generation {
				t.Fatalf("the image update did not bump the generation: %d -> %d", before.Generation, after.Generation)
			}
			gen := after.Generation

			waitDeployment(ctx, t, cfg, ns, sampleName, "rolled out with "+newImage, func(d *appsv1.Deployment) bool {
				return d.Spec.Template.Spec.Containers[0].Image == newImage && deploymentRolledOut(d, sampleReplicas)
			})
			eventually(ctx, t, convergeTimeout, "a new ReplicaSet runs every replica, the old ones none", func(ctx context.Context) (bool, string, error) {
				var rsl appsv1.ReplicaSetList
				if err := r.List(ctx, &rsl, resources.WithLabelSelector(labelInstance+"="+sampleName)); err != nil {
					return false, "", err
				}
				var state []string
				done := true
				newOnes := 0
				for _, rs := range rsl.Items {
					image := rs.Spec.Template.Spec.Containers[0].Image
					state = append(state, fmt.Sprintf("%s(old=%t image=%s spec=%d ready=%d)", rs.Name, oldRS[rs.UID], image, *rs.Spec.Replicas, rs.Status.ReadyReplicas))
					switch {
					case oldRS[rs.UID]:
						done = done && *rs.Spec.Replicas == 0 && rs.Status.Replicas == 0
					case image == newImage:
						newOnes++
						done = done && rs.Status.ReadyReplicas == sampleReplicas
					}
				}
				return done && newOnes == 1, strings.Join(state, " "), nil
			})
			eventually(ctx, t, convergeTimeout, "every pod runs the new image and is Ready", func(ctx context.Context) (bool, string, error) {
				pods, err := readyPodsByImage(ctx, cfg, ns, sampleName)
				return err == nil && pods[newImage] == sampleReplicas && len(pods) == 1, fmt.Sprint(pods), err
			})
			waitWebAppReady(ctx, t, cfg, ns, sampleName, sampleReplicas)

			// The rollout was visible on the WebApp: at the new generation
			// it said Reconciling (Ready not True) before it said Ready.
			eventually(ctx, t, convergeTimeout, "the WebApp reported the rollout", func(context.Context) (bool, string, error) {
				states := webAppStates(rollout.app)
				for _, s := range states {
					if s.observed == gen && (s.ready != "True" || s.reconciling == "True") {
						return true, "", nil
					}
				}
				return false, fmt.Sprintf("statuses seen: %v", states), nil
			})
			t.Logf("statuses written during the rollout: %v", webAppStates(rollout.app))
			// And it said Ready=True at the new generation only once the
			// Deployment had rolled out the new image, never from a stale
			// view of the old, rolled-out Deployment.
			rollout.requireReadyOnlyAfterRollout(ctx, t, cfg, gen, newImage)
			return ctx
		}).
		Assess("kubectl scale webapp goes through the scale subresource to the Deployment", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			const replicas = 5
			out := harness.MustKubectl(ctx, t, "scale", "-n", ns, "webapp/"+sampleName, fmt.Sprintf("--replicas=%d", replicas))
			if !strings.Contains(out, "scaled") {
				t.Errorf("kubectl scale: %q", out)
			}
			w, err := getWebApp(ctx, cfg, ns, sampleName)
			if err != nil {
				t.Fatal(err)
			}
			if w.Spec.Replicas == nil || *w.Spec.Replicas != replicas {
				t.Fatalf("after kubectl scale: spec.replicas = %v, want %d", w.Spec.Replicas, replicas)
			}
			waitDeployment(ctx, t, cfg, ns, sampleName, fmt.Sprintf("%d replicas rolled out", replicas), func(d *appsv1.Deployment) bool {
				return deploymentRolledOut(d, replicas)
			})
			waitWebAppReady(ctx, t, cfg, ns, sampleName, replicas)

			// What an HorizontalPodAutoscaler reads.
			raw := harness.MustKubectl(ctx, t, "get", "--raw", fmt.Sprintf("/apis/apps.example.com/v1/namespaces/%s/webapps/%s/scale", ns, sampleName))
			var scale autoscalingv1.Scale
			if err := json.Unmarshal([]byte(raw), &scale); err != nil {
				t.Fatalf("scale subresource: %v: %s", err, raw)
			}
			if scale.Spec.Replicas != replicas || scale.Status.Replicas != replicas || scale.Status.Selector != ptr.Deref(w.Status.Selector, "") {
				t.Errorf("scale subresource: spec %d status %d selector %q; want %d, %d, %q", scale.Spec.Replicas, scale.Status.Replicas, scale.Status.Selector, replicas, replicas, ptr.Deref(w.Status.Selector, ""))
			}
			return ctx
		}).
		Assess("the owned Deployment and Service heal: hand edits are reverted, deleted ones come back", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			const replicas = 5
			r := cfg.Client().Resources(ns)
			w, err := getWebApp(ctx, cfg, ns, sampleName)
			if err != nil {
				t.Fatal(err)
			}

			// A hand edit of the image and the replicas...
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: sampleName, Namespace: ns}}
			edit := `{"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"web","image":"registry.example.com/intruder:v6"}]}}}}`
			if err := r.GetControllerRuntimeClient().Patch(ctx, d, client.RawPatch(types.StrategicMergePatchType, []byte(edit))); err != nil {
				t.Fatal(err)
			}
			editedGen := d.Generation
			// ...is reverted: a later generation with the WebApp's values.
			waitDeployment(ctx, t, cfg, ns, sampleName, "hand edit reverted", func(d *appsv1.Deployment) bool {
				return d.Generation > editedGen && d.Spec.Template.Spec.Containers[0].Image == newImage && deploymentRolledOut(d, replicas)
			})
			eventually(ctx, t, convergeTimeout, "every pod runs the WebApp's image again", func(ctx context.Context) (bool, string, error) {
				pods, err := readyPodsByImage(ctx, cfg, ns, sampleName)
				return err == nil && pods[newImage] == replicas && len(pods) == 1, fmt.Sprint(pods), err
			})

			// Deleted Deployment and Service come back as new objects.
			var oldDep appsv1.Deployment
			var oldSvc corev1.Service
			if err := r.Get(ctx, sampleName, ns, &oldDep); err != nil {
				t.Fatal(err)
			}
			if err := r.Get(ctx, sampleName, ns, &oldSvc); err != nil {
				t.Fatal(err)
			}
			background := resources.WithDeletePropagation(string(metav1.DeletePropagationBackground))
			if err := r.Delete(ctx, &oldDep, background); err != nil {
				t.Fatal(err)
			}
			if err := r.Delete(ctx, &oldSvc, background); err != nil {
				t.Fatal(err)
			}
			dep := waitDeployment(ctx, t, cfg, ns, sampleName, "recreated and rolled out", func(d *appsv1.Deployment) bool {
				return d.UID != oldDep.UID && deploymentRolledOut(d, replicas)
			})
			requireControlledBy(t, dep, w)
			var svc corev1.Service
			eventually(ctx, t, convergeTimeout, "Service recreated", func(ctx context.Context) (bool, string, error) {
				err := r.Get(ctx, sampleName, ns, &svc)
				return err == nil && svc.UID != oldSvc.UID, string(svc.UID), client.IgnoreNotFound(err)
			})
			requireControlledBy(t, &svc, w)
			waitWebAppReady(ctx, t, cfg, ns, sampleName, replicas)
			return ctx
		}).
		Feature()

	deletion := features.New("deleting a WebApp cleans up, also with its namespace").
		WithLabel("area", "lifecycle").
		Assess("deleting a WebApp deregisters it, and the garbage collector removes what it owned", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			w := newWebApp(ns, "doomed", "registry.example.com/web:v1.0.0")
			w.Spec.Replicas = new(int32(2))
			createWebApp(ctx, t, cfg, w)
			waitWebAppReady(ctx, t, cfg, ns, w.Name, 2)
			requireRegistryEntry(ctx, t, cfg, ns, w.Name, true)

			if err := cfg.Client().Resources().Delete(ctx, w); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, convergeTimeout, "the WebApp is gone", func(ctx context.Context) (bool, string, error) {
				got, err := getWebApp(ctx, cfg, ns, w.Name)
				if apierrors.IsNotFound(err) {
					return true, "", nil
				}
				if err != nil {
					return false, "", err
				}
				return false, fmt.Sprintf("deletionTimestamp=%v finalizers=%v", got.DeletionTimestamp, got.Finalizers), nil
			})
			requireRegistryEntry(ctx, t, cfg, ns, w.Name, false)
			// Caveat of the real garbage collector: it watches a custom
			// resource only from its next discovery sync (every 30s) after
			// the CRD appeared; a WebApp deleted before that has its
			// dependents collected at that sync. Early in the suite this
			// wait can therefore take up to ~30s.
			waitNothingLeft(ctx, t, cfg, ns, w.Name)
			return ctx
		}).
		Assess("deleting a namespace with a WebApp completes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t) + "-gone"
			r := cfg.Client().Resources()
			nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{namespaceLabel: "true"}}}
			if err := r.Create(ctx, nsObj); err != nil {
				t.Fatal(err)
			}
			w := newWebApp(ns, "tenant", "registry.example.com/web:v1.0.0")
			createWebApp(ctx, t, cfg, w)
			waitWebAppReady(ctx, t, cfg, ns, w.Name, 1)
			requireRegistryEntry(ctx, t, cfg, ns, w.Name, true)

			if err := r.Delete(ctx, nsObj); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, convergeTimeout, "namespace "+ns+" is deleted", func(ctx context.Context) (bool, string, error) {
				var got corev1.Namespace
				err := r.Get(ctx, ns, "", &got)
				if apierrors.IsNotFound(err) {
					return true, "", nil
				}
				if err != nil {
					return false, "", err
				}
				return false, fmt.Sprintf("phase=%s conditions=%+v", got.Status.Phase, got.Status.Conditions), nil
			})
			requireRegistryEntry(ctx, t, cfg, ns, w.Name, false)
			return ctx
		}).
		Feature()

	testenv.Test(t, f, deletion)
}

// webAppState is one status of a WebApp as a watch delivered it.
type webAppState struct {
	generation, observed int64
	ready, reconciling   string // condition status, "" when absent
	readyReplicas        int32
}

func (s webAppState) String() string {
	return fmt.Sprintf("{gen=%d observed=%d Ready=%s Reconciling=%s readyReplicas=%d}", s.generation, s.observed, s.ready, s.reconciling, s.readyReplicas)
}

// webAppStates are the statuses of a WebApp its watch delivered, in order
// (not the version it started from).
func webAppStates(ow *objectWatch) []webAppState {
	events, _ := ow.snapshot()
	var out []webAppState
	for _, e := range events {
		app, ok := e.obj.(*webappv1.WebApp)
		if !ok || e.typ == eventInitial {
			continue
		}
		s := webAppState{generation: app.Generation, observed: ptr.Deref(app.Status.ObservedGeneration, 0), readyReplicas: ptr.Deref(app.Status.ReadyReplicas, 0)}
		if c := meta.FindStatusCondition(app.Status.Conditions, conditionReady); c != nil {
			s.ready = string(c.Status)
		}
		if c := meta.FindStatusCondition(app.Status.Conditions, conditionReconciling); c != nil {
			s.reconciling = string(c.Status)
		}
		out = append(out, s)
	}
	return out
}

// requireRegistryEntry checks the WebApp's route registry shard for the
// key "<ns>.<name>" (and its value when present), waiting for it to appear
// or go.
func requireRegistryEntry(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name string, present bool) {
	t.Helper()
	key := ns + "." + name
	want := fmt.Sprintf("http://%s.%s.svc:80", name, ns)
	shard := registryShard(ns, name)
	eventually(ctx, t, convergeTimeout, fmt.Sprintf("registry %s/%s has key %s: %t", operatorNamespace, shard, key, present), func(ctx context.Context) (bool, string, error) {
		var cm corev1.ConfigMap
		if err := cfg.Client().Resources().Get(ctx, shard, operatorNamespace, &cm); err != nil {
			if apierrors.IsNotFound(err) && !present {
				return true, "no shard", nil
			}
			return false, "", err
		}
		got, ok := cm.Data[key]
		if present {
			return ok && got == want, fmt.Sprintf("%s=%q", key, got), nil
		}
		return !ok, fmt.Sprintf("%s=%q", key, got), nil
	})
}

// waitNothingLeft waits until no object of a deleted WebApp is left,
// terminating or not: Deployment, ReplicaSets, pods, Service.
func waitNothingLeft(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name string) {
	t.Helper()
	r := cfg.Client().Resources(ns)
	sel := resources.WithLabelSelector(labelInstance + "=" + name)
	eventually(ctx, t, convergeTimeout, "the garbage collector removed the Deployment, ReplicaSets, pods and Service of "+name, func(ctx context.Context) (bool, string, error) {
		var deps appsv1.DeploymentList
		var rss appsv1.ReplicaSetList
		var pods corev1.PodList
		var svcs corev1.ServiceList
		for _, l := range []client.ObjectList{&deps, &rss, &pods, &svcs} {
			if err := r.List(ctx, l, sel); err != nil {
				return false, "", err
			}
		}
		left := len(deps.Items) + len(rss.Items) + len(pods.Items) + len(svcs.Items)
		return left == 0, fmt.Sprintf("left: %d Deployments, %d ReplicaSets, %d pods, %d Services", len(deps.Items), len(rss.Items), len(pods.Items), len(svcs.Items)), nil
	})
}

func equalResources(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
