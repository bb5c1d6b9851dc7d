// Package testenv starts the envtest control plane (a real etcd and
// kube-apiserver built by `make tools`) for the library's integration tests,
// with the test-only Widget CRD installed.
//
// Integration tests call [Main] from TestMain and [Require] at their start.
// Under `go test -short` no control plane is started and integration tests
// skip, so `make test-unit` needs no binaries. Without -short a missing
// KUBEBUILDER_ASSETS is a failure, never a silent skip.
package testenv

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// Env is a running control plane and a client for it.
type Env struct {
	// Config reaches the apiserver as cluster-admin.
	Config *rest.Config
	// Client is an uncached client with Scheme.
	Client client.Client
	// Scheme knows the built-in types and Widget.
	Scheme *k8sruntime.Scheme
	// Environment is the underlying envtest environment.
	Environment *envtest.Environment
}

// Options customise [Start].
type Options struct {
	// CRDDirectoryPaths are added to the Widget CRD.
	CRDDirectoryPaths []string
	// WebhookInstallOptions are passed to envtest unchanged.
	WebhookInstallOptions envtest.WebhookInstallOptions
	// AddToScheme registers further types with the Env's scheme.
	AddToScheme []func(*k8sruntime.Scheme) error
	// FeatureGates are passed to kube-apiserver's --feature-gates, as
	// "Name=true".
	FeatureGates []string
}

// CRDDir is the directory holding the Widget CRD.
func CRDDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testapi", "crd")
}

// NewScheme returns a scheme with the client-go types and Widget.
func NewScheme(extra ...func(*k8sruntime.Scheme) error) (*k8sruntime.Scheme, error) {
	s := k8sruntime.NewScheme()
	for _, add := range append([]func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, testv1.AddToScheme}, extra...) {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Start starts etcd and kube-apiserver from KUBEBUILDER_ASSETS.
func Start(opts Options) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run `make test-integration`, or export KUBEBUILDER_ASSETS=$(make -s envtest-assets | tail -n1)")
	}
	s, err := NewScheme(opts.AddToScheme...)
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		CRDDirectoryPaths:     append([]string{CRDDir()}, opts.CRDDirectoryPaths...),
		ErrorIfCRDPathMissing: true,
		WebhookInstallOptions: opts.WebhookInstallOptions,
		Scheme:                s,
		// Generous: on a loaded two-core machine kube-apiserver can take
		// a minute to come up.
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	if len(opts.FeatureGates) > 0 {
		te.ControlPlane.GetAPIServer().Configure().Append("feature-gates", strings.Join(opts.FeatureGates, ","))
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		_ = te.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: s, Environment: te}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.Environment.Stop() }

// Isolated starts a control plane for t alone, stopped when t ends. It is
// for a test whose operators watch the whole cluster: on the package's
// shared control plane they would also see what the package's other tests,
// or an earlier run under -count, left behind (envtest runs no namespace
// controller, so nothing a test created ever goes away). It calls
// [Require] first.
func Isolated(t testing.TB, opts Options) *Env {
	t.Helper()
	Require(t)
	e, err := Start(opts)
	if err != nil {
		t.Fatalf("starting a control plane of the test's own: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping the test's control plane: %v", err)
		}
	})
	return e
}

// Namespace creates a namespace with a generated name for one test. envtest
// runs no namespace controller, so the namespace is not deleted afterwards:
// tests isolate by namespace, not by cleanup.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

var started bool

// Main runs the package's tests with a control plane in *env, started
// unless -short is given, and returns the exit code for os.Exit.
func Main(m *testing.M, env **Env, opts Options) int {
	flag.Parse()
	// Reconciler errors are expected in tests and asserted on; logging
	// their stack traces would bury the test output.
	logf.SetLogger(logr.Discard())
	if testing.Short() {
		return m.Run()
	}
	e, err := Start(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	started = true
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	return code
}

// Require skips an integration test under -short and fails it when no
// control plane was started.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs envtest (make test-integration)")
	}
	if !started {
		t.Fatal("no control plane: call testenv.Main from TestMain")
	}
}
