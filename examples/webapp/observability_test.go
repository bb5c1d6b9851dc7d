package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/reconcilekit/reconcilekit/internal/prereq"
)

// promtool finds promtool, installing Debian's prometheus package through
// hack/prometheus.sh when it is missing. When apt cannot install it (exit
// status 3) the test skips, saying so, or fails under CI=true
// (prereq.Missing).
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "hack", "prometheus.sh"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		prereq.Missing(t, "promtool is not installed and hack/prometheus.sh cannot install it: %s", strings.TrimSpace(stderr.String()))
	}
	require.NoError(t, err, "hack/prometheus.sh: %s", stderr.String())
	return filepath.Join(strings.TrimSpace(lastLine(string(out))), "promtool")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// ruleGroups returns the groups of config/prometheus/prometheus_rule.yaml
// (a PrometheusRule) as a Prometheus rule file: its spec, which is exactly
// that format.
func ruleGroups(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("config", "prometheus", "prometheus_rule.yaml"))
	require.NoError(t, err)
	var rule struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Spec       map[string]any `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(b, &rule))
	require.Equal(t, "monitoring.coreos.com/v1", rule.APIVersion)
	require.Equal(t, "PrometheusRule", rule.Kind)
	out, err := yaml.Marshal(rule.Spec)
	require.NoError(t, err)
	return out
}

// TestAlertRules runs promtool on the PrometheusRule's groups: `check
// rules` (syntax, templates, linting) and `test rules` with
// config/prometheus/tests/alerts_test.yaml, which makes every alert fire
// and resolve (or stay silent) on series named as the operator exports
// them. e2e/webapp_alerts_test.go checks those names against a real scrape.
func TestAlertRules(t *testing.T) {
	bin := promtool(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), ruleGroups(t), 0o644))
	tests, err := os.ReadFile(filepath.Join("config", "prometheus", "tests", "alerts_test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644))

	check := exec.Command(bin, "check", "rules", "rules.yaml")
	check.Dir = dir
	out, err := check.CombinedOutput()
	require.NoError(t, err, "promtool check rules:\n%s", out)

	test := exec.Command(bin, "test", "rules", "alerts_test.yaml")
	test.Dir = dir
	out, err = test.CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
}

// TestEveryAlertIsUnitTested: an alert added to the PrometheusRule without
// a promtool test case that expects it to fire fails here.
func TestEveryAlertIsUnitTested(t *testing.T) {
	var groups struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, yaml.Unmarshal(ruleGroups(t), &groups))
	b, err := os.ReadFile(filepath.Join("config", "prometheus", "tests", "alerts_test.yaml"))
	require.NoError(t, err)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(b, &tests))
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("alert %s: tests/alerts_test.yaml must expect it to fire (has: %t) and to stay silent (has: %t)", r.Alert, fires[r.Alert], silent[r.Alert])
			}
		}
	}
	require.Positive(t, n, "no alert found in the PrometheusRule")
}

// kustomize builds dir with the tools' kubectl and returns its objects.
func kustomize(t *testing.T, dir string) []map[string]any {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	require.NotEmpty(t, assets, "KUBEBUILDER_ASSETS (the tools bin dir, with kubectl) is not set: run `make test-integration`")
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", dir).CombinedOutput()
	require.NoError(t, err, "kubectl kustomize %s: %s", dir, out)
	var objs []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return objs
		} else {
			require.NoError(t, err)
		}
		objs = append(objs, raw)
	}
}

// TestPrometheusConfigFindsTheManager: config/prometheus' Service selects
// the pods config/default deploys and targets their metrics port, and the
// ServiceMonitor selects that Service and scrapes that port by name, in the
// operator's namespace. A label or port renamed on one side only would
// leave Prometheus with nothing to scrape and every alert silent.
func TestPrometheusConfigFindsTheManager(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kubectl from `make tools`")
	}
	byKind := map[string]map[string]any{}
	for _, o := range kustomize(t, "config/prometheus") {
		byKind[o["kind"].(string)] = o
	}
	var manager *appsv1.Deployment
	for _, o := range kustomize(t, "config/default") {
		if o["kind"] == "Deployment" {
			b, err := yaml.Marshal(o)
			require.NoError(t, err)
			manager = &appsv1.Deployment{}
			require.NoError(t, yaml.Unmarshal(b, manager))
		}
	}
	require.NotNil(t, manager)
	convert := func(kind string, into any) {
		require.Contains(t, byKind, kind)
		b, err := yaml.Marshal(byKind[kind])
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(b, into))
	}
	var svc corev1.Service
	convert("Service", &svc)
	var monitor struct {
		Metadata struct{ Namespace string } `json:"metadata"`
		Spec     struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			Endpoints []struct {
				Port, Path, Scheme string
			} `json:"endpoints"`
		} `json:"spec"`
	}
	convert("ServiceMonitor", &monitor)
	var rule struct {
		Metadata struct{ Namespace string } `json:"metadata"`
	}
	convert("PrometheusRule", &rule)

	assert.Equal(t, manager.Namespace, svc.Namespace)
	assert.Equal(t, manager.Namespace, monitor.Metadata.Namespace)
	assert.Equal(t, manager.Namespace, rule.Metadata.Namespace)
	for k, v := range svc.Spec.Selector {
		assert.Equal(t, v, manager.Spec.Template.Labels[k], "the Service selects the manager's pods by %s", k)
	}
	require.Len(t, svc.Spec.Ports, 1)
	port := svc.Spec.Ports[0]
	var containerPorts []string
	for _, p := range manager.Spec.Template.Spec.Containers[0].Ports {
		containerPorts = append(containerPorts, p.Name)
		if p.Name == port.TargetPort.StrVal {
			assert.Contains(t, manager.Spec.Template.Spec.Containers[0].Args, fmt.Sprintf("--metrics-bind-address=:%d", p.ContainerPort))
		}
	}
	assert.Contains(t, containerPorts, port.TargetPort.StrVal, "the Service targets a named port of the manager")
	for k, v := range monitor.Spec.Selector.MatchLabels {
		assert.Equal(t, v, svc.Labels[k], "the ServiceMonitor selects the Service by %s", k)
	}
	require.Len(t, monitor.Spec.Endpoints, 1)
	assert.Equal(t, port.Name, monitor.Spec.Endpoints[0].Port)
	assert.Equal(t, "/metrics", monitor.Spec.Endpoints[0].Path)
	assert.Equal(t, "https", monitor.Spec.Endpoints[0].Scheme)
}
