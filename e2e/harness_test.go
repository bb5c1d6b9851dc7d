//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			assert.Regexp(t, `^/repo/\.artifacts/e2e/\d{8}-\d{6}$`, o.ArtifactsDir)
			assert.NotZero(t, o.SetupTimeout)
		})
	}
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
