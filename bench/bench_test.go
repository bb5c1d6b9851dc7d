package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reconcilekit/reconcilekit/bench"
	"github.com/reconcilekit/reconcilekit/bench/baseline"
	"github.com/reconcilekit/reconcilekit/bench/idiomatic"
	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

var env *testenv.Env

// childArg and idiomaticArg make the test binary, re-executed by the
// harness, run the baseline or the idiomatic operator instead of the tests
// (as the bench command re-executes itself).
const (
	childArg     = "bench-test-operator-baseline"
	idiomaticArg = "bench-test-operator-idiomatic"
)

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && (os.Args[1] == childArg || os.Args[1] == idiomaticArg) {
		ctrl.SetLogger(zap.New())
		cfg, err := ctrl.GetConfig()
		if err == nil && os.Args[1] == childArg {
			err = baseline.Run(ctrl.SetupSignalHandler(), cfg, baseline.RunOptions{MetricsAddr: os.Args[2]})
		} else if err == nil {
			err = idiomatic.Run(ctrl.SetupSignalHandler(), cfg, idiomatic.RunOptions{MetricsAddr: os.Args[2], Namespace: bench.SystemNamespace})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(testenv.Main(m, &env, envOptions()))
}

// envOptions is the control plane every test of the package runs on: the
// shared one (env) or a smoke test's own (runSmoke).
func envOptions() testenv.Options {
	return testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(repoRoot(), "examples", "webapp", "config", "crd", "bases")},
		AddToScheme:       []func(*k8sruntime.Scheme) error{webappv1.AddToScheme},
	}
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// TestHarnessSmoke runs the whole harness with 3 WebApps against envtest,
// which has no controller-manager: nothing becomes Ready, so convergence
// ends when the operator goes idle. What it proves: the three operators
// start, are counted, and go idle in every phase; the figures the report
// is built on hold.
func TestHarnessSmoke(t *testing.T) {
	testenv.Require(t)
	const n = 3
	res := runSmoke(t, bench.Run, bench.Config{N: n, Unrelated: 10, FastPathsOff: []string{"createonly"}})

	// The raw client created exactly one Deployment and one Service per app.
	assert.Equal(t, map[string]int{"create": 2 * n}, mutatingByVerb(res.Raw.Client))

	for _, impl := range []bench.ImplResult{res.Ours, res.Idiomatic, res.Baseline} {
		assert.Positive(t, impl.Converge.Client.Mutating(), "%s converged without writing", impl.Name)
		assert.GreaterOrEqual(t, impl.Resync.Reconciles, n, "%s: reconciles during the resync", impl.Name)
		assert.GreaterOrEqual(t, impl.Update.Reconciles, n, "%s: reconciles during the image update", impl.Name)
		assert.Positive(t, impl.Update.Client.Mutating(), "%s updated without writing", impl.Name)
		assert.Positive(t, impl.Delete.Client.Mutating(), "%s finalized without writing", impl.Name)
		assert.Positive(t, impl.Converge.ReconcileP50, "%s: reconcile latency", impl.Name)
		assert.GreaterOrEqual(t, impl.Converge.ReconcileP99, impl.Converge.ReconcileP50, impl.Name)
		assert.Positive(t, impl.Converge.CPUScrapes, "%s: metrics reads during convergence", impl.Name)
		// envtest runs no other writer: the apiserver saw exactly what the
		// proxy counted. Events are the exception per phase: the recorder
		// sends them asynchronously, so one can pass the proxy before a
		// phase's end and reach the server's metric after it; over all
		// phases the counts still agree, but for one still in flight.
		var eventsClient, eventsServer int
		for _, ph := range []bench.Phase{impl.Converge, impl.Resync, impl.Update, impl.Delete} {
			for k, s := range ph.Client {
				switch {
				case k.Mutating() && k.Group == "events.k8s.io":
					eventsClient += s.N
				case k.Mutating():
					assert.Equal(t, s.N, ph.Server[k], "%s: %s, client against apiserver_request_total", impl.Name, k)
				}
			}
			for k, n := range ph.Server {
				if k.Mutating() && k.Group == "events.k8s.io" {
					eventsServer += n
				}
			}
		}
		assert.InDelta(t, eventsClient, eventsServer, 1, "%s: Events, client against apiserver_request_total", impl.Name)
		assert.Positive(t, impl.Memory.HeapLive, impl.Name)
		assert.Positive(t, impl.Memory.RSS, impl.Name)
		assert.Positive(t, impl.MemoryUnrelated.RSS, impl.Name)
	}
	// The figure the benchmark exists for: a no-op resync writes nothing
	// with reconcilekit, and three updates per WebApp with the baseline.
	assert.Zero(t, res.Ours.Resync.Client.Mutating(), "reconcilekit resync wrote:\n%v", res.Ours.Resync.Client)
	assert.Equal(t, map[string]int{
		"update deployments.apps": n, "update services": n, "update webapps.apps.example.com/status": n,
	}, mutatingByKey(res.Baseline.Resync.Client))
	// The idiomatic peer applies its two objects on every pass, and
	// nothing else when nothing changed.
	assert.Equal(t, map[string]int{"apply deployments.apps": n, "apply services": n}, mutatingByKey(res.Idiomatic.Resync.Client))
	// The two peers with a route registry hold one entry per converged
	// WebApp, and none once they are deleted.
	for _, impl := range []bench.ImplResult{res.Ours, res.Idiomatic} {
		assert.Equal(t, n, impl.Registry.Entries, "%s: one registry entry per converged WebApp", impl.Name)
		assert.Positive(t, impl.Registry.LargestBytes, impl.Name)
		assert.Zero(t, impl.RegistryLeft, "%s: registry entries of deleted WebApps", impl.Name)
	}
	// Deleting: each peer deregisters (a registry patch) and drops its
	// finalizer.
	assert.Equal(t, n, mutatingByKey(res.Idiomatic.Delete.Client)["patch configmaps"])
	assert.Equal(t, n, mutatingByKey(res.Idiomatic.Delete.Client)["patch webapps.apps.example.com"])

	// The operator with the create-only apply switched off
	// (RECONCILEKIT_FASTPATHS_OFF=createonly) reads the API server before
	// each create, as the one shipped does not.
	getDeployment := bench.Key{Verb: "get", Group: "apps", Resource: "deployments"}
	off, ok := res.Off["createonly"]
	require.True(t, ok, "the createonly-off operator ran")
	assert.Equal(t, "reconcilekit-createonly-off", off.Name)
	assert.GreaterOrEqual(t, off.Converge.Client[getDeployment].N, n, "createonly off: a read before each create")
	assert.Less(t, res.Ours.Converge.Client[getDeployment].N, off.Converge.Client[getDeployment].N, "createonly on: no read before a create")
	assert.Zero(t, off.MemoryUnrelated.RSS, "no unrelated objects for a fast path's run")

	report := &bench.Report{Command: "test", Machine: bench.DescribeMachine("test", "envtest"), Result: res}
	md := report.Markdown()
	for _, section := range []string{"## Goals (issue #30)", "## 1. Requests per WebApp, by phase", "## 2. Converging 3 WebApps",
		"## 3. CPU and reconcile latency", "## 4. Memory", "## 5. Hot paths", "## 6. Fast paths"} {
		assert.Contains(t, md, section)
	}
	assert.Contains(t, md, "| no-op resync: mutating | 0.00 | 2.00 | 3.00 | 0.00× | 0.00× |")
	goals := report.Goals()
	require.NotEmpty(t, goals)
	assert.Equal(t, "PASS", goals[0].Verdict, "no-op resync goal")

	// A scale run (-peers reconcilekit) renders without the peers' columns.
	alone := &bench.Report{Command: "test", Machine: report.Machine, Result: &bench.Result{Config: res.Config, Raw: res.Raw, Round: bench.Round{Ours: res.Ours}}}
	md = alone.Markdown()
	assert.Contains(t, md, "# Performance at N = 3, reconcilekit alone")
	assert.Contains(t, md, fmt.Sprintf("Route registry once all 3 converged: 3 entries in %d ConfigMaps", res.Ours.Registry.Objects))
	assert.NotContains(t, md, "idiomatic")
}

// TestScaleSmoke runs the scale run with 3 WebApps against envtest (no
// controller-manager: convergence ends when the operator is idle, and
// nothing is garbage collected). What it proves: reconcilekit builds the
// fleet, every operator starts over it and goes idle, reconcilekit's
// restart writes nothing, the idiomatic peer takes the fleet over before
// its restart, the baseline gets a fleet of its own, and reconcilekit
// deletes the fleet leaving no registry entry.
func TestScaleSmoke(t *testing.T) {
	testenv.Require(t)
	const n = 3
	res := runSmoke(t, bench.RunScale, bench.Config{N: n})

	assert.Positive(t, res.Converge.Client.Mutating(), "reconcilekit converged without writing")
	assert.Equal(t, n, res.Registry.Entries)
	require.Len(t, res.Restarts, 3)
	for i, want := range [][2]string{{"reconcilekit", "reconcilekit"}, {"idiomatic", "reconcilekit"}, {"baseline", "own"}} {
		r := res.Restarts[i]
		assert.Equal(t, want, [2]string{r.Name, r.Fleet})
		assert.GreaterOrEqual(t, r.Restart.Reconciles, n, "%s: a pass over every WebApp", r.Name)
		assert.Positive(t, r.Restart.CPU, r.Name)
		assert.NotEmpty(t, r.Restart.Progress, r.Name)
		assert.Positive(t, r.Memory.HeapLive, r.Name)
		assert.Positive(t, r.Memory.RSS, r.Name)
	}
	assert.Zero(t, res.Restarts[0].Restart.Client.Mutating(), "reconcilekit's restart wrote:\n%v", res.Restarts[0].Restart.Client)
	for _, r := range res.Restarts {
		assert.Zero(t, r.Rolled, "%s changed a Deployment's spec", r.Name)
	}
	assert.Zero(t, res.TakebackRolled, "reconcilekit changed a Deployment's spec taking the fleet back")
	assert.Positive(t, res.Restarts[1].Takeover.Reconciles, "the idiomatic peer took the fleet over first")
	// Its restart applies its two objects per WebApp, as on a resync.
	assert.Equal(t, map[string]int{"apply deployments.apps": n, "apply services": n}, mutatingByKey(res.Restarts[1].Restart.Client))
	assert.Positive(t, res.Restarts[2].Converge.Client.Mutating(), "the baseline converged its own fleet")
	assert.GreaterOrEqual(t, res.Takeback.Reconciles, n, "reconcilekit took the fleet back")
	assert.GreaterOrEqual(t, res.Delete.Reconciles, n)
	assert.Zero(t, res.RegistryLeft)
	assert.Nil(t, res.Left, "no garbage collector in envtest: nothing counted")

	md := (&bench.ScaleReport{Command: "test", Result: res}).Markdown()
	assert.Contains(t, md, "| restart over a converged fleet: 0 mutating requests | 0 |")
}

// TestShardsSmoke runs the sharding run with 6 WebApps and 1 and 2
// replicas against envtest (no shard filter there: each replica's cache
// drops the others' WebApps as they arrive). What it proves: the replicas
// together reconcile every WebApp, each claims ranges whose WebApps add up
// to the fleet, and their restart over the converged fleet writes nothing.
func TestShardsSmoke(t *testing.T) {
	testenv.Require(t)
	const n = 6
	res := runSmoke(t, func(ctx context.Context, cfg *rest.Config, c bench.Config) (*bench.ShardsResult, error) {
		return bench.RunShards(ctx, cfg, c, []int{1, 2})
	}, bench.Config{N: n, QuietFor: 3 * time.Second}) // longer than a Lease round (2 s), as make bench-shards waits
	require.Len(t, res.Sharded, 2)
	for i, s := range res.Sharded {
		require.Len(t, s.Each, i+1)
		webApps, reconciles := 0, 0
		for _, e := range s.Each {
			webApps += e.WebApps
			reconciles += e.Reconciles
			assert.Zero(t, e.Client.Without("leases").Mutating(), "%s wrote over a converged fleet:\n%v", e.Identity, e.Client)
			assert.Positive(t, e.Memory.HeapLive, e.Identity)
		}
		assert.Equal(t, n, webApps, "%d replicas: their claimed ranges hold the fleet", s.Replicas)
		assert.GreaterOrEqual(t, reconciles, n, "%d replicas: every WebApp reconciled", s.Replicas)
		assert.False(t, s.ServerFilters, "envtest runs without the feature gate")
	}
	md := (&bench.ShardsReport{Command: "test", Result: res}).Markdown()
	assert.Contains(t, md, "| 2 | ")
}

func mutatingByVerb(c bench.Counts) map[string]int {
	out := map[string]int{}
	for k, s := range c {
		if k.Mutating() {
			out[k.Verb] += s.N
		}
	}
	return out
}

func mutatingByKey(c bench.Counts) map[string]int {
	out := map[string]int{}
	for k, s := range c {
		if k.Mutating() {
			out[strings.TrimSpace(k.String())] += s.N
		}
	}
	return out
}

// runSmoke builds the WebApp operator and runs run (bench.Run or
// bench.RunScale) with cfg against a control plane of the test's own (the
// operators watch every namespace, and the harness's namespaces have fixed
// names: on the shared one they would meet what other tests, or an earlier
// -count run, left), every peer with 4 workers and a short QuietFor; on
// failure it logs each operator's log.
func runSmoke[R any](t *testing.T, run func(context.Context, *rest.Config, bench.Config) (R, error), cfg bench.Config) R {
	t.Helper()
	own := testenv.Isolated(t, envOptions())
	dir := t.TempDir()
	ours := filepath.Join(dir, "webapp-operator")
	// examples/ is a module of its own (examples/go.mod).
	build := exec.Command("go", "build", "-o", ours, "./webapp")
	build.Dir = filepath.Join(repoRoot(), "examples")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./examples/webapp:\n%s", out)

	// Every wait of the harness polls for a state it observes (an operator
	// idle, its ranges owned); Timeout only bounds a wait that never gets
	// there. Alone, a whole smoke run takes about a minute (TestShardsSmoke
	// 44-61 s); a cold make test runs it beside compiles on both cores, where
	// 90 s was once too little for one wait. A wait that is going to arrive
	// gets five minutes; one that is not fails there with its state.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	quiet := cfg.QuietFor
	cfg.Workers, cfg.QuietFor, cfg.Timeout, cfg.WorkDir, cfg.Logf = 4, 500*time.Millisecond, 5*time.Minute, dir, t.Logf
	if quiet > 0 {
		cfg.QuietFor = quiet
	}
	cfg.Ours = func(addr string) []string {
		return []string{ours, "--metrics-bind-address=" + addr, "--metrics-secure=false", "--health-probe-bind-address=0",
			"--enable-webhooks=false", "--namespace=" + bench.SystemNamespace}
	}
	cfg.Idiomatic = func(addr string) []string { return []string{os.Args[0], idiomaticArg, addr} }
	cfg.Baseline = func(addr string) []string { return []string{os.Args[0], childArg, addr} }
	res, err := run(ctx, own.Config, cfg)
	if err != nil {
		for _, name := range []string{"reconcilekit", "idiomatic", "baseline"} {
			if b, rerr := os.ReadFile(filepath.Join(dir, name+".log")); rerr == nil {
				t.Logf("%s operator log:\n%s", name, b)
			}
		}
	}
	require.NoError(t, err)
	return res
}
