package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
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
	if testing.Short() {
		t.Skip("needs kubectl from `make tools`")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	require.NotEmpty(t, assets, "KUBEBUILDER_ASSETS (the tools bin dir, with kubectl) is not set: run `make test-integration`")
	out, err := exec.Command(filepath.Join(assets, "kubectl"), "kustomize", "config/default").CombinedOutput()
	require.NoError(t, err, "kubectl kustomize config/default: %s", out)

	var manager *appsv1.Deployment
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if raw["kind"] != "Deployment" {
			continue
		}
		b, err := yaml.Marshal(raw)
		require.NoError(t, err)
		manager = &appsv1.Deployment{}
		require.NoError(t, yaml.Unmarshal(b, manager))
	}
	require.NotNil(t, manager, "config/default has the manager Deployment")

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
