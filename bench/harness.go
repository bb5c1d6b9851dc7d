package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// SystemNamespace is the reconcilekit operator's own namespace in the
// benchmarks (its --namespace: the route registry ConfigMap lives there).
const SystemNamespace = "bench-system"

// ResyncAnnotation is the annotation the no-op resync touches on every
// WebApp: a change neither operator reads, which wakes both through their
// WebApp watch, exactly as any unrelated edit (a label by a policy tool, a
// kubectl annotate) does in a real cluster.
const ResyncAnnotation = "bench.reconcilekit.io/resync"

// Config sets up one run of the benchmarks.
type Config struct {
	// N is the number of WebApps each operator converges.
	N int
	// SkipRaw and SkipUpdate leave out the raw client's run and the image
	// update phase, for a scale run that must fit a time budget.
	SkipRaw, SkipUpdate bool
	// Reconcilers is how many WebApps each operator reconciles at once
	// (MaxConcurrentReconciles), for the report: the Commands pass it.
	Reconcilers int
	// Unrelated is the number of Deployments, ConfigMaps and Services, a
	// third each, created in other namespaces for the second memory figure;
	// 0 skips it.
	Unrelated int
	// Workers is how many requests the bench itself sends in parallel when
	// it creates objects (default 8).
	Workers int
	// ControllerManager says the cluster runs kube-controller-manager and
	// a kubelet (kwok): Deployments roll out, so convergence waits for
	// every WebApp's status.ready, and deleted namespaces go away. Without
	// it (envtest) convergence ends when the operator goes quiet.
	ControllerManager bool
	// GCWait bounds the wait for a GC cycle before each memory reading.
	GCWait time.Duration
	// QuietFor is how long an operator must be idle to count as done
	// (default 2s).
	QuietFor time.Duration
	// Timeout bounds every wait for the cluster or an operator (default
	// 10m).
	Timeout time.Duration
	// WorkDir receives the operators' kubeconfigs and logs.
	WorkDir string
	// BaselineFirst runs the peers in the reverse order (baseline,
	// idiomatic, reconcilekit; the default is reconcilekit, idiomatic,
	// baseline), to see how much the order matters.
	BaselineFirst bool
	// Repeat is how many rounds Run measures (0 or 1: one): each round
	// runs every operator through every phase once, on a fleet of its own,
	// the rounds interleaved (see Run).
	Repeat int
	// FastPathsOff names fast paths (internal/fastpath: statuspatch,
	// verdicts, intern, createonly) to measure: every round also runs the
	// reconcilekit operator once per name, with that fast path switched
	// off (fastpath.Env), unrelated objects left out.
	FastPathsOff []string `json:",omitempty"`
	// IdiomaticRegistryShards is how many ConfigMaps the idiomatic peer's
	// route registry spreads over (0: one), for the report: Idiomatic
	// sets it on the command line.
	IdiomaticRegistryShards int
	// ControlPlane holds the pids of the cluster's kube-apiserver and etcd,
	// whose CPU every phase also measures (empty: not measured): what the
	// operator's requests cost the cluster.
	ControlPlane []int `json:"-"`
	// ProfileDir, when set, is where each operator's CPU profile of each
	// phase and its heap after it are written (see Operator.Profile).
	ProfileDir string `json:"-"`
	// Ours, Idiomatic and Baseline start the three operators; a nil
	// Idiomatic or Baseline skips that peer.
	Ours, Idiomatic, Baseline Command `json:"-"`
	// Logf reports progress; nil is silent.
	Logf func(format string, args ...any) `json:"-"`
}

// Phase is what one measured window cost.
type Phase struct {
	// Elapsed is the wall time of the window (for convergence: from the
	// first create to the moment every object was ready).
	Elapsed time.Duration
	// Client is what the operator sent, counted on the wire by its proxy.
	Client Counts
	// Server is apiserver_request_total over the window on the resources
	// an operator writes (see OperatorResources), less the bench's own
	// requests: the operator's requests plus any other component's on
	// those resources.
	Server ServerCounts
	// Reconciles is how many reconciles the operator ran.
	Reconciles int
	// CPU is the operator process's user+sys CPU time over the window
	// (/proc/<pid>/stat), less the bench's metrics scrapes (CPUScrapes of
	// them, at the operator's measured ScrapeCPU each).
	CPU        time.Duration
	CPUScrapes int64
	// HeapAlloc is the bytes the operator process allocated on its heap
	// over the window (/gc/heap/allocs:bytes), less the bench's metrics
	// scrapes' (CPUScrapes of them, at the operator's measured
	// ScrapeAlloc each): what its GC then had to collect.
	HeapAlloc int64 `json:",omitempty"`
	// ControlPlaneCPU is the user+sys CPU time of Config.ControlPlane over
	// the window (0: not measured). The bench's own requests and the
	// cluster's controllers count too, alike for every operator.
	ControlPlaneCPU time.Duration
	// ReconcileP50 and ReconcileP99 are quantiles of the reconciles' own
	// duration over the window, from the operator's
	// controller_runtime_reconcile_time_seconds histogram (0: none ran).
	ReconcileP50, ReconcileP99 time.Duration
	// Progress samples the window over time, for the plots: WebApps Ready
	// while converging (on a cluster with a controller-manager), reconciles
	// run while an operator starts over a fleet.
	Progress []Sample `json:",omitempty"`
}

// Sample is one reading of a phase's progress: N at At from its start.
type Sample struct {
	At time.Duration
	N  int
}

// sampleEvery is the least time between two recorded Samples (the last
// reading of a phase is always kept).
const sampleEvery = time.Second

// record appends s to samples unless the last sample is less than
// sampleEvery older and its N is the same: a curve's shape, not every
// poll.
func record(samples []Sample, s Sample) []Sample {
	if k := len(samples); k > 0 && s.At-samples[k-1].At < sampleEvery && s.N == samples[k-1].N {
		return samples
	}
	return append(samples, s)
}

// ImplResult holds one operator's figures.
type ImplResult struct {
	Name     string
	Startup  Phase
	Converge Phase
	Resync   Phase
	// Update changes every WebApp's image and waits until every one is
	// rolled out and Ready again; Delete deletes every WebApp and waits
	// until the operator has finalized them all.
	Update, Delete Phase
	// ScrapeCPU is the measured CPU cost to the operator of one read of
	// its metrics endpoint, taken out of every phase's CPU, and
	// ScrapeAlloc what it allocates, taken out of every phase's HeapAlloc.
	ScrapeCPU   time.Duration
	ScrapeAlloc int64 `json:",omitempty"`
	// Memory with N WebApps, and again with Unrelated objects added.
	Memory, MemoryUnrelated Memory
	// Registry is the route registry once every WebApp converged.
	Registry Registry
	// RegistryLeft is how many entries of the deleted WebApps the
	// registry still held after the deletion: 0 unless the operator leaks.
	RegistryLeft int
	// MemoryStartup is read once the operator is idle after startup,
	// without waiting for a GC cycle (the heap the last one found live):
	// the fixed cost the per-WebApp heap figure is taken above.
	MemoryStartup Memory
}

// RawResult is the raw client's reference run: it creates the N
// Deployments and Services itself.
type RawResult struct {
	Elapsed time.Duration
	Client  Counts
	Server  ServerCounts
	// Progress is the number of ready Deployments over time.
	Progress []Sample `json:",omitempty"`
}

// Registry describes the route registry ConfigMaps (webapp-registry*) in
// SystemNamespace.
type Registry struct {
	// Entries is how many keys of the run's WebApps the registry holds, in
	// Objects ConfigMaps, the largest of which has LargestBytes of data
	// (the 1 MiB object limit applies to it).
	Objects, Entries, LargestBytes int
}

// registry reads the route registry: the entries of WebApps in ns.
func (h *harness) registry(ctx context.Context, ns string) (Registry, error) {
	var list corev1.ConfigMapList
	if err := h.c.List(ctx, &list, client.InNamespace(SystemNamespace)); err != nil {
		return Registry{}, fmt.Errorf("reading the route registry: %w", err)
	}
	var r Registry
	for _, cm := range list.Items {
		if !strings.HasPrefix(cm.Name, "webapp-registry") {
			continue
		}
		size, ours := 0, 0
		for k, v := range cm.Data {
			size += len(k) + len(v)
			if strings.HasPrefix(k, ns+".") {
				ours++
			}
		}
		if ours > 0 {
			r.Objects++
			r.Entries += ours
			r.LargestBytes = max(r.LargestBytes, size)
		}
	}
	return r, nil
}

// Result is everything a run measured.
type Result struct {
	Config Config
	Raw    RawResult
	// Round is the first round, whose fields a report saved before
	// Config.Repeat existed holds the same way; Repeats are the others.
	// Rounds returns them all.
	Round
	Repeats []Round `json:",omitempty"`
}

// Round is one round of a run: every operator through every phase once.
type Round struct {
	Ours, Idiomatic, Baseline ImplResult
	// Off is the reconcilekit operator with one fast path switched off,
	// by the fast path's name (Config.FastPathsOff).
	Off map[string]ImplResult `json:",omitempty"`
}

// Rounds returns every round of the run, the first first.
func (r *Result) Rounds() []Round {
	return append([]Round{r.Round}, r.Repeats...)
}

// OperatorResources are the resources either operator writes; server-side
// figures are restricted to them, so the cross-check is not drowned in
// the controller-manager's and kwok's writes to pods, ReplicaSets and
// leases.
var OperatorResources = []Key{
	{Group: "apps.example.com", Resource: "webapps"},
	{Group: "apps.example.com", Resource: "webapps", Subresource: "status"},
	{Group: "apps", Resource: "deployments"},
	{Resource: "services"},
	{Resource: "configmaps"},
	{Group: "events.k8s.io", Resource: "events"},
}

func operatorResource(k Key) bool {
	for _, r := range OperatorResources {
		if r.Group == k.Group && r.Resource == k.Resource && r.Subresource == k.Subresource {
			return true
		}
	}
	return false
}

// NewScheme returns the scheme the bench's client uses.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := webappv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

type harness struct {
	cfg      Config
	upstream *rest.Config
	self     *Counter
	c        client.WithWatch
	rc       rest.Interface
}

// Run runs the benchmarks against the cluster of upstream (admin
// credentials: it reads the apiserver's /metrics and creates namespaces),
// which must have the WebApp CRD installed: the raw client first, then
// Config.Repeat rounds, in each of which every operator, alone on the
// cluster, starts and goes through every phase on a fleet of its own (see
// interleave for their order).
func Run(ctx context.Context, upstream *rest.Config, cfg Config) (*Result, error) {
	h, err := newHarness(ctx, upstream, cfg)
	if err != nil {
		return nil, err
	}
	cfg = h.cfg
	res := &Result{Config: cfg}

	if !cfg.SkipRaw {
		cfg.Logf("raw client: %d Deployments and Services", cfg.N)
		if res.Raw, err = h.raw(ctx); err != nil {
			return nil, fmt.Errorf("raw client: %w", err)
		}
		cfg.Logf("raw client: all ready after %s", res.Raw.Elapsed.Round(time.Millisecond))
	}
	peers := peersOf(cfg)
	for round := range cfg.Repeat {
		rd := Round{}
		for _, p := range interleave(peers, round) {
			if cfg.Repeat > 1 {
				cfg.Logf("round %d of %d: %s", round+1, cfg.Repeat, p.name)
			}
			got, err := h.impl(ctx, p, round)
			if err != nil {
				return nil, fmt.Errorf("round %d of %d: %s operator: %w", round+1, cfg.Repeat, p.name, err)
			}
			rd.put(p, got)
		}
		if round == 0 {
			res.Round = rd
		} else {
			res.Repeats = append(res.Repeats, rd)
		}
	}
	return res, nil
}

// newHarness applies cfg's defaults and builds the bench's own clients
// (admin credentials, counted) and SystemNamespace.
func newHarness(ctx context.Context, upstream *rest.Config, cfg Config) (*harness, error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 8
	}
	if cfg.QuietFor <= 0 {
		cfg.QuietFor = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	cfg.Repeat = max(cfg.Repeat, 1)
	h := &harness{cfg: cfg, upstream: upstream, self: NewCounter()}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	selfCfg := rest.CopyConfig(upstream)
	selfCfg.QPS, selfCfg.Burst = -1, 0 // no client-side throttling: the apiserver is the limit
	selfCfg.Wrap(h.self.Transport)
	if h.c, err = client.NewWithWatch(selfCfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	rcCfg := rest.CopyConfig(upstream)
	rcCfg.GroupVersion = &corev1.SchemeGroupVersion
	rcCfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	if h.rc, err = rest.RESTClientFor(rcCfg); err != nil {
		return nil, err
	}
	if err := h.ensureNamespace(ctx, SystemNamespace); err != nil {
		return nil, err
	}
	return h, nil
}

// window measures the server side of fn: apiserver_request_total on
// OperatorResources over fn, less what the bench itself sent meanwhile.
func (h *harness) window(ctx context.Context, fn func() error) (ServerCounts, error) {
	before, err := ScrapeAPIServer(ctx, h.rc)
	if err != nil {
		return nil, err
	}
	selfBefore := h.self.Snapshot()
	if err := fn(); err != nil {
		return nil, err
	}
	after, err := ScrapeAPIServer(ctx, h.rc)
	if err != nil {
		return nil, err
	}
	self := h.self.Snapshot().Sub(selfBefore)
	out := ServerCounts{}
	for k, n := range after.Sub(before) {
		if !operatorResource(k) {
			continue
		}
		if n -= self[k].N; n != 0 {
			out[k] = n
		}
	}
	return out, nil
}

func (h *harness) ensureNamespace(ctx context.Context, name string) error {
	err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// deleteNamespaces deletes the namespaces and, on a cluster with a
// namespace controller, waits until they are gone.
func (h *harness) deleteNamespaces(ctx context.Context, names ...string) error {
	for _, name := range names {
		err := h.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", name, err)
		}
	}
	if !h.cfg.ControllerManager {
		return nil
	}
	return poll(ctx, h.cfg.Timeout, func() (bool, error) {
		for _, name := range names {
			err := h.c.Get(ctx, types.NamespacedName{Name: name}, &corev1.Namespace{})
			if !apierrors.IsNotFound(err) {
				return false, client.IgnoreNotFound(err)
			}
		}
		return true, nil
	})
}

// parallel runs fn(0..n-1) on the configured number of workers and
// returns the first error.
func (h *harness) parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(h.cfg.Workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// readyInterval is how often the bench lists the N objects while it waits
// for them to be ready: 1ms per object, at least 250ms, so that watching
// does not load the apiserver more than the operator under test does.
func (h *harness) readyInterval() time.Duration {
	return max(250*time.Millisecond, time.Duration(h.cfg.N)*time.Millisecond)
}

func objectName(i int) string { return fmt.Sprintf("app-%04d", i) }

// PodCPU and PodMemory are what every benchmark pod asks for: the
// operators' defaults, because the WebApps set no spec.resources. (They
// used to ask for 10m: since the WebApp CRD stores apps.example.com/v2,
// whose spec.resources has another shape, a v1 spec.resources is pruned
// without the operator's conversion webhook, which the bench does not
// run.) cmd/bench adds kwok nodes for their CPU.
var (
	PodCPU    = resource.MustParse("500m")
	PodMemory = resource.MustParse("256Mi")
)

// rawObjects are the raw client's Deployment and Service for app i: the
// shape the operators create.
func rawObjects(ns string, i int) (*appsv1.Deployment, *corev1.Service) {
	name := objectName(i)
	labels := map[string]string{"app.kubernetes.io/name": "webapp", "app.kubernetes.io/instance": name}
	replicas := int32(1)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "registry.example.com/web:v1",
					Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Resources: corev1.ResourceRequirements{Requests: rawResources, Limits: rawResources},
				}}},
			},
		},
	}
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	return d, s
}

var rawResources = corev1.ResourceList{corev1.ResourceCPU: PodCPU, corev1.ResourceMemory: PodMemory}

func deploymentReady(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas >= want &&
		d.Status.ReadyReplicas >= want && d.Status.AvailableReplicas >= want
}

func (h *harness) raw(ctx context.Context) (RawResult, error) {
	const ns = "bench-raw"
	if err := h.ensureNamespace(ctx, ns); err != nil {
		return RawResult{}, err
	}
	var out RawResult
	selfBefore := h.self.Snapshot()
	var err error
	out.Server, err = h.window(ctx, func() error {
		start := time.Now()
		if err := h.parallel(ctx, h.cfg.N, func(ctx context.Context, i int) error {
			d, s := rawObjects(ns, i)
			if err := h.c.Create(ctx, d); err != nil {
				return err
			}
			return h.c.Create(ctx, s)
		}); err != nil {
			return err
		}
		if h.cfg.ControllerManager {
			readyNow := 0
			deployments, err := h.follow(ctx, ns, &appsv1.DeploymentList{})
			if err != nil {
				return err
			}
			defer deployments.Close()
			if err := pollEvery(ctx, h.readyInterval(), h.cfg.Timeout, func() (bool, error) {
				ready := 0
				for _, d := range deployments.Items() {
					if deploymentReady(d.(*appsv1.Deployment)) {
						ready++
					}
				}
				readyNow = ready
				out.Progress = record(out.Progress, Sample{At: time.Since(start), N: ready})
				return ready == h.cfg.N, nil
			}); err != nil {
				return fmt.Errorf("waiting for %d Deployments to be ready (%d are): %w", h.cfg.N, readyNow, err)
			}
		}
		out.Elapsed = time.Since(start)
		return nil
	})
	if err != nil {
		return out, err
	}
	out.Client = h.self.Snapshot().Sub(selfBefore)
	// The raw client's own traffic is what is measured here: add it back.
	for k, s := range out.Client {
		if operatorResource(k) {
			out.Server[k] += s.N
		}
	}
	return out, h.deleteNamespaces(ctx, ns)
}

// UpdatedImage is the image the update phase sets on every WebApp.
const UpdatedImage = "registry.example.com/web:v2"

// impl runs p through every phase in round (from 0): it starts the
// operator, converges a fleet of its own, resyncs, updates and deletes it,
// reading the memory in between, and stops the operator.
func (h *harness) impl(ctx context.Context, p peer, round int) (ImplResult, error) {
	res := ImplResult{Name: p.name}
	name := p.label(round)
	ns := "bench-" + name
	if err := h.ensureNamespace(ctx, ns); err != nil {
		return res, err
	}
	h.cfg.Logf("%s: starting the operator", name)
	var op *Operator
	var err error
	res.Startup.Server, err = h.window(ctx, func() error {
		start := time.Now()
		if op, err = StartOperator(ctx, name, p.cmd, h.upstream, h.cfg.WorkDir, h.cfg.ProfileDir != "", p.env...); err != nil {
			return err
		}
		_, err := op.WaitQuiet(ctx, 0, h.cfg.QuietFor, h.cfg.Timeout, nil)
		res.Startup.Elapsed = time.Since(start)
		return err
	})
	if op != nil {
		defer op.Stop()
	}
	if err != nil {
		return res, err
	}
	res.Startup.Client = op.Counter.Snapshot()
	if err := op.CalibrateScrapes(ctx, 100); err != nil {
		return res, err
	}
	res.ScrapeCPU, res.ScrapeAlloc = op.ScrapeCPU, op.ScrapeAlloc
	if res.MemoryStartup, err = op.Memory(ctx, 0); err != nil {
		return res, err
	}

	h.cfg.Logf("%s: converging %d WebApps", name, h.cfg.N)
	if res.Converge, err = h.converge(ctx, op, ns); err != nil {
		return res, err
	}
	h.cfg.Logf("%s: converged in %s (%d requests, %d mutating)", name, res.Converge.Elapsed.Round(time.Millisecond),
		res.Converge.Client.Total(), res.Converge.Client.Mutating())

	if res.Registry, err = h.registry(ctx, ns); err != nil {
		return res, err
	}
	h.cfg.Logf("%s: route registry: %d entries in %d ConfigMaps, the largest %d bytes", name,
		res.Registry.Entries, res.Registry.Objects, res.Registry.LargestBytes)

	h.cfg.Logf("%s: no-op resync of %d WebApps", name, h.cfg.N)
	if res.Resync, err = h.resync(ctx, op, ns); err != nil {
		return res, err
	}
	h.cfg.Logf("%s: resync made %d mutating requests", name, res.Resync.Client.Mutating())

	if !h.cfg.SkipUpdate {
		h.cfg.Logf("%s: updating the image of %d WebApps", name, h.cfg.N)
		if res.Update, err = h.update(ctx, op, ns); err != nil {
			return res, err
		}
		h.cfg.Logf("%s: update rolled out in %s (%d requests, %d mutating)", name, res.Update.Elapsed.Round(time.Millisecond),
			res.Update.Client.Total(), res.Update.Client.Mutating())
	}

	h.cfg.Logf("%s: memory with %d WebApps (waiting up to %s for a GC cycle)", name, h.cfg.N, h.cfg.GCWait)
	if res.Memory, err = op.Memory(ctx, h.cfg.GCWait); err != nil {
		return res, err
	}
	if h.cfg.Unrelated > 0 && p.unrelated {
		h.cfg.Logf("%s: creating %d unrelated Deployments, ConfigMaps and Services", name, h.cfg.Unrelated)
		namespaces, err := h.unrelated(ctx, name)
		if err != nil {
			return res, err
		}
		if _, err := op.WaitQuiet(ctx, 0, h.cfg.QuietFor, h.cfg.Timeout, nil); err != nil {
			return res, err
		}
		h.cfg.Logf("%s: memory with the unrelated objects", name)
		if res.MemoryUnrelated, err = op.Memory(ctx, h.cfg.GCWait); err != nil {
			return res, err
		}
		if err := h.deleteNamespaces(ctx, namespaces...); err != nil {
			return res, err
		}
	}

	h.cfg.Logf("%s: deleting the WebApps", name)
	if res.Delete, err = h.delete(ctx, op, ns); err != nil {
		return res, err
	}
	h.cfg.Logf("%s: %d WebApps finalized in %s (%d requests, %d mutating)", name, h.cfg.N, res.Delete.Elapsed.Round(time.Millisecond),
		res.Delete.Client.Total(), res.Delete.Client.Mutating())
	left, err := h.registry(ctx, ns)
	if err != nil {
		return res, err
	}
	if res.RegistryLeft = left.Entries; left.Entries > 0 {
		// Reported, not fatal: a scale run is too long to lose.
		h.cfg.Logf("%s: the route registry still holds %d entries of deleted WebApps", name, left.Entries)
	}
	return res, h.deleteNamespaces(ctx, ns)
}

// phase measures fn on op: requests on the wire and on the server, CPU,
// reconciles and their latency. fn sets Elapsed. label names the phase's
// profiles.
func (h *harness) phase(ctx context.Context, op *Operator, label string, fn func(p *Phase, before OperatorStats) error) (Phase, error) {
	var p Phase
	defer h.profile(ctx, op, label)()
	m, err := h.mark(ctx, op)
	if err != nil {
		return p, err
	}
	p.Server, err = h.window(ctx, func() error { return fn(&p, m.stats) })
	if err != nil {
		p.Client = op.Counter.Snapshot().Sub(m.client)
		return p, err
	}
	return p, h.since(ctx, op, m, &p)
}

// profile profiles op into Config.ProfileDir under label (nothing when it
// is empty) until the returned stop is called.
func (h *harness) profile(ctx context.Context, op *Operator, label string) (stop func()) {
	if h.cfg.ProfileDir == "" {
		return func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	profiled := op.Profile(pctx, h.cfg.ProfileDir, label)
	return func() {
		cancel()
		if err := <-profiled; err != nil {
			h.cfg.Logf("%s: profiling %s: %v", op.Name, label, err)
		}
	}
}

// mark is where a measured window starts: an operator's figures so far.
// The zero mark is that of a process yet to start, but for the control
// plane's CPU.
type mark struct {
	stats        OperatorStats
	client       Counts
	cpu          CPUReading
	controlPlane time.Duration
}

// mark reads op's figures (op nil: the zero mark of an operator about to
// start).
func (h *harness) mark(ctx context.Context, op *Operator) (mark, error) {
	var m mark
	var err error
	if m.controlPlane, err = h.controlPlaneCPU(); err != nil || op == nil {
		return m, err
	}
	if m.stats, err = op.Stats(ctx); err != nil {
		return m, err
	}
	m.client = op.Counter.Snapshot()
	m.cpu, err = op.ReadCPU()
	return m, err
}

// since fills p with op's figures since m (all but Elapsed, Server and
// Progress, which the window sets).
func (h *harness) since(ctx context.Context, op *Operator, m mark, p *Phase) error {
	p.Client = op.Counter.Snapshot().Sub(m.client)
	cpu, err := op.CPUSince(m.cpu)
	if err != nil {
		return err
	}
	p.CPU, p.CPUScrapes = cpu.CPU, cpu.Scrapes
	cp, err := h.controlPlaneCPU()
	if err != nil {
		return err
	}
	p.ControlPlaneCPU = cp - m.controlPlane
	after, err := op.Stats(ctx)
	if err != nil {
		return err
	}
	p.Reconciles = int(after.Reconciles - m.stats.Reconciles)
	if after.HeapAllocs > 0 { // 0: the operator does not export it
		// The two readings fall inside scrapes: between them lie the
		// CPUScrapes scrapes of the window and about one more.
		scrapes := p.CPUScrapes + 1
		p.HeapAlloc = max(0, int64(after.HeapAllocs-m.stats.HeapAllocs)-scrapes*op.ScrapeAlloc)
	}
	lat := after.ReconcileTime.Sub(m.stats.ReconcileTime)
	if lat.Count() > 0 {
		p.ReconcileP50 = time.Duration(lat.Quantile(0.5) * float64(time.Second))
		p.ReconcileP99 = time.Duration(lat.Quantile(0.99) * float64(time.Second))
	}
	return nil
}

// controlPlaneCPU is the CPU time the control plane's processes used so
// far.
func (h *harness) controlPlaneCPU() (time.Duration, error) {
	var sum time.Duration
	for _, pid := range h.cfg.ControlPlane {
		cpu, err := ProcessCPU(pid)
		if err != nil {
			return 0, fmt.Errorf("control plane process %d: %w", pid, err)
		}
		sum += cpu
	}
	return sum, nil
}

// waitReady waits until every WebApp in ns is Ready for its current
// generation (when the operator records observedGeneration) and, when
// image is set, every Deployment in ns runs image and is rolled out. It
// records the count of ready WebApps (or rolled-out Deployments) since
// start in p.Progress.
func (h *harness) waitReady(ctx context.Context, ns, image string, start time.Time, p *Phase) error {
	readyNow := 0
	apps, err := h.follow(ctx, ns, &webappv1.WebAppList{})
	if err != nil {
		return err
	}
	defer apps.Close()
	err = pollEvery(ctx, h.readyInterval(), h.cfg.Timeout, func() (bool, error) {
		defer func() { p.Progress = record(p.Progress, Sample{At: time.Since(start), N: readyNow}) }()
		ready := 0
		for _, o := range apps.Items() {
			a := o.(*webappv1.WebApp)
			if a.Status.IsReady() && (a.Status.ObservedGeneration == nil || *a.Status.ObservedGeneration >= a.Generation) {
				ready++
			}
		}
		readyNow = ready
		if ready < h.cfg.N || image == "" {
			return ready >= h.cfg.N, nil
		}
		var deployments appsv1.DeploymentList
		if err := h.c.List(ctx, &deployments, client.InNamespace(ns)); err != nil {
			return false, err
		}
		rolled := 0
		for i := range deployments.Items {
			d := &deployments.Items[i]
			if c := d.Spec.Template.Spec.Containers; len(c) > 0 && c[0].Image == image && deploymentReady(d) && d.Status.Replicas == d.Status.UpdatedReplicas {
				rolled++
			}
		}
		readyNow = rolled
		return rolled >= h.cfg.N, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d WebApps to be ready (%d are): %w", h.cfg.N, readyNow, err)
	}
	return nil
}

// update sets a new image on every WebApp and waits until every
// Deployment has rolled it out and every WebApp is Ready again.
func (h *harness) update(ctx context.Context, op *Operator, ns string) (Phase, error) {
	return h.phase(ctx, op, "update", func(p *Phase, before OperatorStats) error {
		start := time.Now()
		patch := fmt.Appendf(nil, `{"spec":{"image":%q}}`, UpdatedImage)
		if err := h.parallel(ctx, h.cfg.N, func(ctx context.Context, i int) error {
			app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: objectName(i)}}
			return h.c.Patch(ctx, app, client.RawPatch(types.MergePatchType, patch))
		}); err != nil {
			return fmt.Errorf("updating WebApps: %w", err)
		}
		if h.cfg.ControllerManager {
			if err := h.waitReady(ctx, ns, UpdatedImage, start, p); err != nil {
				return err
			}
			p.Elapsed = time.Since(start)
		}
		_, err := op.WaitQuiet(ctx, before.Reconciles+float64(h.cfg.N), h.cfg.QuietFor, h.cfg.Timeout, nil)
		if !h.cfg.ControllerManager {
			p.Elapsed = time.Since(start) - h.cfg.QuietFor
		}
		return err
	})
}

// delete deletes every WebApp in ns and waits until the operator has
// finalized them all and gone idle.
func (h *harness) delete(ctx context.Context, op *Operator, ns string) (Phase, error) {
	return h.phase(ctx, op, "delete", func(p *Phase, before OperatorStats) error {
		apps, err := h.follow(ctx, ns, &webappv1.WebAppList{})
		if err != nil {
			return err
		}
		defer apps.Close()
		start := time.Now()
		// One DELETE per WebApp, in parallel as they were created: a
		// DeleteCollection of 1,000 of them outlived the apiserver's
		// 60-second request timeout on this machine.
		if err := h.parallel(ctx, h.cfg.N, func(ctx context.Context, i int) error {
			app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: objectName(i)}}
			return client.IgnoreNotFound(h.c.Delete(ctx, app))
		}); err != nil {
			return fmt.Errorf("deleting the WebApps in %s: %w", ns, err)
		}
		if err := pollEvery(ctx, h.readyInterval(), h.cfg.Timeout, func() (bool, error) {
			return len(apps.Items()) == 0, nil
		}); err != nil {
			return fmt.Errorf("waiting for the %s operator to finalize the WebApps: %w", op.Name, err)
		}
		p.Elapsed = time.Since(start)
		_, err = op.WaitQuiet(ctx, before.Reconciles+float64(h.cfg.N), h.cfg.QuietFor, h.cfg.Timeout, nil)
		return err
	})
}

func (h *harness) converge(ctx context.Context, op *Operator, ns string) (Phase, error) {
	return h.phase(ctx, op, "converge", func(p *Phase, before OperatorStats) error {
		start := time.Now()
		if err := h.parallel(ctx, h.cfg.N, func(ctx context.Context, i int) error {
			return h.c.Create(ctx, &webappv1.WebApp{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: objectName(i)},
				Spec:       webappv1.WebAppSpec{Image: "registry.example.com/web:v1"},
			})
		}); err != nil {
			return fmt.Errorf("creating WebApps: %w", err)
		}
		if h.cfg.ControllerManager {
			if err := h.waitReady(ctx, ns, "", start, p); err != nil {
				return err
			}
			p.Elapsed = time.Since(start)
		}
		_, err := op.WaitQuiet(ctx, before.Reconciles+float64(h.cfg.N), h.cfg.QuietFor, h.cfg.Timeout, nil)
		if !h.cfg.ControllerManager {
			p.Elapsed = time.Since(start) - h.cfg.QuietFor
		}
		return err
	})
}

func (h *harness) resync(ctx context.Context, op *Operator, ns string) (Phase, error) {
	stamp := time.Now().UTC().Format(time.RFC3339Nano)
	return h.phase(ctx, op, "resync", func(p *Phase, before OperatorStats) error {
		start := time.Now()
		if err := h.parallel(ctx, h.cfg.N, func(ctx context.Context, i int) error {
			app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: objectName(i)}}
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, ResyncAnnotation, stamp)
			return h.c.Patch(ctx, app, client.RawPatch(types.MergePatchType, patch))
		}); err != nil {
			return fmt.Errorf("annotating WebApps: %w", err)
		}
		_, err := op.WaitQuiet(ctx, before.Reconciles+float64(h.cfg.N), h.cfg.QuietFor, h.cfg.Timeout, nil)
		p.Elapsed = time.Since(start) - h.cfg.QuietFor
		return err
	})
}

// unrelated creates cfg.Unrelated objects the operators do not manage, a
// third each: Deployments (paused, 0 replicas: no ReplicaSet, no pod, so
// the cluster stays light), ConfigMaps (1 KiB of data each) and headless
// Services (no cluster IP to allocate; what an operator that watches
// Services, as the example's dbRef watch does, caches), spread over 10
// namespaces of their own, and returns the namespaces.
func (h *harness) unrelated(ctx context.Context, impl string) ([]string, error) {
	const spread = 10
	var namespaces []string
	for i := range spread {
		ns := fmt.Sprintf("bench-unrelated-%s-%d", impl, i)
		if err := h.ensureNamespace(ctx, ns); err != nil {
			return nil, err
		}
		namespaces = append(namespaces, ns)
	}
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	err := h.parallel(ctx, h.cfg.Unrelated, func(ctx context.Context, i int) error {
		ns := namespaces[i%spread]
		name := fmt.Sprintf("other-%05d", i)
		labels := map[string]string{"app.kubernetes.io/name": "other", "app.kubernetes.io/instance": name}
		switch i % 3 {
		case 1:
			return h.c.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Data:       map[string]string{"config.txt": string(payload)},
			})
		case 2:
			return h.c.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec: corev1.ServiceSpec{
					ClusterIP: corev1.ClusterIPNone,
					Selector:  labels,
					Ports:     []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
				},
			})
		default:
			zero := int32(0)
			return h.c.Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: &zero,
					Paused:   true,
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{
							Name: "app", Image: "registry.example.com/other:v1",
							Env: []corev1.EnvVar{{Name: "MODE", Value: "production"}},
						}}},
					},
				},
			})
		}
	})
	return namespaces, err
}
