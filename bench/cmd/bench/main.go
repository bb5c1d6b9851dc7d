// Command bench measures the WebApp example operator's API traffic and
// memory against a tutorial-style baseline on a local kwok cluster, and
// writes the table to docs/performance.md and its figures to
// docs/performance/. `make bench` runs it; `make bench-scale` runs it
// with -scale (bench.RunScale), which writes a section of its own.
//
//	cd bench && go run ./cmd/bench -n 100
//	cd bench && go run ./cmd/bench -n 1000 -repeat 3 -fastpaths all
//	cd bench && go run ./cmd/bench -scale -n 300
//
// -repeat runs every operator that many rounds, interleaved, and reports
// medians and ranges; -fastpaths adds, per fast path named, a run of the
// reconcilekit operator with it switched off (RECONCILEKIT_FASTPATHS_OFF)
// to every round, and a "Fast paths" section to the report.
//
// It starts its own cluster with hack/cluster.sh (CLUSTER_NAME=bench,
// CLUSTER_DIR=.cluster/bench) and always tears it down, unless -use-cluster
// names a running one (which must be on loopback and run
// kube-controller-manager). Each operator runs in a child process: the
// reconcilekit one is examples/webapp built as shipped, the idiomatic and
// baseline peers are bench/cmd/peer.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reconcilekit/reconcilekit/bench"
	"github.com/reconcilekit/reconcilekit/internal/fastpath"
	"github.com/reconcilekit/reconcilekit/internal/kwoknodes"
)

const module = "github.com/reconcilekit/reconcilekit"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	n, unrelated, workers int
	out, kubeconfig       string
	gcWait, quiet         time.Duration
	timeout               time.Duration
	micro, baselineFirst  bool
	render                string
	clusterQPS            int
	registryShards        uint
	profileDir            string
	reconcilers           int
	peers                 string
	raw, update           bool
	scale                 bool
	simulatedRollouts     bool
	shards                string
	repeat                int
	fastPaths             string
}

func run() error {
	var o options
	flag.IntVar(&o.n, "n", 100, "WebApps each operator converges (1000 is fine; 10 for a quick run)")
	flag.IntVar(&o.unrelated, "unrelated", 10000, "unrelated Deployments, ConfigMaps and Services (a third each) for the second memory figure (0 skips it)")
	flag.IntVar(&o.workers, "workers", 8, "parallel requests of the bench's own client")
	flag.StringVar(&o.out, "out", "docs/performance.md", "where to write the report (relative to the repository root; empty: stdout only)")
	flag.StringVar(&o.kubeconfig, "use-cluster", "", "kubeconfig of a running cluster to use instead of starting one (loopback only, with kube-controller-manager)")
	flag.DurationVar(&o.gcWait, "gc-wait", 150*time.Second, "longest wait for a GC cycle before a memory reading (the runtime forces one every 2m)")
	flag.DurationVar(&o.quiet, "quiet", 3*time.Second, "how long an operator must be idle to count as done")
	flag.DurationVar(&o.timeout, "timeout", 0, "bound of every wait (default 10m + 1s per WebApp)")
	flag.BoolVar(&o.micro, "micro", true, "run the go test microbenchmarks")
	flag.BoolVar(&o.baselineFirst, "baseline-first", false, "run the baseline before the reconcilekit operator")
	flag.IntVar(&o.clusterQPS, "cluster-qps", 1000, "client QPS (burst twice that) of the bench cluster's kube-controller-manager and kube-scheduler, so that the operator and not the cluster bounds convergence (0: their defaults, 20 and 50 QPS)")
	flag.UintVar(&o.registryShards, "registry-shards", 16, "the idiomatic peer's route registry: this many ConfigMaps, as the example operator's (webapp-registry-00..15); 0: the single ConfigMap webapp-registry")
	flag.StringVar(&o.peers, "peers", "reconcilekit,idiomatic,baseline", "the operators to run (reconcilekit always; without -scale, \"reconcilekit\" alone is reported without ratios; with -scale, leaving out baseline saves its own fleet's convergence)")
	flag.BoolVar(&o.raw, "raw", true, "run the raw client's reference (the cluster's floor) first")
	flag.BoolVar(&o.update, "update", true, "run the image update phase")
	flag.IntVar(&o.reconcilers, "reconcilers", 4, "WebApps each operator reconciles at once (--max-concurrent-reconciles, the same for all three)")
	flag.StringVar(&o.profileDir, "profile-dir", "", "write each operator's CPU profile of every phase and its heap after it (sampled every 4 KiB) here, for `go tool pprof` (profiling costs CPU: report the figures of a run without it)")
	flag.StringVar(&o.render, "render", "", "only render the reports saved by earlier runs (comma-separated .json files, one after the other; with -scale, one scale report) to -out, and exit")
	flag.BoolVar(&o.simulatedRollouts, "simulated-rollouts", false, "on the bench's own cluster, kwok writes each Deployment's final rolled-out status 1-2 s after it changes (hack/stages/deployment-rolled-out.yaml) and kube-controller-manager runs no deployment, ReplicaSet, endpoints, EndpointSlice(-mirroring) or node-lifecycle controller: no ReplicaSets, Pods or Endpoints, and no in-between rollout statuses (make bench-scale)")
	flag.BoolVar(&o.scale, "scale", false, "the scale run (make bench-scale): reconcilekit converges -n WebApps from zero, each operator restarts over them, reconcilekit deletes them; written to its own section of -out")
	flag.IntVar(&o.repeat, "repeat", 3, "rounds of the three-peer run: each runs every operator through every phase once, on a fleet of its own, the order reversed every other round; the report gives each figure's median and range over them, and a verdict only where the ranges lie clear of its line")
	flag.StringVar(&o.fastPaths, "fastpaths", "", "fast paths to measure (comma-separated: statuspatch, verdicts, intern, createonly; or all): every round also runs the reconcilekit operator once per fast path with it switched off ("+fastpath.Env+"), and the report gets a \"Fast paths\" section: lines of code, savings per phase, verdict")
	flag.StringVar(&o.shards, "shards", "", "the sharding run (make bench-shards): reconcilekit converges -n WebApps, then for each of these replica counts (comma-separated, e.g. 1,2,4) that many replicas with --sharding start over them together; the bench cluster's API server gets the ShardedListAndWatch feature gate; written to its own section of -out")
	flag.Parse()
	replicas, err := parseReplicas(o.shards)
	if err != nil {
		return err
	}
	if len(replicas) > 0 && o.scale {
		return errors.New("-shards and -scale are separate runs")
	}
	if o.n < 1 {
		return errors.New("-n must be at least 1")
	}
	if o.reconcilers < 1 {
		return fmt.Errorf("-reconcilers=%d: must be at least 1", o.reconcilers)
	}
	if o.repeat < 1 {
		return fmt.Errorf("-repeat=%d: must be at least 1", o.repeat)
	}
	fastPaths, err := bench.ParseFastPaths(o.fastPaths)
	if err != nil {
		return fmt.Errorf("-fastpaths: %w", err)
	}
	if len(fastPaths) > 0 && (o.scale || len(replicas) > 0) {
		return errors.New("-fastpaths belongs to the three-peer run, not to -scale or -shards")
	}
	peers, err := parsePeers(o.peers)
	if err != nil {
		return err
	}
	if o.timeout == 0 {
		o.timeout = 10*time.Minute + time.Duration(o.n)*time.Second
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// controller-runtime's own logging (envtest's CRD installer): errors only.
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench %s: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}

	repo, err := repoRoot()
	if err != nil {
		return err
	}
	if o.render != "" {
		if o.scale {
			var report bench.ScaleReport
			if err := readJSON(o.render, &report); err != nil {
				return err
			}
			return writeScale(repo, o.out, logf, &report)
		}
		var reports []*bench.Report
		for _, path := range strings.Split(o.render, ",") {
			var report bench.Report
			if err := readJSON(path, &report); err != nil {
				return err
			}
			reports = append(reports, &report)
		}
		return write(repo, o.out, logf, reports...)
	}
	machine := bench.DescribeMachine("", "")
	work := filepath.Join(repo, ".cluster", "bench", "run")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}

	counted, err := bench.CountFastPaths(repo, fastPaths)
	if err != nil {
		return err
	}
	var micro []bench.Micro
	if o.micro && !o.scale && len(replicas) == 0 {
		logf("microbenchmarks (before the cluster starts, so they have the CPUs)")
		if micro, err = bench.RunMicro(ctx, repo, bench.MicroBenchmarks); err != nil {
			return err
		}
	}
	logf("building the WebApp operator (examples/webapp)")
	ours := filepath.Join(work, "webapp-operator")
	if err := goBuild(ctx, filepath.Join(repo, "examples"), ours, "./webapp"); err != nil { // examples/go.mod
		return err
	}
	// The peers run from a binary of their own, so that their heap holds
	// nothing of the bench's (its figures' fonts alone are 0.2 MiB).
	logf("building the idiomatic and baseline peers (bench/cmd/peer)")
	peer := filepath.Join(work, "peer")
	if err := goBuild(ctx, filepath.Join(repo, "bench"), peer, "./cmd/peer"); err != nil {
		return err
	}

	kubeconfig, cluster := o.kubeconfig, "existing cluster "+o.kubeconfig
	if kubeconfig == "" {
		cluster = "kwok (kwokctl --runtime binary: etcd, kube-apiserver, kube-controller-manager, kube-scheduler; kwok nodes for every pod of a phase)"
		dir := filepath.Join(repo, ".cluster", "bench")
		env := clusterEnv(dir)
		if o.simulatedRollouts {
			cluster = "kwok (kwokctl --runtime binary: etcd, kube-apiserver, kube-controller-manager without its deployment, ReplicaSet, endpoints, EndpointSlice(-mirroring) and node-lifecycle controllers, kube-scheduler; " +
				"rollouts simulated: kwok writes each Deployment's final rolled-out status 1 to 2 s after it changes, hack/stages/deployment-rolled-out.yaml; no in-between statuses, no pods, no nodes)"
			env = append(env, "CLUSTER_SIMULATED_ROLLOUTS=1")
		}
		if len(replicas) > 0 {
			cluster += "; kube-apiserver with the ShardedListAndWatch feature gate"
			env = append(env, "CLUSTER_FEATURE_GATES=ShardedListAndWatch=true")
		}
		if o.clusterQPS > 0 {
			tools, err := fastTools(ctx, repo, filepath.Join(dir, "tools"), o.clusterQPS)
			if err != nil {
				return err
			}
			env = append(env, "TOOLS_BIN="+tools)
			cluster += fmt.Sprintf("; kube-controller-manager and kube-scheduler at --kube-api-qps=%d --kube-api-burst=%d", o.clusterQPS, 2*o.clusterQPS)
		}
		logf("starting the bench cluster (hack/cluster.sh up)")
		defer func() {
			logf("tearing the bench cluster down")
			down := exec.Command("bash", filepath.Join(repo, "hack", "cluster.sh"), "down")
			down.Env, down.Stdout, down.Stderr = env, os.Stderr, os.Stderr
			if err := down.Run(); err != nil {
				logf("hack/cluster.sh down: %v", err)
			}
		}()
		up := exec.CommandContext(ctx, "bash", filepath.Join(repo, "hack", "cluster.sh"), "up")
		var stdout bytes.Buffer
		up.Env, up.Stdout, up.Stderr = env, &stdout, os.Stderr
		if err := up.Run(); err != nil {
			return fmt.Errorf("hack/cluster.sh up: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		kubeconfig = lines[len(lines)-1]
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if err := requireLoopback(cfg); err != nil {
		return err
	}
	if o.kubeconfig == "" && !o.simulatedRollouts {
		// Room for every pod of a phase, twice over for the image update's
		// surge (a scale run has none), plus headroom: by pod count, then
		// by CPU.
		pods := 2*o.n + 100
		if o.scale || len(replicas) > 0 {
			pods = o.n + 100
		}
		if err := kwoknodes.Ensure(ctx, cfg, pods, "bench-node"); err != nil {
			return err
		}
		if more, err := podsForCPU(ctx, cfg, pods); err != nil {
			return err
		} else if more > pods {
			logf("adding kwok nodes for the pods' CPU (%s each): %d pods' worth of node capacity", bench.PodCPU.String(), more)
			if err := kwoknodes.Ensure(ctx, cfg, more, "bench-node"); err != nil {
				return err
			}
		}
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(repo, "examples", "webapp", "config", "crd", "bases")}, ErrorIfPathMissing: true,
	}); err != nil {
		return fmt.Errorf("installing the WebApp CRD: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	if v, err := dc.ServerVersion(); err == nil {
		machine.Kubernetes = v.GitVersion
	}
	machine.Cluster = cluster

	if o.profileDir != "" {
		if o.profileDir, err = filepath.Abs(o.profileDir); err != nil {
			return err
		}
		if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
			return err
		}
		logf("profiling every operator into %s (its figures include pprof's own cost)", o.profileDir)
	}
	var controlPlane []int
	if o.kubeconfig == "" {
		// kwokctl's pid files of the bench cluster's processes.
		for _, c := range []string{"kube-apiserver", "etcd"} {
			b, err := os.ReadFile(filepath.Join(repo, ".cluster", "bench", "kwok", "clusters", "bench", "pids", c+".pid"))
			if err != nil {
				return fmt.Errorf("the bench cluster's %s: %w", c, err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				return fmt.Errorf("the bench cluster's %s pid file: %w", c, err)
			}
			controlPlane = append(controlPlane, pid)
		}
	}
	reconcilers := fmt.Sprintf("--max-concurrent-reconciles=%d", o.reconcilers)
	bc := bench.Config{
		IdiomaticRegistryShards: int(o.registryShards), Reconcilers: o.reconcilers, ControlPlane: controlPlane,
		SkipRaw: !o.raw, SkipUpdate: !o.update, Repeat: o.repeat, FastPathsOff: fastPaths,
		N: o.n, Unrelated: o.unrelated, Workers: o.workers, ControllerManager: true, BaselineFirst: o.baselineFirst,
		GCWait: o.gcWait, QuietFor: o.quiet, Timeout: o.timeout, WorkDir: work, Logf: logf, ProfileDir: o.profileDir,
		Ours: func(addr string) []string {
			return []string{ours, "--metrics-bind-address=" + addr, "--metrics-secure=false",
				"--health-probe-bind-address=0", "--enable-webhooks=false", "--leader-elect=false",
				"--namespace=" + bench.SystemNamespace, reconcilers}
		},
		Idiomatic: func(addr string) []string {
			return []string{peer, "idiomatic", "--metrics-bind-address=" + addr, "--namespace=" + bench.SystemNamespace,
				fmt.Sprintf("--registry-shards=%d", o.registryShards), reconcilers}
		},
		Baseline: func(addr string) []string {
			return []string{peer, "baseline", "--metrics-bind-address=" + addr, reconcilers}
		},
	}
	if !peers["idiomatic"] {
		bc.Idiomatic = nil
	}
	if !peers["baseline"] {
		bc.Baseline = nil
	}
	if len(replicas) > 0 {
		start := time.Now()
		res, err := bench.RunShards(ctx, cfg, bc, replicas)
		if err != nil {
			return fmt.Errorf("%w (operator logs are in %s)", err, work)
		}
		report := bench.ShardsReport{
			Command: "cd bench && go run ./cmd/bench " + strings.Join(os.Args[1:], " "),
			Machine: machine, Took: time.Since(start), Result: res,
		}
		save(filepath.Join(repo, ".cluster", "bench", fmt.Sprintf("shards-n%d.json", o.n)), &report, logf)
		md := report.Markdown()
		fmt.Print(md)
		if o.out == "" {
			return nil
		}
		return rewrite(abs(repo, o.out), func(p page) page { p.shards = shardsMarker + "\n" + md; return p }, logf)
	}
	if o.scale {
		start := time.Now()
		res, err := bench.RunScale(ctx, cfg, bc)
		if err != nil {
			return fmt.Errorf("%w (operator logs are in %s)", err, work)
		}
		report := bench.ScaleReport{
			Command:   "cd bench && go run ./cmd/bench " + strings.Join(os.Args[1:], " "),
			Machine:   machine,
			LoadAfter: bench.DescribeMachine("", "").LoadAvg,
			Took:      time.Since(start),
			Result:    res,
		}
		save(filepath.Join(repo, ".cluster", "bench", fmt.Sprintf("scale-n%d.json", o.n)), &report, logf)
		return writeScale(repo, o.out, logf, &report)
	}
	res, err := bench.Run(ctx, cfg, bc)
	if err != nil {
		return fmt.Errorf("%w (operator logs are in %s)", err, work)
	}
	report := bench.Report{
		Command:   "cd bench && go run ./cmd/bench " + strings.Join(os.Args[1:], " "),
		Machine:   machine,
		LoadAfter: bench.DescribeMachine("", "").LoadAvg,
		Result:    res,
		Micro:     micro,
		FastPaths: counted,
	}
	save(filepath.Join(repo, ".cluster", "bench", fmt.Sprintf("report-n%d.json", o.n)), &report, logf)
	return write(repo, o.out, logf, &report)
}

// save writes report as JSON to path, for -render, and logs it.
func save(path string, report any, logf func(string, ...any)) {
	if b, err := json.MarshalIndent(report, "", "  "); err == nil && os.WriteFile(path, b, 0o644) == nil {
		logf("saved the measurements to %s (re-render with -render)", path)
	}
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// write prints the reports, one after the other, and writes them to out
// (relative to repo) in place of the page's three-peer part, and the first
// one's figures and measurements to the page's FigureDir.
func write(repo, out string, logf func(string, ...any), reports ...*bench.Report) error {
	var parts []string
	for i, r := range reports {
		md := r.Markdown()
		if i > 0 {
			md = strings.Replace(md, "# Performance\n", fmt.Sprintf("# Performance with N = %d\n", r.Result.Config.N), 1)
		}
		parts = append(parts, md)
	}
	md := strings.Join(parts, "\n---\n\n")
	fmt.Print(md)
	if out == "" {
		return nil
	}
	out = abs(repo, out)
	var scale *bench.ScaleReport
	if err := readJSON(dataFile(out, "scale"), &scale); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := figures(out, "bench", reports[0], reports[0].Figures(scale), logf); err != nil {
		return err
	}
	return rewrite(out, func(p page) page { p.main = md; return p }, logf)
}

// writeScale prints the scale report and writes it to out (relative to
// repo) in place of the page's scale section, and its figures and
// measurements to the page's FigureDir.
func writeScale(repo, out string, logf func(string, ...any), report *bench.ScaleReport) error {
	md := report.Markdown()
	fmt.Print(md)
	if out == "" {
		return nil
	}
	out = abs(repo, out)
	var three *bench.Report
	if err := readJSON(dataFile(out, "bench"), &three); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := figures(out, "scale", report, report.Figures(three), logf); err != nil {
		return err
	}
	return rewrite(out, func(p page) page { p.scale = scaleMarker + "\n" + md; return p }, logf)
}

func abs(repo, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(repo, path)
}

// dataFile is where the measurements behind the page out are kept, next to
// its figures (name: "bench" or "scale"): each run's heap figure plots the
// other's points too, and -render redraws the page from them.
func dataFile(out, name string) string {
	return filepath.Join(filepath.Dir(out), bench.FigureDir, name+".json")
}

// figures writes the run's measurements (report, as JSON, to dataFile) and
// its non-empty figures to the FigureDir next to out.
func figures(out, name string, report any, figs []bench.Figure, logf func(string, ...any)) error {
	dir := filepath.Join(filepath.Dir(out), bench.FigureDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(dataFile(out, name), append(b, '\n'), 0o644); err != nil {
		return err
	}
	for _, f := range figs {
		if f.Empty() {
			continue
		}
		svg, err := f.SVG()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.File), svg, 0o644); err != nil {
			return err
		}
	}
	logf("wrote the figures and measurements to %s", dir)
	return nil
}

// rewrite applies edit to the page at out (empty when it does not exist)
// and writes it back.
func rewrite(out string, edit func(page) page, logf func(string, ...any)) error {
	old, err := os.ReadFile(out)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(out, []byte(edit(splitPage(string(old))).String()), 0o644); err != nil {
		return err
	}
	logf("wrote %s", out)
	return nil
}

// The page's parts after the three-peer figures start at these markers:
// the scale run's section, which make bench keeps and make bench-scale
// regenerates, then the hand-written part (what the figures mean, where
// reconcilekit is behind and why), which both keep.
const (
	scaleMarker    = "<!-- scale: generated by make bench-scale, kept by make bench -->"
	shardsMarker   = "<!-- shards: generated by make bench-shards, kept by the others -->"
	analysisMarker = "<!-- analysis: written by hand, kept by make bench -->"
)

// page is docs/performance.md in its four parts, each from its marker on
// (main from the start); a missing part is empty.
type page struct{ main, scale, shards, analysis string }

func splitPage(s string) page {
	var p page
	if i := strings.Index(s, analysisMarker); i >= 0 {
		s, p.analysis = s[:i], s[i:]
	}
	if i := strings.Index(s, shardsMarker); i >= 0 {
		s, p.shards = s[:i], s[i:]
	}
	if i := strings.Index(s, scaleMarker); i >= 0 {
		s, p.scale = s[:i], s[i:]
	}
	p.main = s
	return p
}

// String joins the parts, a blank line between each two.
func (p page) String() string {
	var parts []string
	for _, part := range []string{p.main, p.scale, p.shards, p.analysis} {
		if part = strings.TrimRight(part, "\n"); part != "" {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "\n\n") + "\n"
}

// clusterEnv is the environment of hack/cluster.sh for the bench's own
// cluster: its name, directory and kubeconfig are set here, whatever the
// caller's environment says, so it never touches another cluster.
func clusterEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "CLUSTER_NAME", "CLUSTER_DIR", "CLUSTER_KUBECONFIG", "KUBE_APISERVER_PORT", "TOOLS_BIN", "CLUSTER_SIMULATED_ROLLOUTS",
			"CLUSTER_FEATURE_GATES":
		default:
			env = append(env, kv)
		}
	}
	return append(env, "CLUSTER_NAME=bench", "CLUSTER_DIR="+dir, "CLUSTER_KUBECONFIG="+filepath.Join(dir, "bench.kubeconfig"))
}

// podsForCPU returns the pod capacity kwoknodes.Ensure must reach for
// pods pods of bench.PodCPU each to fit by CPU as well (kwok's nodes hold
// fewer such pods than their pod capacity).
func podsForCPU(ctx context.Context, cfg *rest.Config, pods int) (int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	for _, n := range nodes.Items {
		if _, ok := n.Annotations["kwok.x-k8s.io/node"]; !ok {
			continue
		}
		podCap := n.Status.Allocatable.Pods().Value()
		byCPU := n.Status.Allocatable.Cpu().MilliValue() / bench.PodCPU.MilliValue()
		if byCPU <= 0 {
			return 0, fmt.Errorf("kwok node %s has no room for a pod of %s CPU", n.Name, bench.PodCPU.String())
		}
		if byCPU >= podCap {
			return pods, nil
		}
		nodesNeeded := (int64(pods) + byCPU - 1) / byCPU
		return int(nodesNeeded * podCap), nil
	}
	return 0, errors.New("no kwok node")
}

// fastTools makes dir a TOOLS_BIN for hack/cluster.sh (the variable it
// already reads): the toolchain's binaries, linked, except
// kube-controller-manager and kube-scheduler, which are wrapper scripts
// that add --kube-api-qps and --kube-api-burst to what kwokctl passes (the
// last value of a flag wins). Their defaults (20 and 50 requests/s) would
// otherwise bound how fast any operator's WebApps roll out.
func fastTools(ctx context.Context, repo, dir string, qps int) (string, error) {
	out, err := exec.CommandContext(ctx, "bash", filepath.Join(repo, "hack", "tools.sh"), "--dir").Output()
	if err != nil {
		return "", fmt.Errorf("hack/tools.sh --dir: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	real := lines[len(lines)-1]
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, tool := range []string{"etcd", "kube-apiserver", "kubectl", "kwok", "kwokctl"} {
		if err := os.Symlink(filepath.Join(real, tool), filepath.Join(dir, tool)); err != nil {
			return "", err
		}
	}
	for _, tool := range []string{"kube-controller-manager", "kube-scheduler"} {
		script := fmt.Sprintf("#!/bin/sh\nexec %q \"$@\" --kube-api-qps=%d --kube-api-burst=%d\n", filepath.Join(real, tool), qps, 2*qps)
		if err := os.WriteFile(filepath.Join(dir, tool), []byte(script), 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// repoRoot finds the repository root, the directory of the library's
// go.mod (not bench/go.mod), from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module "+module+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run bench inside the %s checkout", module)
		}
		dir = parent
	}
}

// goBuild builds pkg of the module in dir.
func goBuild(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// requireLoopback refuses any apiserver that is not on this machine: the
// benchmarks put load on it.
func requireLoopback(cfg *rest.Config) error {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return fmt.Errorf("the apiserver %s is not on loopback: the benchmarks only load a local cluster", cfg.Host)
}

// parseReplicas reads -shards: comma-separated replica counts, each at
// least 1; empty: no sharding run.
func parseReplicas(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, err := strconv.Atoi(part)
		if err != nil || k < 1 {
			return nil, fmt.Errorf("-shards: %q is not a number of replicas (at least 1)", part)
		}
		out = append(out, k)
	}
	return out, nil
}

// parsePeers reads -peers: a comma-separated subset of the three operators
// that includes reconcilekit.
func parsePeers(s string) (map[string]bool, error) {
	peers := map[string]bool{}
	for _, p := range strings.Split(s, ",") {
		switch p = strings.TrimSpace(p); p {
		case "reconcilekit", "idiomatic", "baseline":
			peers[p] = true
		default:
			return nil, fmt.Errorf("-peers: unknown operator %q (want reconcilekit, idiomatic, baseline)", p)
		}
	}
	if !peers["reconcilekit"] {
		return nil, fmt.Errorf("-peers=%s: must include reconcilekit, the operator measured", s)
	}
	return peers, nil
}
