//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/reconcilekit/reconcilekit/internal/prereq"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// The scrape jobs of the assessment's Prometheus: the operator scraped
// with a token allowed by the metrics-reader role, and the same endpoint
// with a token that is not.
const (
	scrapeJob       = "webapp-operator"
	deniedScrapeJob = "webapp-operator-denied"
	metricsReader   = "webapp-metrics-reader" // config/rbac/metrics_reader_role.yaml, prefixed
)

// TestOperatorAlerts (L4) runs Debian's Prometheus on 127.0.0.1 against the
// primary operator's metrics endpoint, with the PrometheusRule of
// examples/webapp/config/prometheus loaded as it is, and checks:
//   - the endpoint serves a ServiceAccount token bound to the metrics-reader
//     ClusterRole, and refuses one that is not;
//   - WebAppStalled fires when a WebApp stalls (a rollout past its progress
//     deadline) and resolves once it is fixed;
//   - every metric name in the alert rules and in the Grafana dashboard is
//     one Prometheus ingested from the operator, and every dashboard query
//     returns series.
func TestOperatorAlerts(t *testing.T) {
	if operator.mode != modeProcess {
		t.Skip("scrapes the operator's metrics endpoint on 127.0.0.1: needs E2E_OPERATOR=process")
	}
	const app = "stall"
	var prom *prometheusServer
	var promStarted time.Time
	config := filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "config")

	f := features.New("alerts: a real Prometheus scrapes the operator; WebAppStalled fires and resolves").
		WithLabel("area", "observability").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			bin, missing, err := prometheusBinary(ctx, harness.opts.RepoRoot)
			if err != nil {
				t.Fatal(err)
			}
			if missing != "" {
				prereq.Missing(t, "%s", missing)
			}
			ns := Namespace(ctx, t)
			dir := t.TempDir()
			allowed := scrapeToken(ctx, t, cfg, ns, "prometheus", true, dir)
			denied := scrapeToken(ctx, t, cfg, ns, "not-prometheus", false, dir)
			address := fmt.Sprintf("127.0.0.1:%d", operator.primary.metricsPort)
			prom, err = startPrometheus(ctx, bin, dir, ruleGroups(t, config), []prometheusTarget{
				{job: scrapeJob, address: address, tokenFile: allowed},
				{job: deniedScrapeJob, address: address, tokenFile: denied},
			})
			if err != nil {
				t.Fatal(err)
			}
			promStarted = time.Now()
			t.Cleanup(func() {
				prom.stop()
				if t.Failed() {
					t.Logf("end of the Prometheus log:\n%s", tail(filepath.Join(dir, "prometheus.log"), 30))
				}
			})
			return ctx
		}).
		Assess("the metrics-reader token is allowed to scrape, another is not", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// Scraped every second: the deadline is a safety net for a
			// loaded machine, whose scrapes may time out (1 s) a while.
			eventually(ctx, t, convergeTimeout, "both targets scraped once", func(ctx context.Context) (bool, string, error) {
				ts, err := prom.targets(ctx)
				if err != nil {
					return false, "", err
				}
				health := map[string]promTarget{}
				for _, tg := range ts {
					health[tg.Labels["job"]] = tg
				}
				ok, denied := health[scrapeJob], health[deniedScrapeJob]
				return ok.Health == "up" && denied.Health == "down" && strings.Contains(denied.LastError, "403"),
					fmt.Sprintf("%s: %s %q; %s: %s %q", scrapeJob, ok.Health, ok.LastError, deniedScrapeJob, denied.Health, denied.LastError), nil
			})
			return ctx
		}).
		Assess("a Stalled WebApp fires WebAppStalled", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			if a := stalledAlert(ctx, t, prom); a != nil {
				t.Fatalf("WebAppStalled is %s before any WebApp stalled: %v", a.State, a.Labels)
			}
			// Pods asking for 1000 CPUs are never scheduled on the kwok
			// node, so the rollout makes no progress; a 2s progress
			// deadline (a field the operator does not set, so its applies
			// leave it alone) makes the Deployment controller give up
			// within seconds instead of ten minutes.
			w := newWebApp(ns, app, "registry.example.com/web:v1.0.0")
			w.Spec.Resources = &webappv1.ContainerResources{CPU: new(quantity("1000"))}
			createWebApp(ctx, t, cfg, w)
			waitDeployment(ctx, t, cfg, ns, app, "created", func(*appsv1.Deployment) bool { return true })
			patchDeployment(ctx, t, cfg, ns, app, `{"spec":{"progressDeadlineSeconds":2}}`)

			var stalledAt time.Time
			eventually(ctx, t, convergeTimeout, "the WebApp is Stalled", func(ctx context.Context) (bool, string, error) {
				w, err := getWebApp(ctx, cfg, ns, app)
				if err != nil {
					return false, "", err
				}
				stalledAt = time.Now()
				return meta.IsStatusConditionTrue(w.Status.Conditions, "Stalled"), describeWebApp(w), nil
			})
			eventually(ctx, t, time.Minute, "WebAppStalled firing", func(ctx context.Context) (bool, string, error) {
				a := stalledAlert(ctx, t, prom)
				if a == nil {
					return false, "no WebAppStalled alert", nil
				}
				return a.State == "firing" && a.Labels["controller"] == "webapp-controller" && a.Labels["severity"] == "warning",
					fmt.Sprintf("%s %v", a.State, a.Labels), nil
			})
			t.Logf("WebAppStalled fired %v after the WebApp was seen Stalled", time.Since(stalledAt).Round(100*time.Millisecond))
			return ctx
		}).
		Assess("fixing the WebApp resolves WebAppStalled", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			patchDeployment(ctx, t, cfg, ns, app, `{"spec":{"progressDeadlineSeconds":600}}`)
			patchWebApp(ctx, t, cfg, ns, app, `{"spec":{"resources":{"cpu":"100m"}}}`)
			waitWebAppReady(ctx, t, cfg, ns, app, 1)
			fixedAt := time.Now()
			eventually(ctx, t, time.Minute, "WebAppStalled resolved", func(ctx context.Context) (bool, string, error) {
				a := stalledAlert(ctx, t, prom)
				if a != nil {
					return false, fmt.Sprintf("%s %v", a.State, a.Labels), nil
				}
				return true, "no WebAppStalled alert", nil
			})
			t.Logf("WebAppStalled resolved %v after the WebApp was Ready", time.Since(fixedAt).Round(100*time.Millisecond))
			return ctx
		}).
		Assess("every metric the alerts and the dashboard use is exported by the operator", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			exprs := ruleExprs(t, config)
			dashboard := dashboardExprs(t, config)
			exported, err := prom.metricNames(ctx, scrapeJob)
			if err != nil {
				t.Fatal(err)
			}
			used := map[string][]string{} // metric -> where
			for where, expr := range exprs {
				for _, n := range metricNamesOf(t, where, expr) {
					used[n] = append(used[n], where)
				}
			}
			for where, expr := range dashboard {
				for _, n := range metricNamesOf(t, where, expr) {
					used[n] = append(used[n], where)
				}
				// Every panel's query runs and returns series for the
				// running operator: a panel that says "no data" on a live
				// operator is a wrong name or label (Grafana's
				// $__rate_interval is at least four scrape intervals; a
				// minute covers it).
				n, err := prom.query(ctx, strings.ReplaceAll(expr, "$__rate_interval", "1m"))
				switch {
				case err != nil:
					t.Errorf("dashboard %s: %v", where, err)
				case n == 0:
					t.Errorf("dashboard %s: no series for the running operator: %s", where, expr)
				}
			}
			if len(used) == 0 {
				t.Fatal("no metric names found in the rules and the dashboard")
			}
			var missing []string
			for n, where := range used {
				if !exported[n] {
					missing = append(missing, fmt.Sprintf("%s (in %s)", n, strings.Join(where, ", ")))
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Errorf("metrics used but not exported by the operator:\n  %s", strings.Join(missing, "\n  "))
			}
			t.Logf("%d metric names in %d alert and %d dashboard queries, all exported", len(used), len(exprs), len(dashboard))
			return ctx
		}).
		Assess("the dashboard draws from what Prometheus scraped", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// E2E_DASHBOARD_PNG=docs/images/webapp-dashboard.png (make
			// dashboard-png) keeps the picture for the docs.
			out := os.Getenv("E2E_DASHBOARD_PNG")
			if out == "" {
				out = filepath.Join(t.TempDir(), "dashboard.png")
			}
			b, err := os.ReadFile(filepath.Join(config, "grafana", "webapp-operator.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := renderDashboard(ctx, prom, b, promStarted, time.Now(), out); err != nil {
				t.Fatal(err)
			}
			t.Logf("dashboard drawn to %s", out)
			return ctx
		}).
		Feature()

	testenv.Test(t, f)
}

// stalledAlert returns the WebAppStalled alert, pending or firing, or nil.
func stalledAlert(ctx context.Context, t *testing.T, prom *prometheusServer) *promAlert {
	t.Helper()
	alerts, err := prom.alerts(ctx)
	if err != nil {
		t.Fatalf("Prometheus alerts: %v", err)
	}
	for _, a := range alerts {
		if a.Labels["alertname"] == "WebAppStalled" {
			return &a
		}
	}
	return nil
}

// scrapeToken creates a ServiceAccount in ns, binds it to the
// metrics-reader ClusterRole when allowed, mints a token and writes it to
// a file in dir for Prometheus' credentials_file.
func scrapeToken(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name string, allowed bool, dir string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("ServiceAccount %s/%s: %v", ns, name, err)
	}
	if allowed {
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReader},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
		}
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("ClusterRoleBinding to %s: %v", metricsReader, err)
		}
		t.Cleanup(func() {
			// A cluster-scoped object outlives the test namespace.
			if err := cs.RbacV1().ClusterRoleBindings().Delete(context.WithoutCancel(ctx), binding.Name, metav1.DeleteOptions{}); err != nil {
				t.Errorf("deleting ClusterRoleBinding %s: %v", binding.Name, err)
			}
		})
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	path := filepath.Join(dir, name+".token")
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// patchDeployment merge-patches the WebApp's Deployment as the suite (its
// own field manager, so the operator's applies leave the field alone).
func patchDeployment(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name, patch string) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := cfg.Client().Resources().GetControllerRuntimeClient().Patch(ctx, d, rawMergePatch(patch)); err != nil {
		t.Fatalf("patch Deployment %s/%s with %s: %v", ns, name, patch, err)
	}
}

// ruleGroups returns the groups of config/prometheus/prometheus_rule.yaml
// (a PrometheusRule's spec is a Prometheus rule file).
func ruleGroups(t *testing.T, config string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(config, "prometheus", "prometheus_rule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &rule); err != nil {
		t.Fatalf("prometheus_rule.yaml: %v", err)
	}
	out, err := yaml.JSONToYAML(rule.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ruleExprs returns each rule's expression by "alert <name>".
func ruleExprs(t *testing.T, config string) map[string]string {
	t.Helper()
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert  string `json:"alert"`
				Record string `json:"record"`
				Expr   string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(ruleGroups(t, config), &file); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert+r.Record] = r.Expr
		}
	}
	return out
}

// dashboardExprs returns every Prometheus query of the Grafana dashboard by
// "panel <title> <refId>".
func dashboardExprs(t *testing.T, config string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(config, "grafana", "webapp-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("webapp-operator.json: %v", err)
	}
	out := map[string]string{}
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			out[fmt.Sprintf("panel %q %s", p.Title, q.RefID)] = q.Expr
		}
	}
	return out
}

// metricNamesOf parses expr with Prometheus' own PromQL parser and returns
// the metric names its selectors read.
func metricNamesOf(t *testing.T, where, expr string) []string {
	t.Helper()
	// Grafana's interval macro is not PromQL.
	e, err := parser.ParseExpr(strings.ReplaceAll(expr, "$__rate_interval", "1m"))
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			t.Errorf("%s: selector %s names no metric", where, vs)
		} else if !slices.Contains(names, name) {
			names = append(names, name)
		}
		return nil
	})
	return names
}
