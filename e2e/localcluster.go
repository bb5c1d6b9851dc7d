//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/support"
)

// localCluster is the kwok provider: an e2e-framework cluster provider that
// drives hack/cluster.sh, so the suite and `make cluster-up` share one
// definition of the local cluster (pinned binaries, loopback only, isolated
// kwokctl work dir, one simulated node, readiness waits, leftover cleanup).
// Unlike `make cluster-up`, it runs metrics-server (KWOK_METRICS_SERVER=1)
// unless KWOK_METRICS_SERVER is set otherwise.
//
// e2e-framework's own support/kwok is not used: it `go install`s an old
// kwokctl when the given one is missing, lets kwokctl write ~/.kube/config,
// and creates no node.
type localCluster struct {
	script     string // hack/cluster.sh
	toolsBin   string
	name       string
	kubeconfig string
	rc         *rest.Config
	// auditPolicy, when set, is the API server's audit policy
	// (CLUSTER_AUDIT_POLICY); Create sets auditLog to the log's path.
	auditPolicy string
	auditLog    string
}

var _ support.E2EClusterProvider = (*localCluster)(nil)

func newLocalCluster(script, toolsBin string) *localCluster {
	return &localCluster{script: script, toolsBin: toolsBin, name: DefaultClusterName}
}

// withToolsBin sets the bin dir once it is known.
func withToolsBin(bin string) support.ClusterOpts {
	return func(p support.E2EClusterProvider) {
		switch c := p.(type) {
		case *localCluster:
			c.toolsBin = bin
		case *kindCluster:
			c.toolsBin = bin
		}
	}
}

// run runs `hack/cluster.sh args...`, streaming its progress to stderr, and
// returns its stdout.
func (c *localCluster) run(ctx context.Context, args ...string) (string, error) {
	if c.toolsBin == "" {
		return "", errors.New("hack/cluster.sh: the tools bin dir is unknown")
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.script}, args...)...)
	cmd.Env = append(os.Environ(), "CLUSTER_NAME="+c.name, "TOOLS_BIN="+c.toolsBin)
	if os.Getenv("KWOK_METRICS_SERVER") == "" {
		// The suite's cluster runs metrics-server (the autoscaling
		// assessment needs it; about 2s more to start and some 70 MB);
		// KWOK_METRICS_SERVER=0 turns it off.
		cmd.Env = append(cmd.Env, "KWOK_METRICS_SERVER=1")
	}
	if os.Getenv("CLUSTER_FEATURE_GATES") == "" {
		// The sharding scenarios (chaos_sharding_test.go) run against an
		// API server that filters lists and watches by shard.
		cmd.Env = append(cmd.Env, "CLUSTER_FEATURE_GATES=ShardedListAndWatch=true")
	}
	if c.auditPolicy != "" {
		cmd.Env = append(cmd.Env, "CLUSTER_AUDIT_POLICY="+c.auditPolicy)
	}
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("hack/cluster.sh %v (CLUSTER_NAME=%s): %w", args, c.name, err)
	}
	return stdout.String(), nil
}

// Create deletes a stale cluster of the same name left by a killed run, then
// starts a fresh one and returns its kubeconfig path. args are not supported.
func (c *localCluster) Create(ctx context.Context, args ...string) (string, error) {
	if len(args) > 0 {
		return "", fmt.Errorf("kwok provider: extra create args %v are not supported; configure hack/cluster.sh", args)
	}
	if _, err := c.run(ctx, "down"); err != nil {
		return "", err
	}
	out, err := c.run(ctx, "up")
	if err != nil {
		return "", err
	}
	kubeconfig, err := lastLine(out)
	if err != nil {
		return "", fmt.Errorf("hack/cluster.sh up printed no kubeconfig path: %w", err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	c.kubeconfig, c.rc = kubeconfig, rc
	if c.auditPolicy != "" {
		out, err := c.run(ctx, "audit-log")
		if err != nil {
			return "", err
		}
		if c.auditLog, err = lastLine(out); err != nil {
			return "", fmt.Errorf("hack/cluster.sh audit-log printed no path: %w", err)
		}
	}
	return kubeconfig, nil
}

// CreateWithConfig accepts only an empty config file: the cluster is
// configured by hack/cluster.sh.
func (c *localCluster) CreateWithConfig(ctx context.Context, configFile string) (string, error) {
	if configFile != "" {
		return "", fmt.Errorf("kwok provider: config file %s is not supported; configure hack/cluster.sh", configFile)
	}
	return c.Create(ctx)
}

// Destroy deletes the cluster and any process it left.
func (c *localCluster) Destroy(ctx context.Context) error {
	_, err := c.run(ctx, "down")
	return err
}

// ExportLogs writes the component logs to dest/<cluster name>.
func (c *localCluster) ExportLogs(ctx context.Context, dest string) error {
	_, err := c.run(ctx, "logs", dest)
	return err
}

// GetKubeconfig returns the kubeconfig path written by Create.
func (c *localCluster) GetKubeconfig() string { return c.kubeconfig }

// GenerateKubeconfig returns the same file as GetKubeconfig; args are not
// supported.
func (c *localCluster) GenerateKubeconfig(args ...string) (string, error) {
	if len(args) > 0 {
		return "", fmt.Errorf("kwok provider: kubeconfig args %v are not supported", args)
	}
	out, err := c.run(context.Background(), "kubeconfig")
	if err != nil {
		return "", err
	}
	return lastLine(out)
}

// GetKubectlContext returns the context kwokctl writes into the kubeconfig.
func (c *localCluster) GetKubectlContext() string { return "kwok-" + c.name }

// KubernetesRestConfig returns the config for the kubeconfig from Create.
func (c *localCluster) KubernetesRestConfig() *rest.Config { return c.rc }

// SetDefaults implements support.E2EClusterProvider; there is nothing to default.
func (c *localCluster) SetDefaults() support.E2EClusterProvider { return c }

// WaitForControlPlane returns at once: `hack/cluster.sh up` already waited
// for the node to be Ready and the default ServiceAccount to exist.
func (c *localCluster) WaitForControlPlane(context.Context, klient.Client) error { return nil }

// WithName sets the cluster name (CLUSTER_NAME for hack/cluster.sh).
func (c *localCluster) WithName(name string) support.E2EClusterProvider {
	c.name = name
	return c
}

// WithOpts applies opts.
func (c *localCluster) WithOpts(opts ...support.ClusterOpts) support.E2EClusterProvider {
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithPath replaces hack/cluster.sh with another script of the same interface.
func (c *localCluster) WithPath(path string) support.E2EClusterProvider {
	c.script = path
	return c
}

// WithVersion is ignored: the Kubernetes version is pinned by hack/tools.sh.
func (c *localCluster) WithVersion(string) support.E2EClusterProvider { return c }
