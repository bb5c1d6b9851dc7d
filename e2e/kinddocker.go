//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/e2e-framework/support/kind"
)

// webImages are the names the suite's WebApps and e2e/kind_test.go's Jobs
// run the web server under (hack/web); no node can pull them, so
// every one is built and loaded. hack/image.sh's WEB_IMG and WEB_ALIASES
// default to the same list.
var webImages = []string{
	kindWebImage, "registry.example.com/web:v2.1.0", kindWebAppImage,
	"registry.example.com/web:v2.2.0", "registry.example.com/shop:v1.0.0",
}

// dockerKind is the kind provider when KIND_BINARY is set: a laptop's
// Docker and kind. e2e-framework's kind support creates the cluster (the
// public node image, unless KIND_NODE_IMAGE names another; KIND_CONFIG, a
// kind cluster configuration), then the web image is built by `docker
// build` from hack/web/Dockerfile and `kind load`ed under every
// name in webImages. The operator image comes from
// examples/webapp/Dockerfile (webappOperator.setupDeployment).
type dockerKind struct {
	*kind.Cluster
	opts Options
}

var _ support.E2EClusterProviderWithImageLoader = (*dockerKind)(nil)

func newDockerKind(path string, opts Options) *dockerKind {
	c := kind.NewProvider().WithPath(path).WithName(opts.ClusterName)
	if opts.KindNodeImage != "" {
		c = c.WithOpts(kind.WithImage(opts.KindNodeImage))
	}
	return &dockerKind{Cluster: c.SetDefaults().(*kind.Cluster), opts: opts}
}

// Create creates the cluster (with KIND_CONFIG when set), then builds and
// loads the web images.
func (c *dockerKind) Create(ctx context.Context, args ...string) (string, error) {
	var kubeconfig string
	var err error
	if c.opts.KindConfig != "" {
		kubeconfig, err = c.CreateWithConfig(ctx, c.opts.KindConfig)
	} else {
		kubeconfig, err = c.Cluster.Create(ctx, args...)
	}
	if err != nil {
		return kubeconfig, err
	}
	web := filepath.Join(c.opts.RepoRoot, "hack", "web")
	if err := dockerBuild(ctx, c.opts, web, filepath.Join(web, "Dockerfile"), webImages...); err != nil {
		return kubeconfig, err
	}
	for _, image := range webImages {
		if err := c.LoadImage(ctx, image); err != nil {
			return kubeconfig, fmt.Errorf("loading %s into the cluster: %w", image, err)
		}
	}
	return kubeconfig, nil
}

// dockerBuild runs `docker build` of dockerfile in dir with every tag, plus
// DOCKER_BUILD_FLAGS.
func dockerBuild(ctx context.Context, opts Options, dir, dockerfile string, tags ...string) error {
	args := []string{"build", "-f", dockerfile}
	for _, t := range tags {
		args = append(args, "-t", t)
	}
	args = append(args, strings.Fields(opts.DockerBuildFlags)...)
	cmd := exec.CommandContext(ctx, "docker", append(args, ".")...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("docker %s (in %s): %w", strings.Join(append(args, "."), " "), dir, err)
	}
	return nil
}
