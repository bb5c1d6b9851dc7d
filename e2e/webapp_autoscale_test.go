//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// The emulated load: kwok computes every pod's CPU usage from a
// ClusterResourceUsage (kwok.x-k8s.io/v1alpha1) whose selector matches the
// feature's namespace; the assessment rewrites its expression to raise and
// lower the load of every pod of the WebApp, also of pods created later.
var clusterResourceUsageGVK = schema.GroupVersionKind{Group: "kwok.x-k8s.io", Version: "v1alpha1", Kind: "ClusterResourceUsage"}

const (
	autoscaleName = "webapp-autoscale"
	// autoscaleRequest is each pod's CPU request (and limit), so the
	// utilization is usage / 200m.
	autoscaleRequest = "200m"
	// The target utilization and the two load levels: 10% is well under
	// the target (one replica is enough), 200% is four times over it (the
	// HPA wants 4 per pod, capped at maxReplicas).
	autoscaleTarget = 50
	idleCPU         = "20m"
	busyCPU         = "400m"
	minReplicas     = 1
	maxReplicas     = 4
	// scaleTimeout is a safety net for each scaling step, not a timing
	// assertion. On time, a step takes about 40 s: metrics-server needs
	// two scrapes 10 s apart (--metric-resolution) for a new CPU rate, a
	// rate over a window that straddles the change reads in between (so
	// up to two more scrapes), and the HPA syncs every 5 s on the suite's
	// cluster (hack/cluster.sh with KWOK_METRICS_SERVER=1); then the
	// operator rolls the replicas out. The bound was 90 s, which a scrape
	// timed out (5 s --kubelet-request-timeout) or an HPA sync delayed on
	// a loaded machine could use up; five minutes is margin for that, and
	// a failure still reports the HPA's or the WebApp's last state.
	scaleTimeout = 5 * time.Minute
)

// TestWebAppAutoscale is the maturity model's level 5: a
// HorizontalPodAutoscaler scales a WebApp through its scale subresource when
// its pods' CPU rises and falls, and the operator follows (Deployment
// replicas, status.replicas, Ready). The CPU usage is kwok's emulation,
// served to the HPA by a real metrics-server; it needs the kwok provider's
// cluster (hack/cluster.sh, KWOK_METRICS_SERVER=1) and skips elsewhere.
func TestWebAppAutoscale(t *testing.T) {
	var crName string
	f := features.New("a HorizontalPodAutoscaler scales a WebApp up and down with its pods' CPU").
		WithLabel("area", "autoscaling").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			requireMetricsAPI(ctx, t)
			ns := Namespace(ctx, t)
			crName = "e2e-autoscale-" + ns
			setEmulatedCPU(ctx, t, cfg, crName, ns, idleCPU)

			w := newWebApp(ns, autoscaleName, "registry.example.com/web:v1.0.0")
			w.Spec.Resources = &webappv1.ContainerResources{CPU: ptr.To(quantity(autoscaleRequest))}
			createWebApp(ctx, t, cfg, w)
			waitWebAppReady(ctx, t, cfg, ns, autoscaleName, minReplicas)
			// Utilization is usage over request: the pods must request CPU.
			waitDeployment(ctx, t, cfg, ns, autoscaleName, "pods request "+autoscaleRequest+" CPU", func(d *appsv1.Deployment) bool {
				r := d.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]
				return r.Cmp(quantity(autoscaleRequest)) == 0
			})
			// The metrics API serves the pod's emulated CPU before the HPA
			// exists (a new pod's CPU rate needs two scrapes, 10s apart), so
			// the HPA's first reading succeeds.
			waitPodMetrics(ctx, t, ns, minReplicas, idleCPU)

			hpa := &autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Name: autoscaleName, Namespace: ns},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
						APIVersion: webappv1.GroupVersion.String(), Kind: "WebApp", Name: autoscaleName,
					},
					MinReplicas: ptr.To[int32](minReplicas),
					MaxReplicas: maxReplicas,
					Metrics: []autoscalingv2.MetricSpec{{
						Type: autoscalingv2.ResourceMetricSourceType,
						Resource: &autoscalingv2.ResourceMetricSource{
							Name: corev1.ResourceCPU,
							Target: autoscalingv2.MetricTarget{
								Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](autoscaleTarget),
							},
						},
					}},
					// Scale down as soon as the load is gone: the default
					// stabilization window is five minutes.
					Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
						ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
					},
				},
			}
			if err := cfg.Client().Resources().Create(ctx, hpa); err != nil {
				t.Fatalf("create HorizontalPodAutoscaler: %v", err)
			}
			return ctx
		}).
		Assess("at low CPU the HPA reads the metrics and keeps one replica", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			hpa := waitHPA(ctx, t, cfg, ns, "reading CPU below the target", func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
				u := currentCPUUtilization(h)
				return hpaCondition(h, autoscalingv2.ScalingActive) == corev1.ConditionTrue && u != nil && *u < autoscaleTarget
			})
			if hpa.Status.DesiredReplicas != minReplicas {
				t.Errorf("HPA desiredReplicas = %d at %d%% CPU, want %d", hpa.Status.DesiredReplicas, *currentCPUUtilization(hpa), minReplicas)
			}
			logHPA(ctx, t, ns)
			return ctx
		}).
		Assess("high CPU scales the WebApp up to maxReplicas; the operator rolls it out and is Ready", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			start := time.Now()
			setEmulatedCPU(ctx, t, cfg, crName, ns, busyCPU)
			waitAutoscaled(ctx, t, cfg, ns, maxReplicas)
			hpa := waitHPA(ctx, t, cfg, ns, fmt.Sprintf("desiredReplicas %d, limited by maxReplicas", maxReplicas), func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
				return h.Status.CurrentReplicas == maxReplicas && h.Status.DesiredReplicas == maxReplicas &&
					hpaCondition(h, autoscalingv2.ScalingLimited) == corev1.ConditionTrue
			})
			t.Logf("scaled up to %d in %v at %d%% CPU", maxReplicas, time.Since(start).Round(time.Second), *currentCPUUtilization(hpa))
			// The replicas were written through the scale subresource by
			// the HPA (kube-controller-manager), not by hand.
			w, err := getWebApp(ctx, cfg, ns, autoscaleName)
			if err != nil {
				t.Fatal(err)
			}
			if !hasManager(w, "/scale") {
				t.Errorf("no field manager wrote the WebApp's scale subresource; managers %v", managers(w))
			}
			t.Logf("WebApp field managers: %v", managers(w))
			logHPA(ctx, t, ns)
			return ctx
		}).
		Assess("low CPU scales it back down to minReplicas, Ready again", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			start := time.Now()
			setEmulatedCPU(ctx, t, cfg, crName, ns, idleCPU)
			waitAutoscaled(ctx, t, cfg, ns, minReplicas)
			hpa := waitHPA(ctx, t, cfg, ns, fmt.Sprintf("desiredReplicas %d", minReplicas), func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
				return h.Status.CurrentReplicas == minReplicas && h.Status.DesiredReplicas == minReplicas
			})
			t.Logf("scaled down to %d in %v at %d%% CPU", minReplicas, time.Since(start).Round(time.Second), *currentCPUUtilization(hpa))
			logHPA(ctx, t, ns)
			events := harness.MustKubectl(ctx, t, "events", "-n", ns, "--for", "horizontalpodautoscaler/"+autoscaleName)
			t.Logf("HPA events:\n%s", events)
			for _, want := range []string{"SuccessfulRescale", fmt.Sprintf("New size: %d", maxReplicas), fmt.Sprintf("New size: %d", minReplicas)} {
				if !strings.Contains(events, want) {
					t.Errorf("HPA events lack %q", want)
				}
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// Cluster-scoped: the namespace's deletion does not remove it.
			if crName != "" {
				cr := &unstructured.Unstructured{}
				cr.SetGroupVersionKind(clusterResourceUsageGVK)
				cr.SetName(crName)
				if err := cfg.Client().Resources().GetControllerRuntimeClient().Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("delete ClusterResourceUsage %s: %v", crName, err)
				}
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// requireMetricsAPI skips t unless the cluster is one the suite runs
// metrics-server and kwok's ClusterResourceUsage on: the kwok provider's,
// unless KWOK_METRICS_SERVER (other than 1) turned it off (a provider switch; kind and
// existing clusters need not serve them). On that cluster a missing metrics
// API or CRD fails t: hack/cluster.sh waited for both before the suite began.
func requireMetricsAPI(ctx context.Context, t *testing.T) {
	t.Helper()
	// localCluster sets KWOK_METRICS_SERVER=1 when it is empty;
	// hack/cluster.sh runs metrics-server only for 1.
	if ms := os.Getenv("KWOK_METRICS_SERVER"); harness.opts.Provider != ProviderKwok || (ms != "" && ms != "1") {
		t.Skipf("needs the metrics API (metrics-server) and kwok's emulated CPU usage, which only the kwok provider's cluster runs (E2E_PROVIDER=kwok, KWOK_METRICS_SERVER unset or 1); here provider %s, KWOK_METRICS_SERVER=%q",
			harness.opts.Provider, ms)
	}
	out, err := harness.Kubectl(ctx, "get", "apiservice", "v1beta1.metrics.k8s.io", "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	if err != nil || out != "True" {
		t.Fatalf("the kwok provider's cluster runs metrics-server (hack/cluster.sh with KWOK_METRICS_SERVER=1), but APIService v1beta1.metrics.k8s.io is Available=%q: %v", out, err)
	}
	if _, err := harness.Kubectl(ctx, "get", "crd", "clusterresourceusages.kwok.x-k8s.io"); err != nil {
		t.Fatalf("the kwok provider's cluster enables kwok's ClusterResourceUsage CRD (hack/cluster.sh with KWOK_METRICS_SERVER=1), but it is missing: %v", err)
	}
}

// setEmulatedCPU creates or updates the ClusterResourceUsage name that gives
// every container of every pod in namespace ns the CPU usage cpu.
func setEmulatedCPU(ctx context.Context, t *testing.T, cfg *envconf.Config, name, ns, cpu string) {
	t.Helper()
	c := cfg.Client().Resources().GetControllerRuntimeClient()
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(clusterResourceUsageGVK)
	err := c.Get(ctx, client.ObjectKey{Name: name}, cr)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	cr.SetName(name)
	cr.Object["spec"] = map[string]any{
		"selector": map[string]any{"matchNamespaces": []any{ns}},
		"usages": []any{map[string]any{"usage": map[string]any{
			"cpu":    map[string]any{"expression": fmt.Sprintf("Quantity(%q)", cpu)},
			"memory": map[string]any{"expression": `Quantity("32Mi")`},
		}}},
	}
	if apierrors.IsNotFound(err) {
		err = c.Create(ctx, cr)
	} else {
		err = c.Update(ctx, cr)
	}
	if err != nil {
		t.Fatalf("set the emulated CPU of namespace %s to %s: %v", ns, cpu, err)
	}
	t.Logf("emulated CPU usage per pod in %s: %s (request %s)", ns, cpu, autoscaleRequest)
}

// waitPodMetrics waits until the metrics API (metrics.k8s.io/v1beta1, what
// `kubectl top pods` reads) reports n pods in ns, each using about cpu.
func waitPodMetrics(ctx context.Context, t *testing.T, ns string, n int, cpu string) {
	t.Helper()
	want := quantity(cpu)
	eventually(ctx, t, scaleTimeout, fmt.Sprintf("the metrics API reports %d pods in %s at %s CPU", n, ns, cpu), func(ctx context.Context) (bool, string, error) {
		raw, err := harness.Kubectl(ctx, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods")
		if err != nil {
			return false, "", err
		}
		// The fields of metrics.k8s.io/v1beta1 PodMetricsList read here
		// (k8s.io/metrics is not a dependency of this module).
		var list struct {
			Items []struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Containers []struct {
					Usage corev1.ResourceList `json:"usage"`
				} `json:"containers"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(raw), &list); err != nil {
			return false, raw, err
		}
		var got []string
		near := 0
		for _, p := range list.Items {
			var sum resource.Quantity
			for _, c := range p.Containers {
				sum.Add(c.Usage[corev1.ResourceCPU])
			}
			got = append(got, p.Metadata.Name+"="+sum.String())
			// A rate over a 10s window, rounded up to millicores: allow
			// 25% around the emulated value.
			if d := sum.MilliValue() - want.MilliValue(); d*4 <= want.MilliValue() && -d*4 <= want.MilliValue() {
				near++
			}
		}
		return len(list.Items) == n && near == n, strings.Join(got, " "), nil
	})
}

// waitAutoscaled waits until the HPA has set the WebApp to replicas and the
// operator has followed: the Deployment rolled out with that many replicas
// and the WebApp Ready with status.replicas = readyReplicas = replicas.
func waitAutoscaled(ctx context.Context, t *testing.T, cfg *envconf.Config, ns string, replicas int32) {
	t.Helper()
	eventually(ctx, t, scaleTimeout, fmt.Sprintf("the HPA sets WebApp %s/%s to %d replicas", ns, autoscaleName, replicas), func(ctx context.Context) (bool, string, error) {
		w, err := getWebApp(ctx, cfg, ns, autoscaleName)
		if err != nil {
			return false, "", err
		}
		return w.Spec.Replicas != nil && *w.Spec.Replicas == replicas, describeWebApp(w), nil
	})
	waitDeployment(ctx, t, cfg, ns, autoscaleName, fmt.Sprintf("%d replicas rolled out", replicas), func(d *appsv1.Deployment) bool {
		return deploymentRolledOut(d, replicas)
	})
	waitWebAppReady(ctx, t, cfg, ns, autoscaleName, replicas)
}

// waitHPA polls the HPA until ok and returns it.
func waitHPA(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, what string, ok func(*autoscalingv2.HorizontalPodAutoscaler) bool) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	var h autoscalingv2.HorizontalPodAutoscaler
	eventually(ctx, t, scaleTimeout, "HPA "+what, func(ctx context.Context) (bool, string, error) {
		if err := cfg.Client().Resources().Get(ctx, autoscaleName, ns, &h); err != nil {
			return false, "", err
		}
		return ok(&h), describeHPA(&h), nil
	})
	return &h
}

func hpaCondition(h *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) corev1.ConditionStatus {
	for _, c := range h.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// currentCPUUtilization is the average CPU utilization the HPA last read,
// nil before it read one.
func currentCPUUtilization(h *autoscalingv2.HorizontalPodAutoscaler) *int32 {
	for _, m := range h.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU {
			return m.Resource.Current.AverageUtilization
		}
	}
	return nil
}

func describeHPA(h *autoscalingv2.HorizontalPodAutoscaler) string {
	util := "<unknown>"
	if u := currentCPUUtilization(h); u != nil {
		util = fmt.Sprintf("%d%%", *u)
	}
	var conds []string
	for _, c := range h.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("cpu=%s/%d%% replicas current=%d desired=%d conditions=%v", util, autoscaleTarget, h.Status.CurrentReplicas, h.Status.DesiredReplicas, conds)
}

// logHPA records the HPA as a user sees it: kubectl get and describe
// (status conditions and events).
func logHPA(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	t.Logf("kubectl get hpa:\n%s", harness.MustKubectl(ctx, t, "get", "hpa", "-n", ns, autoscaleName))
	t.Logf("kubectl describe hpa:\n%s", harness.MustKubectl(ctx, t, "describe", "hpa", "-n", ns, autoscaleName))
	t.Logf("kubectl top pods:\n%s", harness.MustKubectl(ctx, t, "top", "pods", "-n", ns))
}

// hasManager reports whether a field manager of obj wrote through a
// subresource with the given suffix ("/scale").
func hasManager(obj metav1.Object, suffix string) bool {
	for _, m := range managers(obj) {
		if strings.HasSuffix(m, suffix) {
			return true
		}
	}
	return false
}
