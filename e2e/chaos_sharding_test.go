//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/reconcilekit/reconcilekit/sharding"
)

// The sharding scenarios (issue 31) run the WebApp operator as three
// sharded replicas (--sharding), each reaching the apiserver through a
// proxy of its own that records its writes (chaos_sharding.go), while the
// workload creates, updates and deletes WebApps: (8) a replica SIGKILLed,
// (9) scaled from 1 to 3 and back to 1, (10) a replica partitioned from
// the apiserver. Besides the shared invariants, checkShards: no two
// replicas wrote one WebApp in overlapping ownership periods, no range
// unowned longer than maxUnowned. And, when the cluster keeps an audit
// log (E2E_AUDIT), the API server's verdict (chaos_audit.go): every
// request of a replica for a WebApp, its objects or its registry entry
// inside a window its Lease granted for the WebApp's range, no two
// replicas' windows of a range overlapping, and at least what the
// scenario claims to exercise (its exercise: handoffs, handoffs with a
// pass of the old owner in flight, writes within a second of a handoff,
// takeovers of an expired Lease's ranges), each scenario's doc says how
// much and why.
//
// Replica "a" serves the webhooks (only one process can bind the port the
// webhook configurations name), elects itself leader for the certificates
// and the storage version migration, and is never the one faulted: the
// faults test the sharding, scenarios 5 and 6 the leader and the webhooks.
// The others run without leader election, webhooks or the migration.

// shardedFleet is a scenario's sharded replicas.
type shardedFleet struct {
	sc       *scenario
	cfg      *envconf.Config
	recorder writeRecorder

	// start is when the scenario began: the audit check judges the
	// requests since, and claims is what it must find exercised.
	start  time.Time
	claims exercise

	mu       sync.Mutex
	replicas []*shardReplica
	// faults are when a replica was killed or cut off: a range's wait for
	// an owner restarts at each (see checkShards).
	faults []time.Time
}

// fault records that a replica was killed or cut off now.
func (sf *shardedFleet) fault() {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.faults = append(sf.faults, time.Now())
}

// shardReplica is one incarnation and its proxy; cuts are the partitions
// it went through.
type shardReplica struct {
	inc   *incarnation
	proxy *faultProxy
	cuts  []window
}

// newShardedFleet grants the operator's role what --sharding needs
// (config/local-sharded) and stops the primary; claims is what the
// scenario must be seen to exercise.
func newShardedFleet(ctx context.Context, t *testing.T, cfg *envconf.Config, sc *scenario, claims exercise) *shardedFleet {
	t.Helper()
	start := time.Now()
	if err := operator.install(ctx, filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "config", "local-sharded")); err != nil {
		t.Fatal(err)
	}
	if err := createDatabase(ctx, sc.c, sc.ns); err != nil {
		t.Fatal(err)
	}
	if err := operator.primary.stop(); err != nil {
		t.Fatal(err)
	}
	sf := &shardedFleet{sc: sc, cfg: cfg, start: start, claims: claims}
	sc.ownership = sf.check
	return sf
}

// spawn starts a replica behind a new recording proxy; the first one
// serves the webhooks and leads.
func (sf *shardedFleet) spawn(ctx context.Context, role string) (*shardReplica, error) {
	proxy, err := startFaultProxy(sf.cfg.Client().RESTConfig(), sf.sc.res.Seed, 0)
	if err != nil {
		return nil, err
	}
	proxy.recorder = &sf.recorder
	o := instanceOptions{role: role, sharding: true, proxy: proxy,
		args: []string{"--migrate-storage=false"}}
	if role == "a" {
		o.webhooks, o.leaderElect, o.args = true, true, nil
	}
	inc, err := sf.sc.fleet.spawn(ctx, o)
	if err != nil {
		_ = proxy.Close()
		return nil, err
	}
	r := &shardReplica{inc: inc, proxy: proxy}
	sf.mu.Lock()
	sf.replicas = append(sf.replicas, r)
	sf.mu.Unlock()
	return r, nil
}

// spawnThree starts replicas a, b and c and waits until they own every
// range between them.
func (sf *shardedFleet) spawnThree(ctx context.Context, t *testing.T) []*shardReplica {
	t.Helper()
	var live []*shardReplica
	for _, role := range []string{"a", "b", "c"} {
		r, err := sf.spawn(ctx, role)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, r)
	}
	sf.awaitOwners(ctx, t, live...)
	return live
}

// close stops the proxies (the replicas stop in restorePrimaryStep).
func (sf *shardedFleet) close() {
	for _, r := range sf.all() {
		_ = r.proxy.Close()
	}
}

// serverFilters is what a replica logs when the API server filters its
// cache by shard (sharding.Member).
const serverFilters = "the API server filters this replica's cache by shard"

func (sf *shardedFleet) all() []*shardReplica {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return append([]*shardReplica(nil), sf.replicas...)
}

// ownerships reads every replica's ownership periods from its log.
func (sf *shardedFleet) ownerships() ([]ownership, error) {
	var out []ownership
	for _, r := range sf.all() {
		log, err := readRangeLog(r.inc.p.logPath)
		if err != nil {
			return nil, err
		}
		out = append(out, ownerships(r.inc.p.name, log, r.inc.end(), r.cuts)...)
	}
	return out, nil
}

// awaitOwners waits until every range is owned, each by one of want, and
// each of want owns some.
func (sf *shardedFleet) awaitOwners(ctx context.Context, t *testing.T, want ...*shardReplica) {
	t.Helper()
	names := map[string]bool{}
	for _, r := range want {
		names[r.inc.p.name] = true
	}
	// A safety net, not the bound under test (checkShards holds every
	// range to maxUnowned): the replicas just started must also sync
	// their caches, which a loaded machine slows down.
	eventually(ctx, t, maxUnowned+2*time.Minute, fmt.Sprintf("the ranges owned by %d replicas", len(want)), func(context.Context) (bool, string, error) {
		owned, err := sf.ownerships()
		if err != nil {
			return false, "", err
		}
		by := map[int]string{}
		count := map[string]int{}
		for _, o := range owned {
			if o.to.IsZero() {
				by[o.rng] = o.replica
				count[o.replica]++
			}
		}
		state := fmt.Sprintf("%d of %d ranges owned: %v", len(by), sharding.DefaultRanges, count)
		if len(by) < sharding.DefaultRanges {
			return false, state, nil
		}
		for name := range names {
			if count[name] == 0 {
				return false, state, nil
			}
		}
		for _, owner := range by {
			if !names[owner] {
				return false, state, nil
			}
		}
		return true, state, nil
	})
}

// check is the scenario's ownership invariant (checkShards, from the
// proxies' writes and the replicas' logs) and, beside it, the API server's
// verdict (auditCheck), with their figures in the report's notes.
func (sf *shardedFleet) check() []string {
	owned, err := sf.ownerships()
	if err != nil {
		return []string{err.Error()}
	}
	sf.mu.Lock()
	faults := slices.Clone(sf.faults)
	sf.mu.Unlock()
	res := checkShards(sf.recorder.all(), owned, faults, time.Now())
	if harness.opts.Provider == ProviderKwok {
		// The suite's kwok cluster runs with the ShardedListAndWatch
		// gate: each replica's cache must be filtered by the API server.
		for _, r := range sf.all() {
			if logs, err := r.inc.p.logs(); err == nil && !strings.Contains(logs, serverFilters) {
				res.violations = append(res.violations, r.inc.p.name+": the API server did not filter its cache by shard (no log line "+serverFilters+")")
			}
		}
	}
	sf.sc.res.Notes = fmt.Sprintf("%d writes to WebApps and their objects by %d replicas, %d range handoffs, no range unowned longer than %s "+
		"after the last fault in its wait (at most %s allowed; %s from its first owner's end)",
		res.writes, res.writers, res.handoffs, res.maxUnowned.Round(100*time.Millisecond), maxUnowned, res.maxGap.Round(100*time.Millisecond))
	violations, note := sf.auditCheck()
	sf.sc.res.Notes += note
	return append(res.violations, violations...)
}

// auditCheck is the API server's verdict on the replicas (chaos_audit.go),
// beside checkShards: its violations, each prefixed "audit:", and a note
// for the report. Without an audit log it judges nothing and says so.
func (sf *shardedFleet) auditCheck() ([]string, string) {
	path := harness.AuditLog()
	if path == "" {
		return nil, "; not judged from the API server's audit log: the cluster keeps none (E2E_AUDIT=1, on the kwok provider)"
	}
	events, skipped, err := readAuditLog(path)
	if err != nil {
		return []string{"audit: " + err.Error()}, ""
	}
	var replicas []string
	for _, r := range sf.all() {
		replicas = append(replicas, r.inc.p.name)
	}
	v := newAuditJudge(events, shardGroup, operatorNamespace, sharding.DefaultRanges, time.Now()).judge(replicas, sf.start)
	var out []string
	for _, msg := range append(v.violations, v.shortOf(sf.claims)...) {
		out = append(out, "audit: "+msg)
	}
	sf.sc.res.Audit = &auditFigures{Requests: v.requests, Unplaced: v.unplaced, Windows: v.windows, Handoffs: v.handoffs,
		InFlight: v.inFlight, NearWrites: v.nearWrites, Takeovers: v.takeovers, Violations: len(out)}
	return out, fmt.Sprintf("; the API server's audit log: %d requests of the replicas judged (%d in no range), %d windows, "+
		"%d handoffs (%d with a pass of the old owner in flight, %d takeovers of an expired Lease's ranges), %d writes within a second "+
		"of a handoff, %d violations%s", v.requests, v.unplaced, v.windows, v.handoffs, v.inFlight, v.takeovers, v.nearWrites, len(out),
		skippedNote(skipped))
}

// skippedNote says how many lines of the audit log were no event.
func skippedNote(skipped int) string {
	if skipped == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d lines of the log were no JSON event and were skipped)", skipped)
}

// runWorkload starts the scenario's workload of creates, updates and
// deletes; the channel answers when it is done.
func (sc *scenario) runWorkload(ctx context.Context, apps int) (schedule, *runner, chan error) {
	s := newSchedule(sc.res.Seed, apps)
	r := sc.runner()
	done := make(chan error, 1)
	go func() { done <- r.run(ctx, s) }()
	return s, r, done
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// shardTeardown stops the replicas and their proxies, restores the
// primary and the role without the sharding grant (config/local).
func shardTeardown(sf **shardedFleet) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		ctx = restorePrimaryStep(ctx, t, cfg)
		if *sf != nil {
			(*sf).close()
		}
		if err := operator.install(ctx, filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "config", "local")); err != nil {
			t.Errorf("restoring config/local: %v", err)
		}
		return ctx
	}
}

// chaosShardKill is scenario 8: three sharded replicas under load, one of
// them SIGKILLed and replaced, again and again; the others take its ranges
// once its lease expires.
//
// It claims (shardKillClaims) at least one handoff and one takeover: the
// first replica killed owned ranges (spawnThree waited for that), and they
// go to the others once its Lease lapses. The long form, whose kills and
// replacements' joins move ranges while 300 WebApps are written, claims
// one handoff with a pass of the old owner in flight (a survivor draining
// a range it hands to a replacement) and one write within a second of a
// handoff; the short form's 12 WebApps over 64 ranges make either chance.
func chaosShardKill() features.Feature {
	var sf *shardedFleet
	return features.New("chaos 8: a sharded replica SIGKILLed under load").
		WithLabel("area", "chaos").
		Assess("the survivors take its ranges; no WebApp written by two owners", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc := newScenario(ctx, t, cfg, 8, "3 sharded replicas, one SIGKILLed under load and replaced", 8)
			sf = newShardedFleet(ctx, t, cfg, sc, shardKillClaims())
			live := sf.spawnThree(ctx, t)
			s, r, done := sc.runWorkload(ctx, appsFor(12, 300))
			var lastFault time.Time
			for i := range size(2, 6) {
				pause(ctx, sc.jitter(2*time.Second, 6*time.Second))
				k := 1 + sc.rng.IntN(len(live)-1) // never a, the webhooks
				live[k].inc.kill()
				sf.fault()
				lastFault = time.Now()
				sc.res.Faults++
				next, err := sf.spawn(ctx, fmt.Sprintf("r%d", i+1))
				if err != nil {
					t.Fatal(err)
				}
				live[k] = next
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			sf.awaitOwners(ctx, t, live...)
			sc.res.FaultsWhat = "SIGKILLs"
			sc.res.Ops = r.issued.Load()
			sc.converge(ctx, t, s.final, lastFault)
			return ctx
		}).
		Teardown(shardTeardown(&sf)).
		Feature()
}

// shardKillClaims is what scenario 8 claims to exercise.
func shardKillClaims() exercise {
	return exercise{handoffs: 1, takeovers: 1, inFlight: size(0, 1), nearWrites: size(0, 1)}
}

// chaosShardScale is scenario 9: one sharded replica under load, two more
// join, then both leave gracefully (draining their passes); no WebApp is
// written by two owners during the handoffs.
//
// It claims (shardScaleClaims) four handoffs a round: each join gives
// both newcomers ranges of a's, each leave gives them back (awaitOwners
// waits for both). The long form's three rounds under a 300-WebApp
// workload claim one handoff with a pass in flight (a drained range is
// what the leave waits for) and one write within a second of a handoff;
// the short form's 12 WebApps make them chance.
func chaosShardScale() features.Feature {
	var sf *shardedFleet
	return features.New("chaos 9: sharded replicas scaled 1 -> 3 -> 1 under load").
		WithLabel("area", "chaos").
		Assess("ranges move on each join and leave; no WebApp written by two owners", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc := newScenario(ctx, t, cfg, 9, "sharded replicas scaled 1 -> 3 -> 1 under load", 9)
			sf = newShardedFleet(ctx, t, cfg, sc, shardScaleClaims())
			a, err := sf.spawn(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			sf.awaitOwners(ctx, t, a)
			s, r, done := sc.runWorkload(ctx, appsFor(12, 300))
			var lastFault time.Time
			for i := range size(1, 3) {
				pause(ctx, sc.jitter(time.Second, 4*time.Second))
				var joined []*shardReplica
				for _, role := range []string{"b", "c"} {
					j, err := sf.spawn(ctx, fmt.Sprintf("%s%d", role, i+1))
					if err != nil {
						t.Fatal(err)
					}
					joined = append(joined, j)
					sc.res.Faults++
				}
				sf.awaitOwners(ctx, t, a, joined[0], joined[1])
				pause(ctx, sc.jitter(time.Second, 4*time.Second))
				var wg sync.WaitGroup
				for _, j := range joined {
					wg.Go(func() {
						if err := j.inc.p.stop(); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
				lastFault = time.Now()
				sc.res.Faults += len(joined)
				sf.awaitOwners(ctx, t, a)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			sc.res.FaultsWhat = "joins and graceful leaves"
			sc.res.Ops = r.issued.Load()
			sc.converge(ctx, t, s.final, lastFault)
			return ctx
		}).
		Teardown(shardTeardown(&sf)).
		Feature()
}

// shardScaleClaims is what scenario 9 claims to exercise.
func shardScaleClaims() exercise {
	return exercise{handoffs: 4 * size(1, 3), inFlight: size(0, 1), nearWrites: size(0, 1)}
}

// shardPartitionClaims is what scenario 10 claims to exercise.
func shardPartitionClaims() exercise {
	return exercise{handoffs: size(1, 3), takeovers: size(1, 3), nearWrites: size(0, 1)}
}

// chaosShardPartition is scenario 10: three sharded replicas, one cut off
// from the apiserver (its proxy holds every new request, its open watches
// still flow) for 25 s, past its lease, while every WebApp is updated. It
// goes on starting passes for its ranges until its renew deadline; their
// writes are held. At the deadline it fences itself (cancels them: the
// proxy drops them), the others take its ranges and apply the updates.
// Healed, it rejoins. Without the fencing, its held writes would reach the
// apiserver at the heal, after the handoff, and checkShards reports them.
//
// It claims (shardPartitionClaims) a takeover each round: the cut replica
// owned ranges (awaitOwners) and the others take them once its Lease
// lapses. The long form claims one write within a second of a handoff
// (the new owner applies the updates made during the cut as soon as it
// owns the range). It claims no handoff with a pass in flight: the cut
// replica's last requests are held by the partition and never reach the
// API server, which is the point.
func chaosShardPartition() features.Feature {
	var sf *shardedFleet
	return features.New("chaos 10: a sharded replica partitioned from the API server").
		WithLabel("area", "chaos").
		Assess("it fences itself, the others take over, it rejoins; no WebApp written by two owners", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc := newScenario(ctx, t, cfg, 10, "3 sharded replicas, one partitioned from the API server for 25 s while every WebApp is updated", 10)
			sf = newShardedFleet(ctx, t, cfg, sc, shardPartitionClaims())
			live := sf.spawnThree(ctx, t)
			s, r, done := sc.runWorkload(ctx, appsFor(12, 300))
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			final := s.final
			var lastFault time.Time
			for round := range size(1, 3) {
				k := 1 + sc.rng.IntN(len(live)-1)
				cut := live[k]
				cut.proxy.partition()
				sf.fault()
				from := time.Now()
				// Its ownership periods end here, whatever its log says
				// later: what it writes after the heal needs a new one.
				sf.mu.Lock()
				cut.cuts = append(cut.cuts, window{from: from})
				sf.mu.Unlock()
				// Every live WebApp updated: the cut replica's passes for
				// its share begin and block on the partition.
				var up schedule
				up.final = map[string]appModel{}
				for app, m := range final {
					if !m.Deleted {
						m.Image = fmt.Sprintf("registry.example.com/chaos/%s:p%d", app, round+1)
						up.ops = append(up.ops, chaosOp{kind: opUpdate, app: app, spec: m})
					}
					up.final[app] = m
				}
				if err := r.run(ctx, up); err != nil {
					t.Fatal(err)
				}
				final = up.final
				var others []*shardReplica
				for i, o := range live {
					if i != k {
						others = append(others, o)
					}
				}
				sf.awaitOwners(ctx, t, others...)
				pause(ctx, time.Until(from.Add(25*time.Second)))
				cut.proxy.heal()
				sf.mu.Lock()
				cut.cuts[len(cut.cuts)-1].to = time.Now()
				sf.mu.Unlock()
				lastFault = time.Now()
				sc.res.Faults++
				if !cut.inc.p.running() {
					t.Fatalf("%s exited during the partition; end of its log:\n%s", cut.inc.p.name, tail(cut.inc.p.logPath, 20))
				}
				if cut.proxy.droppedPassRequests.Load() == 0 {
					t.Errorf("no request of a pass of %s was held by the partition: the scenario did not test its fencing", cut.inc.p.name)
				}
				sf.awaitOwners(ctx, t, live...)
			}
			var dropped int64
			for _, c := range live {
				dropped += c.proxy.droppedPassRequests.Load()
			}
			sc.res.FaultsWhat = fmt.Sprintf("partitions (%d requests of passes held, then dropped when the replica fenced itself)", dropped)
			sc.res.Ops = r.issued.Load()
			sc.converge(ctx, t, final, lastFault)
			return ctx
		}).
		Teardown(shardTeardown(&sf)).
		Feature()
}

// TestCheckShards: the ownership invariant on made-up logs and writes.
func TestCheckShards(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	app := types.UID("5b0c2a1e-0000-4000-8000-000000000001")
	rng := sharding.RangeOf(app, sharding.DefaultRanges)
	a := ownerships("a", []rangeLog{{at: at(0), rng: rng, acquired: true}, {at: at(10), rng: rng}}, time.Time{}, nil)
	b := ownerships("b", []rangeLog{{at: at(12), rng: rng, acquired: true}}, at(30), nil)
	full := func(extra ...ownership) []ownership {
		out := append(append([]ownership(nil), a...), b...)
		for r := range sharding.DefaultRanges {
			if r != rng {
				out = append(out, ownership{replica: "c", rng: r, from: at(0)})
			}
		}
		return append(out, extra...)
	}
	w := func(replica string, sent, answered float64) shardWrite {
		return shardWrite{replica: replica, app: app, what: "PATCH webapps/x", sent: at(sent), answered: at(answered)}
	}

	res := checkShards([]shardWrite{w("a", 1, 1.1), w("a", 9.8, 9.9), w("b", 12.1, 12.2)}, full(), nil, at(30))
	assert.Empty(t, res.violations)
	assert.Equal(t, 3, res.writes)
	assert.Equal(t, 1, res.handoffs)
	assert.Equal(t, 2*time.Second, res.maxUnowned)

	res = checkShards([]shardWrite{w("a", 11, 11.1)}, full(), nil, at(30))
	assert.Len(t, res.violations, 1, "a wrote after it released the range")
	res = checkShards([]shardWrite{w("b", 9, 9.1)}, full(), nil, at(30))
	assert.Len(t, res.violations, 2, "b wrote before it acquired the range, while a owned it")
	res = checkShards(nil, full(ownership{replica: "c", rng: rng, from: at(5), to: at(6)}), nil, at(30))
	assert.Len(t, res.violations, 1, "c owned the range while a did")

	// A partition cuts a's period at its start; a write delivered at the
	// heal is outside it.
	cutA := ownerships("a", []rangeLog{{at: at(0), rng: rng, acquired: true}}, time.Time{}, []window{{from: at(5), to: at(30)}})
	assert.Equal(t, at(5), cutA[0].to)
	res = checkShards([]shardWrite{w("a", 30, 30.1)}, append(cutA, full()[2:]...), nil, at(40))
	assert.NotEmpty(t, res.violations, "a write held by the partition and delivered at the heal")

	// A range left unowned too long.
	res = checkShards(nil, full(), nil, at(30).Add(maxUnowned+time.Second))
	assert.Len(t, res.violations, 1, "range unowned after b ended")
	// Unless a replica died during the wait: the wait counts from then
	// (the range may have been assigned to it), but only up to the bound.
	res = checkShards(nil, full(), []time.Time{at(25), at(31)}, at(31).Add(maxUnowned-time.Second))
	assert.Empty(t, res.violations, "a fault at 31 s restarts the wait")
	assert.Equal(t, maxUnowned-time.Second, res.maxUnowned)
	assert.Equal(t, maxUnowned, res.maxGap, "from the end of b, at 30 s")
	res = checkShards(nil, full(), []time.Time{at(31)}, at(31).Add(maxUnowned+time.Second))
	assert.Len(t, res.violations, 1, "unowned too long after the last fault")
	res = checkShards(nil, full(), []time.Time{at(20)}, at(30).Add(maxUnowned+time.Second))
	assert.Len(t, res.violations, 1, "a fault before the wait began does not count")

	// A period begins at the acquiring round's time (ownedSince), before
	// the line that says so was written; it ends at the release line.
	path := filepath.Join(t.TempDir(), "replica.log")
	lines := fmt.Sprintf(`{"level":"info","ts":"2026-12-05T12:00:01.4Z","msg":"range acquired","range":%[1]d,"waited":"1s","ownedSince":"2026-12-05T12:00:01Z"}
{"level":"info","ts":"2026-12-05T12:00:05Z","msg":"something else","range":%[1]d}
{"level":"info","ts":"2026-12-05T12:00:09Z","msg":"range released","range":%[1]d}
`, rng)
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := readRangeLog(path)
	assert.NoError(t, err)
	assert.Equal(t, []rangeLog{{at: at(1), rng: rng, acquired: true}, {at: at(9), rng: rng}}, log)
	// A write sent between the round and its line is the owner's.
	o := ownerships("a", log, time.Time{}, nil)
	res = checkShards([]shardWrite{{replica: "a", app: app, what: "PATCH webapps/x", sent: at(1.2), answered: at(1.3)}}, o, nil, at(9))
	for _, v := range res.violations {
		assert.NotContains(t, v, "did not own", "a write after ownedSince and before the acquired line")
	}
	res = checkShards([]shardWrite{{replica: "a", app: app, what: "PATCH webapps/x", sent: at(0.9), answered: at(1.0)}}, o, nil, at(9))
	assert.Len(t, res.violations, 1, "a write sent before the acquiring round")
	if err := os.WriteFile(path, []byte(`{"ts":"2026-12-05T12:00:01Z","msg":"range acquired","range":3}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = readRangeLog(path)
	assert.ErrorContains(t, err, "without ownedSince", "a line of an operator older than the check")
}
