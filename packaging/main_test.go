package packaging

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Paths of what this module tests, from the module's directory.
const (
	chartDir     = "../charts/webapp-operator"
	webappDir    = "../examples/webapp"
	defaultCfg   = webappDir + "/config/default"
	releaseName  = "webapp"
	releaseNS    = "webapp-system"
	crdName      = "webapps.apps.example.com"
	chartVersion = "0.2.0"
)

// cluster is a real etcd and kube-apiserver (envtest, from the toolchain
// `make tools` builds), shared by the tests that install the chart and the
// bundle. nil in -short mode.
var (
	cluster    *rest.Config
	kubeconfig string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse() // testing.Short needs the flags parsed
	if !testing.Short() {
		env := &envtest.Environment{}
		cfg, err := env.Start()
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting envtest (KUBEBUILDER_ASSETS from `make envtest-assets`):", err)
			return 1
		}
		defer func() { _ = env.Stop() }()
		user, err := env.AddUser(envtest.User{Name: "packaging-admin", Groups: []string{"system:masters"}}, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		b, err := user.KubeConfig()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		dir, err := os.MkdirTemp("", "packaging-kubeconfig")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer func() { _ = os.RemoveAll(dir) }()
		kubeconfig = filepath.Join(dir, "kubeconfig")
		if err := os.WriteFile(kubeconfig, b, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		cluster = user.Config()
	}
	return m.Run()
}

func needCluster(t *testing.T) {
	t.Helper()
	if cluster == nil {
		t.Skip("needs envtest (not in -short mode)")
	}
}
