//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/klient/conf"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/e2e-framework/support"
)

// Provider names where the suite's cluster comes from (env E2E_PROVIDER).
type Provider string

const (
	// ProviderKwok starts a local cluster with hack/cluster.sh from the
	// project's own binaries. It is the default.
	ProviderKwok Provider = "kwok"
	// ProviderKind creates a kind cluster; it needs a container engine.
	ProviderKind Provider = "kind"
	// ProviderExisting uses the cluster E2E_KUBECONFIG points at and leaves
	// it running afterwards.
	ProviderExisting Provider = "existing"
)

// DefaultClusterName names the cluster the kwok and kind providers create.
// It differs from hack/cluster.sh's default so that a development cluster
// started with `hack/cluster.sh up` is never reused or deleted by the suite.
const DefaultClusterName = "reconcilekit-e2e"

// Options configure a [Harness]. [OptionsFromEnv] fills them from the
// environment, which is how `make test-e2e` and CI set them.
type Options struct {
	// Provider picks the cluster (E2E_PROVIDER, default kwok).
	Provider Provider
	// RepoRoot is the checkout holding hack/cluster.sh and hack/tools.sh.
	RepoRoot string
	// ToolsBin holds the pinned binaries (TOOLS_BIN). When empty, the kwok
	// provider runs hack/tools.sh for it; the other providers then take
	// kubectl from PATH.
	ToolsBin string
	// ClusterName names the kwok or kind cluster (E2E_CLUSTER_NAME,
	// default [DefaultClusterName]).
	ClusterName string
	// Kubeconfig is the existing cluster's kubeconfig (E2E_KUBECONFIG);
	// required by, and only used by, [ProviderExisting].
	Kubeconfig string
	// KindBinary is the kind executable (KIND_BINARY). When empty, the kind
	// provider runs hack/kind.sh (offline node image, private engine);
	// when set, Docker and kind from the host's PATH and DOCKER_HOST do
	// (dockerKind).
	KindBinary string
	// KindNodeImage is the node image KIND_BINARY creates the cluster
	// with (KIND_NODE_IMAGE; default: kind's own).
	KindNodeImage string
	// KindConfig is a kind cluster configuration file KIND_BINARY creates
	// the cluster with (KIND_CONFIG).
	KindConfig string
	// DockerBuildFlags are extra flags of the suite's `docker build`s
	// (DOCKER_BUILD_FLAGS, split on spaces), such as "--network host" on a
	// daemon without a default bridge.
	DockerBuildFlags string
	// ArtifactsDir receives logs and dumps after a failure (E2E_ARTIFACTS,
	// default <repo>/.artifacts/e2e/<UTC time>-<cluster name>: make test
	// starts the kwok and kind suites at once).
	ArtifactsDir string
	// SetupTimeout bounds creating the cluster (default 10 minutes).
	SetupTimeout time.Duration
	// KeepArtifacts exports the artifacts after a passing run too
	// (E2E_KEEP_ARTIFACTS=1), to read the component and operator logs of a
	// run that passed, such as a chaos measurement.
	KeepArtifacts bool
	// AuditPolicy is the audit policy file the kwok cluster's API server
	// logs by (hack/cluster.sh CLUSTER_AUDIT_POLICY), empty for none; see
	// [auditPolicyFromEnv]. The chaos suite's sharding scenarios judge
	// the replicas from that log (chaos_audit.go).
	AuditPolicy string
}

// OptionsFromEnv reads [Options] from the E2E_* variables, TOOLS_BIN and
// KIND_BINARY, and finds the repository root by walking up from the working
// directory to the library's go.mod.
//
// Guarantees: an unknown E2E_PROVIDER, or the existing provider without a
// readable E2E_KUBECONFIG, is an error naming the variable; nothing is
// started or installed.
func OptionsFromEnv() (Options, error) {
	root, err := findRepoRoot()
	if err != nil {
		return Options{}, err
	}
	o := Options{
		Provider:     Provider(os.Getenv("E2E_PROVIDER")),
		RepoRoot:     root,
		ToolsBin:     os.Getenv("TOOLS_BIN"),
		ClusterName:  os.Getenv("E2E_CLUSTER_NAME"),
		Kubeconfig:   os.Getenv("E2E_KUBECONFIG"),
		KindBinary:   os.Getenv("KIND_BINARY"),
		ArtifactsDir: os.Getenv("E2E_ARTIFACTS"),

		KindNodeImage:    os.Getenv("KIND_NODE_IMAGE"),
		KindConfig:       os.Getenv("KIND_CONFIG"),
		DockerBuildFlags: os.Getenv("DOCKER_BUILD_FLAGS"),
	}
	if o.AuditPolicy, err = auditPolicyFromEnv(root); err != nil {
		return Options{}, err
	}
	if v := os.Getenv("E2E_KEEP_ARTIFACTS"); v != "" {
		keep, err := strconv.ParseBool(v)
		if err != nil {
			return Options{}, fmt.Errorf("E2E_KEEP_ARTIFACTS=%q: want 1 or 0: %w", v, err)
		}
		o.KeepArtifacts = keep
	}
	if err := o.complete(); err != nil {
		return Options{}, err
	}
	return o, nil
}

// chaosAuditPolicy is the chaos suite's audit policy, under the repository
// root.
const chaosAuditPolicy = "e2e/testdata/chaos-audit-policy.yaml"

// auditPolicyFromEnv picks the kwok cluster's audit policy: E2E_AUDIT=1
// the chaos suite's, E2E_AUDIT=0 none; unset, the chaos suite's for its
// long form (E2E_CHAOS=long, `make chaos`) and none otherwise, so that
// `make test-e2e` (the short form among everything else) pays nothing for
// a log only the sharding scenarios read; they say when they could not.
func auditPolicyFromEnv(root string) (string, error) {
	on := chaosLong()
	if v := os.Getenv("E2E_AUDIT"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return "", fmt.Errorf("E2E_AUDIT=%q: want 1 or 0: %w", v, err)
		}
		on = b
	}
	if !on {
		return "", nil
	}
	return filepath.Join(root, filepath.FromSlash(chaosAuditPolicy)), nil
}

// complete fills defaults and validates o.
func (o *Options) complete() error {
	if o.Provider == "" {
		o.Provider = ProviderKwok
	}
	if o.ClusterName == "" {
		o.ClusterName = DefaultClusterName
	}
	if o.ArtifactsDir == "" {
		o.ArtifactsDir = filepath.Join(o.RepoRoot, ".artifacts", "e2e", time.Now().UTC().Format("20060102-150405")+"-"+o.ClusterName)
	}
	if o.SetupTimeout == 0 {
		o.SetupTimeout = 10 * time.Minute
	}
	switch o.Provider {
	case ProviderKwok, ProviderKind:
	case ProviderExisting:
		if o.Kubeconfig == "" {
			return errors.New("E2E_PROVIDER=existing needs E2E_KUBECONFIG")
		}
		if _, err := os.Stat(o.Kubeconfig); err != nil {
			return fmt.Errorf("E2E_KUBECONFIG: %w", err)
		}
	default:
		return fmt.Errorf("E2E_PROVIDER=%q: want %q, %q or %q", o.Provider, ProviderKwok, ProviderKind, ProviderExisting)
	}
	return nil
}

// Harness owns the suite's cluster for one run of the test binary: it
// creates it, points the e2e-framework environment at it, gives every feature
// a namespace, exports artifacts after failures and deletes the cluster.
//
// Guarantees: the cluster is deleted after the tests, after a failed setup
// (also a partially created cluster) and on SIGINT/SIGTERM; artifact export
// never prevents the deletion.
//
// Caveats: a process killed outright (go test -timeout panics, SIGKILL)
// leaves the cluster behind; the kwok provider deletes a stale cluster of
// the same name before creating its own.
type Harness struct {
	opts    Options
	cluster support.E2EClusterProvider // nil for ProviderExisting

	mu         sync.Mutex
	kubeconfig string
	kubectl    string

	stages     []Stage
	stagesDown sync.Once

	failed   atomic.Bool
	teardown sync.Once
}

// NewHarness returns a harness for opts; it starts nothing.
func NewHarness(opts Options) (*Harness, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	h := &Harness{opts: opts}
	switch opts.Provider {
	case ProviderKwok:
		lc := newLocalCluster(filepath.Join(opts.RepoRoot, "hack", "cluster.sh"), opts.ToolsBin)
		lc.auditPolicy = opts.AuditPolicy
		h.cluster = lc.WithName(opts.ClusterName)
	case ProviderKind:
		if opts.KindBinary == "" {
			// hack/kind.sh: the node image built offline, on the private
			// engine (hack/engine.sh); nothing is pulled.
			h.cluster = newKindCluster(filepath.Join(opts.RepoRoot, "hack", "kind.sh"), opts.ToolsBin, opts.ClusterName)
			break
		}
		path := opts.KindBinary
		// Resolve it now: e2e-framework's kind support would otherwise
		// `go install` a kind version of its own choosing.
		resolved, err := exec.LookPath(path)
		if err != nil {
			return nil, fmt.Errorf("E2E_PROVIDER=kind: kind binary %q (KIND_BINARY or PATH): %w", path, err)
		}
		h.cluster = newDockerKind(resolved, opts)
	}
	return h, nil
}

// Stage is a part of the system under test that lives as long as the
// cluster, such as an operator the features exercise: set up after the
// cluster is created, torn down before it is deleted.
type Stage struct {
	// Name identifies the stage in errors.
	Name string
	// Setup runs after the cluster is up, stages in the order given to
	// [Harness.Run]. An error fails the suite's setup: no test runs,
	// artifacts are exported and everything is torn down.
	Setup env.Func
	// Teardown runs exactly once, before the cluster is deleted: after the
	// tests, after a failed setup and on SIGINT/SIGTERM, stages in reverse
	// order. It must cope with a Setup that never ran or stopped halfway.
	// failed says whether a test or the setup failed (or
	// [Options.KeepArtifacts] asks for the artifacts anyway), so the stage
	// can keep its own logs under [Harness.ArtifactsDir]. It reports its own
	// errors: nothing may keep the cluster from being deleted.
	Teardown func(ctx context.Context, failed bool)
}

// Run wires the harness and stages into e (setup, per-feature namespaces,
// failure tracking, artifact export, teardown) and runs the tests; TestMain
// passes its result to os.Exit.
func (h *Harness) Run(m *testing.M, e env.Environment, stages ...Stage) int {
	h.stages = stages
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	go func() {
		sig := <-signals
		fmt.Fprintf(os.Stderr, "e2e: %v: tearing down and deleting the cluster before exiting\n", sig)
		h.teardownStages(context.Background())
		_ = h.destroy(context.Background()) // destroy reports its own error
		os.Exit(130)
	}()

	e.Setup(h.setup)
	for _, s := range stages {
		e.Setup(h.stageSetup(s))
	}
	e.BeforeEachFeature(h.createNamespace).
		AfterEachFeature(h.deleteNamespace).
		AfterEachTest(h.recordResult).
		Finish(h.finish)
	return e.Run(m)
}

// stageSetup runs s.Setup and records its failure for the artifact export.
func (h *Harness) stageSetup(s Stage) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		if s.Setup == nil {
			return ctx, nil
		}
		ctx, err := s.Setup(ctx, cfg)
		if err != nil {
			h.failed.Store(true)
			return ctx, fmt.Errorf("e2e setup of %s: %w", s.Name, err)
		}
		return ctx, nil
	}
}

// teardownStages tears the stages down once, in reverse order, whoever
// asks first (finish or a signal).
func (h *Harness) teardownStages(ctx context.Context) {
	h.stagesDown.Do(func() {
		for i := len(h.stages) - 1; i >= 0; i-- {
			if td := h.stages[i].Teardown; td != nil {
				td(ctx, h.exportWanted())
			}
		}
	})
}

// Kubeconfig returns the path of the suite cluster's kubeconfig; it is empty
// before setup.
func (h *Harness) Kubeconfig() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.kubeconfig
}

// AuditLog returns the path of the API server's audit log, or "" when the
// cluster keeps none (no [Options.AuditPolicy], or a provider other than
// kwok).
func (h *Harness) AuditLog() string {
	if lc, ok := h.cluster.(*localCluster); ok {
		return lc.auditLog
	}
	return ""
}

// ArtifactsDir returns where logs and dumps go after a failure.
func (h *Harness) ArtifactsDir() string { return h.opts.ArtifactsDir }

// Kubectl runs the pinned kubectl (TOOLS_BIN/kubectl, else kubectl on PATH)
// with the suite cluster's kubeconfig and returns its stdout.
//
// Guarantees: never reads ~/.kube/config or the caller's $KUBECONFIG, and
// keeps its cache under <repo>/.cluster, not ~/.kube; a non-zero exit is
// an error carrying the arguments and stderr. Without a deadline on ctx the
// command is bounded to two minutes.
func (h *Harness) Kubectl(ctx context.Context, args ...string) (string, error) {
	h.mu.Lock()
	kubectl, kubeconfig := h.kubectl, h.kubeconfig
	h.mu.Unlock()
	if kubeconfig == "" {
		return "", errors.New("kubectl: the suite cluster is not set up")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	// --cache-dir keeps kubectl's discovery cache out of ~/.kube too.
	global := []string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(h.opts.RepoRoot, ".cluster", "kubectl-cache")}
	cmd := exec.CommandContext(ctx, kubectl, append(global, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// MustKubectl is [Harness.Kubectl] for test steps: an error fails t.
func (h *Harness) MustKubectl(ctx context.Context, t testing.TB, args ...string) string {
	t.Helper()
	out, err := h.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

type namespaceKey struct{}

// namespaceLabel marks the namespaces the harness creates, so leftovers on
// an existing cluster can be found with a label selector.
const namespaceLabel = "e2e.reconcilekit.io/suite"

// Namespace returns the namespace the harness created for the running
// feature; it fails t when called outside a feature.
func Namespace(ctx context.Context, t testing.TB) string {
	t.Helper()
	ns, ok := ctx.Value(namespaceKey{}).(string)
	if !ok {
		t.Fatal("e2e.Namespace: no feature namespace in the context; call it from a feature step")
	}
	return ns
}

// setup creates (or, for existing, adopts) the cluster and points cfg at it.
func (h *Harness) setup(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	ctx, err := h.doSetup(ctx, cfg)
	if err != nil {
		h.failed.Store(true)
		return ctx, fmt.Errorf("e2e setup (provider %s): %w", h.opts.Provider, err)
	}
	return ctx, nil
}

func (h *Harness) doSetup(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	setupCtx, cancel := context.WithTimeout(ctx, h.opts.SetupTimeout)
	defer cancel()

	if _, script := h.cluster.(*kindCluster); (h.opts.Provider == ProviderKwok || script) && h.opts.ToolsBin == "" {
		bin, err := runToolsScript(setupCtx, h.opts.RepoRoot)
		if err != nil {
			return ctx, err
		}
		h.opts.ToolsBin = bin
		h.cluster.WithOpts(withToolsBin(bin))
	}
	kubectl, err := h.kubectlPath()
	if err != nil {
		return ctx, err
	}

	kubeconfig := h.opts.Kubeconfig
	if h.cluster != nil {
		if kubeconfig, err = h.cluster.Create(setupCtx); err != nil {
			return ctx, err
		}
		// Both providers publish the apiserver on loopback only; anything
		// else means the kubeconfig is not the one just created.
		if err := requireLoopback(kubeconfig); err != nil {
			return ctx, err
		}
	}
	h.mu.Lock()
	h.kubeconfig, h.kubectl = kubeconfig, kubectl
	h.mu.Unlock()

	restConfig, err := conf.New(kubeconfig)
	if err != nil {
		return ctx, fmt.Errorf("client for %s: %w", kubeconfig, err)
	}
	// The suite's client is shared by every feature, its waits and its
	// workloads: client-go's default 5 QPS made waits fail on the client's
	// own rate limiter ("would exceed context deadline") rather than
	// report what the cluster was doing.
	restConfig.QPS, restConfig.Burst = clientQPS, clientBurst
	client, err := klient.New(restConfig)
	if err != nil {
		return ctx, fmt.Errorf("client for %s: %w", kubeconfig, err)
	}
	cfg.WithKubeconfigFile(kubeconfig).WithClient(client)
	if h.cluster != nil {
		if err := h.cluster.WaitForControlPlane(setupCtx, client); err != nil {
			return ctx, fmt.Errorf("waiting for the control plane: %w", err)
		}
	}
	var ns corev1.Namespace
	if err := client.Resources().Get(setupCtx, "default", "", &ns); err != nil {
		return ctx, fmt.Errorf("reading namespace default through %s: %w", kubeconfig, err)
	}
	return ctx, nil
}

// The suite's client rate limits (client-go's defaults are 5 and 10).
const (
	clientQPS   = 100
	clientBurst = 200
)

// kubectlPath prefers the pinned kubectl over one on PATH.
func (h *Harness) kubectlPath() (string, error) {
	if h.opts.ToolsBin != "" {
		path := filepath.Join(h.opts.ToolsBin, "kubectl")
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("TOOLS_BIN: %w", err)
		}
		return path, nil
	}
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("kubectl: set TOOLS_BIN or put kubectl on PATH: %w", err)
	}
	return path, nil
}

// createNamespace gives each feature a fresh namespace.
func (h *Harness) createNamespace(ctx context.Context, cfg *envconf.Config, _ *testing.T, f features.Feature) (context.Context, error) {
	name := envconf.RandomName("e2e", 16)
	ctx, err := envfuncs.CreateNamespace(name,
		envfuncs.WithLabels(map[string]string{namespaceLabel: "true"}),
		envfuncs.WithAnnotations(map[string]string{namespaceLabel + "-feature": f.Name()}),
	)(ctx, cfg)
	if err != nil {
		return ctx, fmt.Errorf("namespace for feature %q: %w", f.Name(), err)
	}
	return context.WithValue(ctx, namespaceKey{}, name), nil
}

// deleteNamespace dumps a failed feature's namespace, then deletes it
// without waiting (the namespace controller finishes the job).
func (h *Harness) deleteNamespace(ctx context.Context, cfg *envconf.Config, t *testing.T, f features.Feature) (context.Context, error) {
	name, ok := ctx.Value(namespaceKey{}).(string)
	if !ok {
		return ctx, nil
	}
	if t.Failed() {
		h.failed.Store(true)
		file := filepath.Join(h.opts.ArtifactsDir, "namespaces", name+".yaml")
		if err := h.dumpResources(ctx, file, name); err != nil {
			t.Logf("dumping namespace %s of failed feature %q: %v", name, f.Name(), err)
		} else {
			t.Logf("namespace %s of failed feature %q dumped to %s", name, f.Name(), file)
		}
	}
	return envfuncs.DeleteNamespace(name)(ctx, cfg)
}

// recordResult remembers a failed test for the artifact export.
func (h *Harness) recordResult(ctx context.Context, _ *envconf.Config, t *testing.T) (context.Context, error) {
	if t.Failed() {
		h.failed.Store(true)
	}
	return ctx, nil
}

// exportWanted says whether the artifacts are exported: after a failure,
// or always with [Options.KeepArtifacts].
func (h *Harness) exportWanted() bool { return h.failed.Load() || h.opts.KeepArtifacts }

// finish tears the stages down, exports artifacts if anything failed (or
// KeepArtifacts asks for them), then deletes the cluster.
func (h *Harness) finish(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	h.teardownStages(ctx)
	if h.exportWanted() {
		h.exportArtifacts(ctx)
	}
	return ctx, h.destroy(ctx)
}

// exportArtifacts writes a cluster dump and the provider's logs; failures
// are reported, not returned, so that teardown always follows.
func (h *Harness) exportArtifacts(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	dir := h.opts.ArtifactsDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: artifacts: %v\n", err)
		return
	}
	if h.Kubeconfig() != "" {
		if _, err := h.Kubectl(ctx, "cluster-info", "dump", "--all-namespaces", "--output-directory", filepath.Join(dir, "cluster-info")); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: artifacts: %v\n", err)
		}
		if err := h.dumpResources(ctx, filepath.Join(dir, "resources.yaml"), ""); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: artifacts: %v\n", err)
		}
	}
	if h.cluster != nil {
		if err := h.cluster.ExportLogs(ctx, filepath.Join(dir, "logs")); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: artifacts: exporting %s logs: %v\n", h.opts.Provider, err)
		}
	}
	if h.failed.Load() {
		fmt.Fprintf(os.Stderr, "e2e: something failed; artifacts are in %s\n", dir)
	} else {
		fmt.Fprintf(os.Stderr, "e2e: E2E_KEEP_ARTIFACTS: artifacts are in %s\n", dir)
	}
}

// dumpResources writes every listable object (custom resources included,
// Secrets excluded) of namespace, or of the whole cluster when namespace is
// empty, as YAML to file. `kubectl cluster-info dump` alone misses
// ConfigMaps, CRs and most other kinds an operator test cares about.
func (h *Harness) dumpResources(ctx context.Context, file, namespace string) error {
	scope := []string{"--all-namespaces"}
	listArgs := []string{"api-resources", "--verbs=list", "-o", "name"}
	if namespace != "" {
		scope = []string{"--namespace", namespace}
		listArgs = append(listArgs, "--namespaced=true")
	}
	out, err := h.Kubectl(ctx, listArgs...)
	if err != nil {
		return err
	}
	var kinds []string
	for _, k := range strings.Fields(out) {
		if k != "secrets" {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 0 {
		return errors.New("dump: the apiserver lists no resource types")
	}
	out, err = h.Kubectl(ctx, append([]string{"get", strings.Join(kinds, ","), "--ignore-not-found", "-o", "yaml"}, scope...)...)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, []byte(out), 0o644)
}

// destroy deletes the cluster once, whoever asks first (finish or a signal).
func (h *Harness) destroy(ctx context.Context) error {
	var err error
	h.teardown.Do(func() {
		if h.cluster == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
		defer cancel()
		if err = h.cluster.Destroy(ctx); err != nil {
			err = fmt.Errorf("deleting %s cluster %s: %w", h.opts.Provider, h.opts.ClusterName, err)
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		}
	})
	return err
}

// requireLoopback fails unless kubeconfig's current server is on 127.0.0.1,
// ::1 or localhost.
func requireLoopback(kubeconfig string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	u, err := url.Parse(rc.Host)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: server %q: %w", kubeconfig, rc.Host, err)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return fmt.Errorf("kubeconfig %s: server %q is not on loopback", kubeconfig, rc.Host)
}

// runToolsScript runs hack/tools.sh and returns the bin dir it prints last.
func runToolsScript(ctx context.Context, root string) (string, error) {
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "tools.sh"))
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("TOOLS_BIN is unset and hack/tools.sh failed: %w", err)
	}
	return lastLine(stdout.String())
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) (string, error) {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return "", errors.New("no output")
	}
	return last, nil
}

// libraryModule is the module path of the repository root's go.mod; e2e/
// is a module of its own, so the first go.mod above e2e/ is not the root.
const libraryModule = "github.com/reconcilekit/reconcilekit"

// findRepoRoot walks up from the working directory (go test runs in the
// package directory, e2e/) to the directory whose go.mod is the library's.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module "+libraryModule+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", libraryModule)
		}
		dir = parent
	}
}
