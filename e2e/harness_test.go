//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/reconcilekit/reconcilekit/internal/prereq"
)

func TestOptionsComplete(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600))

	tests := []struct {
		name    string
		in      Options
		want    Provider
		wantErr string
	}{
		{name: "kwok is the default", in: Options{}, want: ProviderKwok},
		{name: "kind", in: Options{Provider: ProviderKind}, want: ProviderKind},
		{name: "existing with kubeconfig", in: Options{Provider: ProviderExisting, Kubeconfig: kubeconfig}, want: ProviderExisting},
		{name: "existing without kubeconfig", in: Options{Provider: ProviderExisting}, wantErr: "E2E_KUBECONFIG"},
		{name: "existing with a missing kubeconfig", in: Options{Provider: ProviderExisting, Kubeconfig: kubeconfig + ".missing"}, wantErr: "E2E_KUBECONFIG"},
		{name: "unknown provider", in: Options{Provider: "minikube"}, wantErr: `E2E_PROVIDER="minikube"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.in
			o.RepoRoot = "/repo"
			err := o.complete()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, o.Provider)
			assert.Equal(t, DefaultClusterName, o.ClusterName)
			assert.Regexp(t, `^/repo/\.artifacts/e2e/\d{8}-\d{6}-`+DefaultClusterName+`$`, o.ArtifactsDir)
			assert.NotZero(t, o.SetupTimeout)
		})
	}
}

// TestAuditPolicyFromEnv: the kwok cluster keeps an audit log for the
// chaos suite's long form or when E2E_AUDIT asks, and only then.
func TestAuditPolicyFromEnv(t *testing.T) {
	policy := filepath.Join("/repo", "e2e", "testdata", "chaos-audit-policy.yaml")
	for _, tt := range []struct {
		chaos, audit, want, wantErr string
	}{
		{want: ""},
		{chaos: "long", want: policy},
		{chaos: "long", audit: "0", want: ""},
		{audit: "1", want: policy},
		{audit: "yes", wantErr: `E2E_AUDIT="yes"`},
	} {
		t.Run(tt.chaos+"/"+tt.audit, func(t *testing.T) {
			t.Setenv("E2E_CHAOS", tt.chaos)
			t.Setenv("E2E_AUDIT", tt.audit)
			got, err := auditPolicyFromEnv("/repo")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := os.Stat(filepath.Join("..", chaosAuditPolicy))
	assert.NoError(t, err, "the policy is where auditPolicyFromEnv points")
}

func TestRequireLoopback(t *testing.T) {
	tests := []struct {
		server string
		ok     bool
	}{
		{"https://127.0.0.1:6443", true},
		{"https://[::1]:6443", true},
		{"https://localhost:6443", true},
		{"https://10.96.0.1:443", false},
		{"https://example.com", false},
	}
	for _, tt := range tests {
		t.Run(tt.server, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubeconfig")
			kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + tt.server +
				"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user: {}\ncurrent-context: c\n"
			require.NoError(t, os.WriteFile(path, []byte(kubeconfig), 0o600))
			err := requireLoopback(path)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, "not on loopback")
			}
		})
	}
}

func TestSplitImage(t *testing.T) {
	tests := []struct{ image, name, tag, digest string }{
		{"reconcilekit/webapp-operator:e2e", "reconcilekit/webapp-operator", "e2e", ""},
		{"localhost:5000/webapp-operator:v1", "localhost:5000/webapp-operator", "v1", ""},
		{"localhost:5000/webapp-operator", "localhost:5000/webapp-operator", "latest", ""},
		{"webapp-operator@sha256:0123", "webapp-operator", "", "sha256:0123"},
	}
	for _, tt := range tests {
		name, tag, digest := splitImage(tt.image)
		assert.Equal(t, []string{tt.name, tt.tag, tt.digest}, []string{name, tag, digest}, tt.image)
	}
}

// TestImageOverlay renders the deployment-mode kustomization (the kind
// path) without a cluster: config/default with the image under test.
func TestImageOverlay(t *testing.T) {
	bin := os.Getenv("TOOLS_BIN")
	if bin == "" {
		prereq.Missing(t, "needs the pinned kubectl: set TOOLS_BIN (make test-e2e sets it from hack/tools.sh)")
	}
	root, err := findRepoRoot()
	require.NoError(t, err)
	o := &webappOperator{h: &Harness{opts: Options{RepoRoot: root}}, image: "localhost:5000/webapp-operator:e2e"}
	dir := t.TempDir()
	require.NoError(t, o.writeImageOverlay(dir))
	out, err := exec.Command(filepath.Join(bin, "kubectl"), "kustomize", dir).CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "image: localhost:5000/webapp-operator:e2e")
	assert.NotContains(t, string(out), deployedImage)
	assert.Contains(t, string(out), "name: webapp-controller-manager")
}

// The ports of processes the suite restarts are outside the kernel's
// ephemeral range, so no outgoing connection can take one while its process
// is stopped (with :0 the kernel picked from that range).
func TestFreePortIsOutsideTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	require.NoError(t, err)
	var low, high int
	_, err = fmt.Sscan(string(b), &low, &high)
	require.NoError(t, err)
	for range 50 {
		port, err := freePort()
		require.NoError(t, err)
		assert.False(t, port >= low && port <= high, "port %d is in the ephemeral range [%d, %d]", port, low, high)
		assert.Less(t, port, 32000, "port %d is in the range kwokctl takes its ports from (downwards from 32767)", port)
	}
}

func TestOptionsFromEnvKeepArtifacts(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    bool
		wantErr string
	}{
		{value: "", want: false},
		{value: "1", want: true},
		{value: "0", want: false},
		{value: "yes please", wantErr: `E2E_KEEP_ARTIFACTS="yes please"`},
	} {
		t.Run(tt.value, func(t *testing.T) {
			t.Setenv("E2E_PROVIDER", "")
			t.Setenv("E2E_KEEP_ARTIFACTS", tt.value)
			o, err := OptionsFromEnv()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, o.KeepArtifacts)
		})
	}
}
