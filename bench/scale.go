package bench

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FleetNamespace holds the WebApps of a scale run (RunScale) that
// reconcilekit converges and the idiomatic peer takes over.
const FleetNamespace = "bench-fleet"

// ScaleResult is what a scale run (RunScale) measured.
type ScaleResult struct {
	Config Config
	// Startup is reconcilekit's first start, before any WebApp exists; its
	// MemoryStartup is the heap of that idle process.
	Startup       Phase
	MemoryStartup Memory
	// Converge is reconcilekit converging N WebApps from zero in
	// FleetNamespace; Registry is the route registry after it.
	Converge Phase
	Registry Registry
	// Restarts are the operators starting over a converged fleet of N, in
	// the order they ran: reconcilekit, idiomatic, baseline.
	Restarts []Restart
	// Takeback is reconcilekit's start over the fleet after another
	// operator took it over (zero when none did), before Delete.
	Takeback Phase
	// TakebackRolled is how many Deployments' spec the takeback changed
	// (their generation moved): a rollout of their pods.
	TakebackRolled int
	// Delete is reconcilekit deleting the N WebApps, until it has
	// finalized them all and is idle.
	Delete Phase
	// RegistryLeft is how many entries of the deleted WebApps the route
	// registry still held after Delete: 0 unless the operator leaks.
	RegistryLeft int
	// Left counts the objects still in FleetNamespace once its WebApps
	// were gone and the cluster's garbage collector had had Collected to
	// remove what they owned (nil without a controller-manager, which
	// collects nothing).
	Left      map[string]int `json:",omitempty"`
	Collected time.Duration
}

// Restart is one operator started over a fleet of N converged WebApps:
// what it cost until idle, and its memory then.
type Restart struct {
	Name string
	// Fleet says whose fleet it started over: "reconcilekit" (built by
	// reconcilekit's Converge) or "own" (its own, built by Converge here).
	Fleet string
	// Converge is the operator's own convergence of its fleet from zero
	// (only for Fleet "own").
	Converge Phase
	// Takeover is the operator's first start over a fleet another operator
	// converged (zero when the fleet was its own): it adopts the objects
	// and rewrites the status in its own terms, which is not what a
	// restart costs, so it is measured apart and Restart is its second
	// start.
	Takeover Phase
	// Restart is from the process's start until it is idle again with at
	// least N reconciles run: startup, cache sync and one pass over every
	// WebApp. Its CPU is the process's since it started.
	Restart Phase
	// Memory is read once the restart is over, after a GC cycle.
	Memory Memory
	// Rolled is how many of the fleet's Deployments had their spec changed
	// (their generation moved) by the takeover and the restart: a rollout
	// of their pods. 0 when the operator writes the objects it found.
	Rolled int
}

// ownFleet is the peer that cannot take reconcilekit's fleet over and
// converges its own: the tutorial baseline's Deployment selector
// ({app: <name>}) is not the fleet's, and a Deployment's selector is
// immutable, so every pass over the fleet would fail (and its Service
// update would point the fleet's Services at no pod).
const ownFleet = "baseline"

// RunScale runs the scale benchmark against the cluster of upstream (as
// Run): reconcilekit converges N WebApps from zero in FleetNamespace;
// each operator in turn starts over that converged fleet, each alone
// (the idiomatic peer, which writes the same objects, takes it over once
// and is measured on its second start); reconcilekit takes the fleet back
// and deletes it, and the run checks that nothing is left. The baseline
// cannot take the fleet over (see ownFleet): it converges, restarts over
// and deletes a fleet of its own afterwards. Config.Idiomatic or
// Config.Baseline nil skips that peer; Unrelated, SkipUpdate and
// BaselineFirst do not apply.
func RunScale(ctx context.Context, upstream *rest.Config, cfg Config) (*ScaleResult, error) {
	h, err := newHarness(ctx, upstream, cfg)
	if err != nil {
		return nil, err
	}
	cfg = h.cfg
	res := &ScaleResult{Config: cfg}
	if err := h.ensureNamespace(ctx, FleetNamespace); err != nil {
		return nil, err
	}

	cfg.Logf("reconcilekit: starting the operator")
	op, err := h.start(ctx, "reconcilekit", cfg.Ours, "startup", 0, &res.Startup)
	if err != nil {
		return nil, err
	}
	if res.MemoryStartup, err = op.Memory(ctx, 0); err != nil {
		op.Stop()
		return nil, err
	}
	cfg.Logf("reconcilekit: converging %d WebApps", cfg.N)
	res.Converge, err = h.converge(ctx, op, FleetNamespace)
	op.Stop()
	if err != nil {
		return nil, fmt.Errorf("reconcilekit operator: %w", err)
	}
	cfg.Logf("reconcilekit: converged in %s (%.1f WebApps/s, %d requests, %d mutating)", res.Converge.Elapsed.Round(time.Millisecond),
		float64(cfg.N)/res.Converge.Elapsed.Seconds(), res.Converge.Client.Total(), res.Converge.Client.Mutating())
	if res.Registry, err = h.registry(ctx, FleetNamespace); err != nil {
		return nil, err
	}

	r, err := h.restartOver(ctx, "reconcilekit", cfg.Ours, false)
	if err != nil {
		return nil, err
	}
	res.Restarts = append(res.Restarts, r)
	if cfg.Idiomatic != nil {
		r, err := h.restartOver(ctx, "idiomatic", cfg.Idiomatic, true)
		if err != nil {
			return nil, err
		}
		res.Restarts = append(res.Restarts, r)
	}

	cfg.Logf("reconcilekit: starting over the fleet to delete it")
	gens, err := h.generations(ctx, FleetNamespace)
	if err != nil {
		return nil, err
	}
	var takeback Phase
	if op, err = h.start(ctx, "reconcilekit", cfg.Ours, "takeback", cfg.N, &takeback); err != nil {
		return nil, err
	}
	if cfg.Idiomatic != nil {
		res.Takeback = takeback
		if res.TakebackRolled, err = h.rolled(ctx, FleetNamespace, gens); err != nil {
			op.Stop()
			return nil, err
		}
	}
	if err := h.deleteFleet(ctx, op, FleetNamespace, &res.Delete, &res.RegistryLeft, &res.Left, &res.Collected); err != nil {
		return nil, err
	}

	if cfg.Baseline != nil {
		r, err := h.ownFleet(ctx, ownFleet, cfg.Baseline)
		if err != nil {
			return nil, err
		}
		res.Restarts = append(res.Restarts, r)
	}
	return res, nil
}

// start starts an operator and measures it from the process's start until
// it is idle with at least minReconciles reconciles run, into p (its CPU
// is the process's since it started; p.Progress counts its reconciles).
// The caller stops the operator.
func (h *harness) start(ctx context.Context, name string, cmd Command, label string, minReconciles int, p *Phase) (*Operator, error) {
	m, err := h.mark(ctx, nil)
	if err != nil {
		return nil, err
	}
	var op *Operator
	p.Server, err = h.window(ctx, func() error {
		start := time.Now()
		if op, err = StartOperator(ctx, name, cmd, h.upstream, h.cfg.WorkDir, h.cfg.ProfileDir != ""); err != nil {
			return err
		}
		stop := h.profile(ctx, op, label)
		defer stop()
		_, err := op.WaitQuiet(ctx, float64(minReconciles), h.cfg.QuietFor, h.cfg.Timeout, func(s OperatorStats) {
			p.Progress = record(p.Progress, Sample{At: time.Since(start), N: int(s.Reconciles)})
		})
		p.Elapsed = time.Since(start) - h.cfg.QuietFor
		return err
	})
	if err != nil {
		if op != nil {
			op.Stop()
		}
		return nil, fmt.Errorf("%s operator, %s: %w", name, label, err)
	}
	// The process's reads of its metrics so far are taken out at the cost
	// measured now, on the idle process.
	at, err := op.ReadCPU()
	if err == nil {
		err = op.CalibrateScrapes(ctx, 100)
	}
	if err == nil {
		err = h.since(ctx, op, m, p)
	}
	if err != nil {
		op.Stop()
		return nil, err
	}
	p.CPU = max(0, at.CPU-time.Duration(at.Scrapes)*op.ScrapeCPU)
	p.CPUScrapes = at.Scrapes
	h.cfg.Logf("%s: %s: idle after %s (%d reconciles, %d requests, %d mutating, %s CPU)", name, label,
		p.Elapsed.Round(time.Millisecond), p.Reconciles, p.Client.Total(), p.Client.Mutating(), p.CPU)
	return op, nil
}

// restartOver starts the operator over the converged fleet in
// FleetNamespace, twice when it takes the fleet over from another
// operator, and reads its memory after the (last) start.
func (h *harness) restartOver(ctx context.Context, name string, cmd Command, takeover bool) (Restart, error) {
	r := Restart{Name: name, Fleet: "reconcilekit"}
	gens, err := h.generations(ctx, FleetNamespace)
	if err != nil {
		return r, err
	}
	if takeover {
		h.cfg.Logf("%s: taking the fleet over", name)
		op, err := h.start(ctx, name, cmd, "takeover", h.cfg.N, &r.Takeover)
		if err != nil {
			return r, err
		}
		op.Stop()
	}
	op, err := h.restart(ctx, name, cmd, &r)
	if err != nil {
		return r, err
	}
	defer op.Stop()
	r.Rolled, err = h.rolled(ctx, FleetNamespace, gens)
	return r, err
}

// restart restarts the operator (r.Restart) and reads its memory. The
// caller stops the operator.
func (h *harness) restart(ctx context.Context, name string, cmd Command, r *Restart) (*Operator, error) {
	h.cfg.Logf("%s: restarting over %d converged WebApps", name, h.cfg.N)
	op, err := h.start(ctx, name, cmd, "restart", h.cfg.N, &r.Restart)
	if err != nil {
		return nil, err
	}
	h.cfg.Logf("%s: memory with %d WebApps (waiting up to %s for a GC cycle)", name, h.cfg.N, h.cfg.GCWait)
	if r.Memory, err = op.Memory(ctx, h.cfg.GCWait); err != nil {
		op.Stop()
		return nil, err
	}
	return op, nil
}

// ownFleet has the operator converge a fleet of its own from zero, restart
// over it, and delete it.
func (h *harness) ownFleet(ctx context.Context, name string, cmd Command) (Restart, error) {
	r := Restart{Name: name, Fleet: "own"}
	// Not bench.Run's "bench-<name>": on envtest (no namespace controller)
	// a namespace Run deleted stays Terminating in the same API server.
	ns := FleetNamespace + "-" + name
	if err := h.ensureNamespace(ctx, ns); err != nil {
		return r, err
	}
	h.cfg.Logf("%s: starting the operator", name)
	var startup Phase
	op, err := h.start(ctx, name, cmd, "startup", 0, &startup)
	if err != nil {
		return r, err
	}
	h.cfg.Logf("%s: converging a fleet of its own, %d WebApps", name, h.cfg.N)
	r.Converge, err = h.converge(ctx, op, ns)
	op.Stop()
	if err != nil {
		return r, fmt.Errorf("%s operator: %w", name, err)
	}
	gens, err := h.generations(ctx, ns)
	if err != nil {
		return r, err
	}
	if op, err = h.restart(ctx, name, cmd, &r); err != nil {
		return r, err
	}
	if r.Rolled, err = h.rolled(ctx, ns, gens); err != nil {
		op.Stop()
		return r, err
	}
	var left int
	var objects map[string]int
	var collected time.Duration
	return r, h.deleteFleet(ctx, op, ns, &Phase{}, &left, &objects, &collected)
}

// deleteFleet deletes every WebApp in ns with op running (into p), stops
// op, checks the route registry (*registryLeft) and, on a cluster with a
// garbage collector, waits until the objects the WebApps owned are gone
// (*left: what remained at the deadline; *collected: how long it took),
// then deletes ns.
func (h *harness) deleteFleet(ctx context.Context, op *Operator, ns string, p *Phase, registryLeft *int, left *map[string]int, collected *time.Duration) error {
	h.cfg.Logf("%s: deleting %d WebApps", op.Name, h.cfg.N)
	var err error
	*p, err = h.delete(ctx, op, ns)
	op.Stop()
	if err != nil {
		return fmt.Errorf("%s operator: %w", op.Name, err)
	}
	h.cfg.Logf("%s: %d WebApps finalized in %s (%d requests, %d mutating)", op.Name, h.cfg.N, p.Elapsed.Round(time.Millisecond),
		p.Client.Total(), p.Client.Mutating())
	reg, err := h.registry(ctx, ns)
	if err != nil {
		return err
	}
	if *registryLeft = reg.Entries; reg.Entries > 0 {
		h.cfg.Logf("%s: the route registry still holds %d entries of deleted WebApps", op.Name, reg.Entries)
	}
	if h.cfg.ControllerManager {
		start := time.Now()
		err := pollEvery(ctx, h.readyInterval(), h.cfg.Timeout, func() (bool, error) {
			counts, err := h.objectsIn(ctx, ns)
			*left = counts
			total := 0
			for _, n := range counts {
				total += n
			}
			return err == nil && total == 0, err
		})
		*collected = time.Since(start)
		if err != nil {
			return fmt.Errorf("waiting for the garbage collector to remove the fleet's objects (%v left): %w", *left, err)
		}
		h.cfg.Logf("%s: the fleet's Deployments, ReplicaSets, Pods and Services were collected in %s", op.Name, collected.Round(time.Millisecond))
	}
	return h.deleteNamespaces(ctx, ns)
}

// leftKinds are the objects a WebApp owns, directly or not, that the
// garbage collector removes after it.
var leftKinds = []struct {
	name string
	gvk  schema.GroupVersionKind
}{
	{"Deployments", appsv1.SchemeGroupVersion.WithKind("DeploymentList")},
	{"ReplicaSets", appsv1.SchemeGroupVersion.WithKind("ReplicaSetList")},
	{"Pods", corev1.SchemeGroupVersion.WithKind("PodList")},
	{"Services", corev1.SchemeGroupVersion.WithKind("ServiceList")},
	{"WebApps", schema.GroupVersionKind{Group: "apps.example.com", Version: "v1", Kind: "WebAppList"}},
}

// objectsIn counts the objects of leftKinds in ns (metadata only).
func (h *harness) objectsIn(ctx context.Context, ns string) (map[string]int, error) {
	counts := map[string]int{}
	for _, k := range leftKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.gvk)
		if err := h.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", k.name, ns, err)
		}
		counts[k.name] = len(list.Items)
	}
	return counts, nil
}

// generations reads the generation of every Deployment in ns (metadata
// only).
func (h *harness) generations(ctx context.Context, ns string) (map[string]int64, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err := h.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the Deployments in %s: %w", ns, err)
	}
	gens := make(map[string]int64, len(list.Items))
	for _, d := range list.Items {
		gens[d.Name] = d.Generation
	}
	return gens, nil
}

// rolled counts the Deployments in ns whose generation is no longer the
// one in before, or that are new.
func (h *harness) rolled(ctx context.Context, ns string, before map[string]int64) (int, error) {
	now, err := h.generations(ctx, ns)
	n := 0
	for name, g := range now {
		if b, ok := before[name]; !ok || b != g {
			n++
		}
	}
	return n, err
}
