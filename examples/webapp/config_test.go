package main

import (
	"bytes"
	"errors"
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
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"
)

// TestDefaultConfigIsRestricted builds config/default with kubectl kustomize
// and evaluates the manager's pod template with the Pod Security admission
// library itself: it must pass the "restricted" level, and the manager must
// run with leader election behind probes, as the production layout
// promises.
func TestDefaultConfigIsRestricted(t *testing.T) {
	manager := kustomizeManager(t, "config/default")

	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	require.NoError(t, err)
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	for _, r := range evaluator.EvaluatePod(restricted, &manager.Spec.Template.ObjectMeta, &manager.Spec.Template.Spec) {
		assert.True(t, r.Allowed, "restricted: %s: %s", r.ForbiddenReason, r.ForbiddenDetail)
	}

	assert.Equal(t, int32(2), *manager.Spec.Replicas)
	c := manager.Spec.Template.Spec.Containers[0]
	assert.Contains(t, c.Args, "--leader-elect")
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.False(t, c.Resources.Limits.Memory().IsZero())
	assert.Equal(t, "webapp-controller-manager", manager.Spec.Template.Spec.ServiceAccountName)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, manager.Spec.Template.Spec.SecurityContext.SeccompProfile.Type)
}

// kustomizeManager builds dir with kubectl kustomize and returns the
// manager Deployment in it.
func kustomizeManager(t *testing.T, dir string) *appsv1.Deployment {
	t.Helper()
	manager := &appsv1.Deployment{}
	require.True(t, kustomizeObject(t, dir, "Deployment", "webapp-controller-manager", manager), "%s has the manager Deployment", dir)
	return manager
}

// kustomizeObject builds dir with kubectl kustomize and decodes the object
// of that kind and name into into; false if there is none.
func kustomizeObject(t *testing.T, dir, kind, name string, into any) bool {
	t.Helper()
	if testing.Short() {
		t.Skip("needs kubectl from `make tools`")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	require.NotEmpty(t, assets, "KUBEBUILDER_ASSETS (the tools bin dir, with kubectl) is not set: run `make test-integration`")
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", dir).CombinedOutput()
	require.NoError(t, err, "kubectl kustomize %s: %s", dir, out)

	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return false
		} else {
			require.NoError(t, err)
		}
		meta, _ := raw["metadata"].(map[string]any)
		if raw["kind"] != kind || meta["name"] != name {
			continue
		}
		b, err := yaml.Marshal(raw)
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(b, into))
		return true
	}
}

// TestShardedConfig: config/sharded runs three replicas with --sharding,
// each named by its pod (POD_NAME), and keeps leader election for the
// rest of the operator.
func TestShardedConfig(t *testing.T) {
	manager := kustomizeManager(t, "config/sharded")
	assert.Equal(t, int32(3), *manager.Spec.Replicas)
	c := manager.Spec.Template.Spec.Containers[0]
	assert.Contains(t, c.Args, "--sharding")
	assert.Contains(t, c.Args, "--leader-elect")
	var podName *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "POD_NAME" {
			podName = &c.Env[i]
		}
	}
	require.NotNil(t, podName, "POD_NAME is set")
	require.NotNil(t, podName.ValueFrom)
	assert.Equal(t, "metadata.name", podName.ValueFrom.FieldRef.FieldPath)
}

// TestShardUserAgent: a sharded replica's requests carry its identity after
// client-go's default user agent, which the chaos suite's audit check
// (e2e/chaos_audit.go) reads back.
func TestShardUserAgent(t *testing.T) {
	ua := shardUserAgent("webapp-operator-7d9f-x2")
	assert.True(t, strings.HasPrefix(ua, rest.DefaultKubernetesUserAgent()+" "), ua)
	assert.True(t, strings.HasSuffix(ua, " shard/webapp-operator-7d9f-x2"), ua)
}

// TestShardingRBAC: the overlays that run --sharding (config/sharded, and
// config/local-sharded for `make demo DEMO_SHARDS=3`) grant the Lease verbs a
// Member needs; the others keep the role the markers generate.
func TestShardingRBAC(t *testing.T) {
	membership := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"delete", "list", "update"}}
	for dir, sharded := range map[string]bool{
		"config/sharded": true, "config/local-sharded": true, "config/default": false, "config/local": false,
	} {
		role := &rbacv1.Role{}
		require.True(t, kustomizeObject(t, dir, "Role", "webapp-manager-role", role), "%s has the manager's Role", dir)
		assert.Equal(t, "webapp-system", role.Namespace, dir)
		if sharded {
			assert.Contains(t, role.Rules, membership, "%s grants what --sharding needs", dir)
		} else {
			assert.NotContains(t, role.Rules, membership, "%s grants the sharding verbs", dir)
		}
	}
}

// TestConversionWebhookConfig: the CRD converts through the operator's
// /convert, at the webhook Service config/default deploys (names after its
// prefix and namespace), and in config/local at https://127.0.0.1:9443 as
// the admission webhooks are, each of which calls the path of its own
// version (config/local patches them by position).
func TestConversionWebhookConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kubectl from `make tools`")
	}
	for _, dir := range []string{"config/default", "config/local"} {
		t.Run(dir, func(t *testing.T) {
			var service string
			var crd map[string]any
			var webhooks []any
			for _, o := range kustomize(t, dir) {
				switch o["kind"] {
				case "Service":
					if name := o["metadata"].(map[string]any)["name"].(string); strings.HasSuffix(name, "webhook-service") {
						service = name
					}
				case "CustomResourceDefinition":
					crd = o
				case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
					webhooks = append(webhooks, o["webhooks"].([]any)...)
				}
			}
			require.NotNil(t, crd)
			conv := crd["spec"].(map[string]any)["conversion"].(map[string]any)
			assert.Equal(t, "Webhook", conv["strategy"])
			cc := conv["webhook"].(map[string]any)["clientConfig"].(map[string]any)
			if dir == "config/local" {
				assert.Equal(t, "https://127.0.0.1:9443/convert", cc["url"])
				assert.NotContains(t, cc, "service")
			} else {
				require.NotEmpty(t, service)
				assert.Equal(t, map[string]any{"name": service, "namespace": "webapp-system", "path": "/convert"}, cc["service"])
			}

			require.Len(t, webhooks, 4, "mutating and validating, for v1 and v2")
			for _, w := range webhooks {
				w := w.(map[string]any)
				version := w["rules"].([]any)[0].(map[string]any)["apiVersions"].([]any)[0].(string)
				assert.Equal(t, "Exact", w["matchPolicy"], "%s: a request is admitted once, in its own version", w["name"])
				cc := w["clientConfig"].(map[string]any)
				path := ""
				if dir == "config/local" {
					path = strings.TrimPrefix(cc["url"].(string), "https://127.0.0.1:9443")
				} else {
					path = cc["service"].(map[string]any)["path"].(string)
				}
				assert.Contains(t, path, "-"+version+"-webapp", "%s calls the webhook of its version", w["name"])
			}
		})
	}
}
