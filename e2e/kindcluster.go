//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"sigs.k8s.io/e2e-framework/support"
)

// kindCluster is the kind provider when KIND_BINARY is unset: it drives
// hack/kind.sh, which has hack/cluster.sh's interface (up, down, kubeconfig,
// logs; CLUSTER_NAME, TOOLS_BIN) and creates the cluster from a node image
// assembled offline on the private engine of hack/engine.sh. With
// KIND_BINARY set, the suite uses e2e-framework's kind support and the
// public node image instead, for hosts with Docker and registry access.
type kindCluster struct {
	*localCluster
}

var _ support.E2EClusterProviderWithImageLoader = (*kindCluster)(nil)

func newKindCluster(script, toolsBin, name string) *kindCluster {
	c := newLocalCluster(script, toolsBin)
	c.name = name
	return &kindCluster{localCluster: c}
}

// Create creates the cluster as the kwok provider does (a stale one is
// deleted first), then runs `hack/image.sh load`: the operator image and the
// web server image the suite's WebApps name (registry.example.com/web:...),
// built offline and loaded, since no node can pull them.
func (c *kindCluster) Create(ctx context.Context, args ...string) (string, error) {
	kubeconfig, err := c.localCluster.Create(ctx, args...)
	if err != nil {
		return kubeconfig, err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(filepath.Dir(c.script), "image.sh"), "load")
	cmd.Env = append(os.Environ(), "CLUSTER_NAME="+c.name, "TOOLS_BIN="+c.toolsBin)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return kubeconfig, fmt.Errorf("hack/image.sh load (CLUSTER_NAME=%s): %w", c.name, err)
	}
	return kubeconfig, nil
}

// CreateWithConfig accepts only an empty config file, as the kwok provider.
func (c *kindCluster) CreateWithConfig(ctx context.Context, configFile string) (string, error) {
	if configFile != "" {
		return "", fmt.Errorf("kind provider (hack/kind.sh): config file %s is not supported", configFile)
	}
	return c.Create(ctx)
}

// GetKubectlContext returns the context kind writes into the kubeconfig.
func (c *kindCluster) GetKubectlContext() string { return "kind-" + c.name }

// LoadImage runs `hack/kind.sh load IMAGE` (kind load docker-image from the
// private engine); extra args are not supported.
func (c *kindCluster) LoadImage(ctx context.Context, image string, args ...string) error {
	if len(args) > 0 {
		return errors.New("kind provider (hack/kind.sh): extra load args are not supported")
	}
	_, err := c.run(ctx, "load", image)
	return err
}

// LoadImageArchive is not supported: images come from the private engine.
func (c *kindCluster) LoadImageArchive(context.Context, string, ...string) error {
	return errors.New("kind provider (hack/kind.sh): loading image archives is not supported; load an image from the engine")
}

// WithOpts applies opts to the kind cluster (withToolsBin among them).
func (c *kindCluster) WithOpts(opts ...support.ClusterOpts) support.E2EClusterProvider {
	for _, o := range opts {
		o(c)
	}
	return c
}
