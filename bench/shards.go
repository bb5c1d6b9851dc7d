package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/sharding"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// ShardsResult is what a sharding run (RunShards) measured: reconcilekit's
// WebApp operator converges N WebApps with one sharded replica, then, for
// each replica count, that many sharded replicas (--sharding) start together
// over the converged fleet.
type ShardsResult struct {
	Config   Config
	Converge Phase
	Sharded  []ShardedStart
}

// ShardedStart is Replicas sharded replicas started together over the
// converged fleet, measured until every WebApp was reconciled and every
// replica idle.
type ShardedStart struct {
	Replicas int
	// Elapsed is from the first replica's start until all were idle.
	Elapsed time.Duration
	// ServerFilters reports whether the API server filtered the replicas'
	// WebApp lists and watches by shard (feature gate ShardedListAndWatch).
	ServerFilters bool
	Each          []ShardReplica
}

// ShardReplica is one replica's figures at the end of a ShardedStart.
type ShardReplica struct {
	Identity string
	// Ranges is how many hash ranges its Lease claimed at the end, and
	// WebApps how many of the fleet's WebApps are in them: what its cache
	// holds.
	Ranges, WebApps int
	Reconciles      int
	// Client is every request it sent, its Lease's included.
	Client Counts
	CPU    time.Duration
	Memory Memory
}

// shardGroup is the WebApp operator's sharding group (main.go).
const shardGroup = "webapp-operator"

// ShardsNamespace holds the WebApps of a sharding run (RunShards): not
// FleetNamespace, which a scale run in the same API server may have left
// terminating (envtest runs no namespace controller).
const ShardsNamespace = "bench-shards"

// RunShards runs the sharding benchmark against the cluster of upstream:
// reconcilekit converges N WebApps in ShardsNamespace, then for each count
// in replicas, that many replicas of it with --sharding start over the
// fleet together and are stopped once measured; reconcilekit deletes the
// fleet. Only Config.Ours is used.
func RunShards(ctx context.Context, upstream *rest.Config, cfg Config, replicas []int) (*ShardsResult, error) {
	h, err := newHarness(ctx, upstream, cfg)
	if err != nil {
		return nil, err
	}
	cfg = h.cfg
	res := &ShardsResult{Config: cfg}
	if err := h.ensureNamespace(ctx, ShardsNamespace); err != nil {
		return nil, err
	}
	// One sharded replica converges and deletes the fleet: an unsharded
	// one would not write the range label on the Deployments and Services
	// (the first sharded start would add it, a write per object).
	single := func(addr string) []string { return append(cfg.Ours(addr), "--sharding", "--shard-identity=single") }
	cfg.Logf("reconcilekit: converging %d WebApps", cfg.N)
	var startup Phase
	op, err := h.start(ctx, "reconcilekit", single, "startup", 0, &startup)
	if err != nil {
		return nil, err
	}
	res.Converge, err = h.converge(ctx, op, ShardsNamespace)
	op.Stop()
	if err != nil {
		return nil, fmt.Errorf("reconcilekit operator: %w", err)
	}
	for _, k := range replicas {
		cfg.Logf("reconcilekit: %d sharded replicas starting over %d WebApps", k, cfg.N)
		s, err := h.shardedStart(ctx, k)
		if err != nil {
			return nil, err
		}
		res.Sharded = append(res.Sharded, s)
	}
	var del Phase
	var registryLeft int
	var left map[string]int
	var collected time.Duration
	if op, err = h.start(ctx, "reconcilekit", single, "takeback", cfg.N, &del); err != nil {
		return nil, err
	}
	if err := h.deleteFleet(ctx, op, ShardsNamespace, &del, &registryLeft, &left, &collected); err != nil {
		return nil, err
	}
	if registryLeft != 0 {
		return nil, fmt.Errorf("the route registry kept %d entries of deleted WebApps", registryLeft)
	}
	return res, nil
}

// shardedStart starts k sharded replicas, waits until they reconciled
// every WebApp between them and are all idle, reads their figures and
// stops them.
func (h *harness) shardedStart(ctx context.Context, k int) (ShardedStart, error) {
	s := ShardedStart{Replicas: k}
	ops := make([]*Operator, 0, k)
	defer func() {
		// Stopped together: a replica leaving hands its ranges to the
		// others, which would reconcile them again.
		var wg sync.WaitGroup
		for _, op := range ops {
			wg.Go(op.Stop)
		}
		wg.Wait()
	}()
	start := time.Now()
	for i := range k {
		id := fmt.Sprintf("k%d-r%d", k, i)
		cmd := func(addr string) []string {
			return append(h.cfg.Ours(addr), "--sharding", "--shard-identity="+id)
		}
		op, err := StartOperator(ctx, "reconcilekit-"+id, cmd, h.upstream, h.cfg.WorkDir, false)
		if err != nil {
			return s, err
		}
		ops = append(ops, op)
	}
	if err := h.waitAllQuiet(ctx, ops); err != nil {
		return s, fmt.Errorf("%d sharded replicas: %w", k, err)
	}
	s.Elapsed = time.Since(start) - h.cfg.QuietFor
	claims, err := h.claims(ctx)
	if err != nil {
		return s, err
	}
	perRange, err := h.webAppsPerRange(ctx)
	if err != nil {
		return s, err
	}
	s.Each = make([]ShardReplica, k)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Go(func() {
			r := &s.Each[i]
			r.Identity = fmt.Sprintf("k%d-r%d", k, i)
			for _, rng := range claims[shardGroup+"-"+r.Identity] {
				r.Ranges++
				r.WebApps += perRange[rng]
			}
			st, err := op.Stats(ctx)
			if err != nil {
				errs[i] = err
				return
			}
			r.Reconciles = int(st.Reconciles)
			r.Client = op.Counter.Snapshot()
			cpu, err := op.ReadCPU()
			if err != nil {
				errs[i] = err
				return
			}
			r.CPU = cpu.CPU
			r.Memory, errs[i] = op.Memory(ctx, h.cfg.GCWait)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return s, err
		}
	}
	s.ServerFilters, err = sharding.ServerFilters(ctx, h.c, SystemNamespace)
	h.cfg.Logf("reconcilekit: %d sharded replicas idle after %s", k, s.Elapsed.Round(time.Millisecond))
	return s, err
}

// waitAllQuiet waits until the replicas own every range between them, and
// none of them ran a reconcile or sent a request (besides its Lease
// renewals) for QuietFor.
func (h *harness) waitAllQuiet(ctx context.Context, ops []*Operator) error {
	last := make([]string, len(ops))
	var since time.Time
	return poll(ctx, h.cfg.Timeout, func() (bool, error) {
		owned, busy := 0.0, false
		for i, op := range ops {
			st, err := op.Stats(ctx)
			if err != nil {
				return false, nil //nolint:nilerr // metrics not served yet: poll again
			}
			owned += st.RangesOwned
			now := fmt.Sprint(st.Reconciles, op.Counter.Snapshot().Without("leases").Total())
			if st.Busy > 0 || op.Counter.InFlight() > 0 || now != last[i] {
				busy = true
			}
			last[i] = now
		}
		if busy || owned < sharding.DefaultRanges {
			since = time.Now()
			return false, nil
		}
		return time.Since(since) >= h.cfg.QuietFor, nil
	})
}

// claims reads the ranges each Lease of the WebApp operator's sharding
// group claims, by Lease name.
func (h *harness) claims(ctx context.Context) (map[string][]int, error) {
	var leases coordinationv1.LeaseList
	if err := h.c.List(ctx, &leases, client.InNamespace(SystemNamespace), client.MatchingLabels{sharding.GroupLabel: shardGroup}); err != nil {
		return nil, err
	}
	out := map[string][]int{}
	for _, l := range leases.Items {
		for part := range strings.SplitSeq(l.Annotations["sharding.reconcilekit.io/claims"], ",") {
			if part == "" {
				continue
			}
			first, last, isRun := strings.Cut(part, "-")
			lo, err := strconv.Atoi(first)
			if err != nil {
				return nil, fmt.Errorf("lease %s: claims %q: %w", l.Name, part, err)
			}
			hi := lo
			if isRun {
				if hi, err = strconv.Atoi(last); err != nil {
					return nil, fmt.Errorf("lease %s: claims %q: %w", l.Name, part, err)
				}
			}
			for r := lo; r <= hi; r++ {
				out[l.Name] = append(out[l.Name], r)
			}
		}
	}
	return out, nil
}

// webAppsPerRange counts the fleet's WebApps in each hash range.
func (h *harness) webAppsPerRange(ctx context.Context) (map[int]int, error) {
	var apps webappv1.WebAppList
	if err := h.c.List(ctx, &apps, client.InNamespace(ShardsNamespace)); err != nil {
		return nil, err
	}
	out := map[int]int{}
	for _, a := range apps.Items {
		out[sharding.RangeOf(a.UID, sharding.DefaultRanges)]++
	}
	return out, nil
}
