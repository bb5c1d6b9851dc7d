//go:build e2e

package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/reconcilekit/reconcilekit/internal/kwoknodes"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// The chaos suite (issue 18): each scenario injects one kind of fault while
// a seed-controlled workload creates, updates and deletes WebApps, then
// waits for the shared invariants (invariants.check) to hold and records
// its figures. E2E_CHAOS=long runs the long form (`make chaos`, which also
// sets E2E_CHAOS_REPORT to write docs/reliability.md); the default short
// form (small N, fixed seeds, a few faults) runs in `make test-e2e` so the
// harness cannot rot. E2E_CHAOS_APPS overrides every scenario's number of
// WebApps, E2E_CHAOS_SEED every seed.

// chaosLong reports whether the long form runs.
func chaosLong() bool { return os.Getenv("E2E_CHAOS") == "long" }

// size picks the short or the long form's figure.
func size(short, long int) int {
	if chaosLong() {
		return long
	}
	return short
}

// appsFor is size for a number of WebApps, which E2E_CHAOS_APPS overrides.
func appsFor(short, long int) int {
	if n, err := strconv.Atoi(os.Getenv("E2E_CHAOS_APPS")); err == nil && n > 0 {
		return n
	}
	return size(short, long)
}

func seedFor(fixed uint64) uint64 {
	if s, err := strconv.ParseUint(os.Getenv("E2E_CHAOS_SEED"), 10, 64); err == nil {
		return s
	}
	return fixed
}

// convergeDeadline bounds the wait for the invariants after the last fault.
func convergeDeadline() time.Duration {
	return time.Duration(size(2, 10)) * time.Minute
}

// chaosResult is one scenario's line in docs/reliability.md.
type chaosResult struct {
	Number     int
	Scenario   string
	Seed       uint64
	Apps       int
	Faults     int
	FaultsWhat string // what the faults were
	Ops        int64  // requests the workload and fault injectors issued
	Violations int
	P50, P99   time.Duration
	// AppliedP99 is when the operator's own part of the invariants held
	// (appProgress.applied), RolledOutP99 when the Deployments were rolled
	// out, after the last fault; SinceWriteP99 times convergence from the
	// later of the last fault and each app's last write; WorkloadEnd is
	// the workload's last write, after the last fault (negative: before).
	AppliedP99, RolledOutP99, SinceWriteP99 time.Duration
	WorkloadEnd                             time.Duration
	Restarts                                int
	Notes                                   string
	// Audit is a sharded scenario's verdict from the API server's audit
	// log, nil when it was not judged so.
	Audit *auditFigures
}

// auditFigures are the audit check's figures for the report
// (chaos_audit.go, auditVerdict).
type auditFigures struct {
	Requests, Unplaced, Windows, Handoffs, InFlight, NearWrites, Takeovers, Violations int
}

var (
	chaosMu      sync.Mutex
	chaosResults []chaosResult
)

func recordChaos(r chaosResult) {
	chaosMu.Lock()
	defer chaosMu.Unlock()
	chaosResults = append(chaosResults, r)
}

// scenario is the state one chaos feature shares between its steps.
type scenario struct {
	res   chaosResult
	ns    string
	c     client.Client // the suite's admin client, uncached
	fleet *fleet
	rng   *rand.Rand
	// writes is when the scenario's runners last wrote each app.
	writes writeLog
	// ownership, when set, replaces the leader invariant (the sharding
	// scenarios: shardedFleet.check).
	ownership func() []string
}

func newScenario(ctx context.Context, t *testing.T, cfg *envconf.Config, number int, title string, seed uint64) *scenario {
	t.Helper()
	seed = seedFor(seed)
	// Room for every pod of the largest scenario (up to 3 replicas per
	// WebApp); the short form fits on kwokctl's one node.
	if err := kwoknodes.Ensure(ctx, cfg.Client().RESTConfig(), appsFor(12, 300)*3+20, "chaos-node"); err != nil {
		t.Fatal(err)
	}
	return &scenario{
		res:   chaosResult{Number: number, Scenario: title, Seed: seed},
		ns:    Namespace(ctx, t),
		c:     cfg.Client().Resources().GetControllerRuntimeClient(),
		fleet: &fleet{prefix: "chaos" + strconv.Itoa(number)},
		rng:   rand.New(rand.NewPCG(seed, 0xfa17)),
	}
}

func (sc *scenario) runner() *runner {
	return &runner{c: sc.c, ns: sc.ns, workers: 4, deadline: 3 * time.Minute, writes: &sc.writes}
}

// jitter returns a random duration in [lo, hi) from the scenario's seed.
func (sc *scenario) jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(sc.rng.Int64N(int64(hi-lo)))
}

// converge waits for the invariants after the last fault, checks the
// leaders, records the figures and fails t on any violation.
func (sc *scenario) converge(ctx context.Context, t *testing.T, model map[string]appModel, lastFault time.Time) {
	t.Helper()
	sc.res.Apps = 0
	for _, m := range model {
		if !m.Deleted {
			sc.res.Apps++
		}
	}
	iv := newInvariants(sc.c, sc.ns, model)
	lastWrite, workloadEnd := sc.writes.snapshot()
	conv, err := iv.awaitConvergence(ctx, lastFault, lastWrite, convergeDeadline())
	if err != nil {
		t.Fatalf("checking the invariants: %v", err)
	}
	violations := conv.violations
	var apps webappv1.WebAppList
	if err := sc.c.List(ctx, &apps, client.InNamespace(sc.ns)); err != nil {
		t.Fatalf("listing WebApps: %v", err)
	}
	if sc.ownership != nil {
		violations = append(violations, sc.ownership()...)
	} else {
		violations = append(violations, sc.fleet.checkLeaders(apps.Items)...)
	}
	sc.res.Violations = len(violations)
	sc.res.P50, sc.res.P99 = percentile(conv.perApp, 50), percentile(conv.perApp, 99)
	sc.res.AppliedP99, sc.res.RolledOutP99 = percentile(conv.applied, 99), percentile(conv.rolledOut, 99)
	sc.res.SinceWriteP99 = percentile(conv.sinceWrite, 99)
	if !workloadEnd.IsZero() {
		sc.res.WorkloadEnd = workloadEnd.Sub(lastFault)
	}
	if r := sc.fleet.restarts(); r > sc.res.Restarts {
		sc.res.Restarts = r
	}
	recordChaos(sc.res)
	t.Logf("scenario %d: %d live WebApps, %d faults (%s), %d requests, converged p50 %v p99 %v after the last fault, %d operator restarts, %d violations",
		sc.res.Number, sc.res.Apps, sc.res.Faults, sc.res.FaultsWhat, sc.res.Ops, sc.res.P50, sc.res.P99, sc.res.Restarts, len(violations))
	t.Logf("scenario %d after the last fault: workload's last write %v; operator's part applied p50 %v p99 %v; Deployments rolled out p50 %v p99 %v; converged p99 %v from the later of the last fault and the app's last write",
		sc.res.Number, sc.res.WorkloadEnd.Round(100*time.Millisecond), percentile(conv.applied, 50), sc.res.AppliedP99,
		percentile(conv.rolledOut, 50), sc.res.RolledOutP99, sc.res.SinceWriteP99)
	if sc.res.Notes != "" {
		t.Logf("scenario %d: %s", sc.res.Number, sc.res.Notes)
	}
	for i, v := range violations {
		if i == 20 {
			t.Errorf("... and %d more violations", len(violations)-20)
			break
		}
		t.Errorf("invariant violated: %s", v)
	}
}

// restorePrimaryStep is every chaos feature's teardown: the scenario's own
// instances stop first (one of them may hold the webhook port the primary
// needs), gracefully, so the Lease is released for the primary.
func restorePrimaryStep(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
	operator.mu.Lock()
	others := make([]*operatorProcess, 0, len(operator.processes))
	for _, p := range operator.processes {
		if p != operator.primary {
			others = append(others, p)
		}
	}
	operator.mu.Unlock()
	for _, p := range others {
		if err := p.stop(); err != nil {
			t.Errorf("stopping operator %s: %v", p.name, err)
		}
	}
	if err := operator.restorePrimary(ctx, cfg); err != nil {
		t.Errorf("restoring the primary operator: %v", err)
	}
	return ctx
}

// TestChaos runs the seven scenarios of issue 18 and the three of sharding
// (issue 31), then, with
// E2E_CHAOS_REPORT set, writes their figures as docs/reliability.md.
func TestChaos(t *testing.T) {
	if operator.mode != modeProcess {
		t.Skip("starts, kills and proxies operator processes: needs E2E_OPERATOR=process")
	}
	start := time.Now()
	testenv.Test(t,
		chaosBadInput(),
		chaosWebhookDown(),
		chaosCompetingWriter(),
		chaosCrashLoop(),
		chaosFaultyAPI(),
		chaosAPIServerRestart(),
		chaosLeaderFailover(),
		chaosShardKill(),
		chaosShardScale(),
		chaosShardPartition(),
	)
	if path := os.Getenv("E2E_CHAOS_REPORT"); path != "" {
		if err := writeReliabilityReport(path, chaosResults, time.Since(start)); err != nil {
			t.Errorf("writing %s: %v", path, err)
		} else {
			t.Logf("wrote %s", path)
		}
	}
}

// chaosWebhookDown is scenario 6: with the webhook server down
// (failurePolicy Fail) creates are refused with a message naming the
// webhook, and nothing is half-created; back up, everything is admitted.
func chaosWebhookDown() features.Feature {
	var sc *scenario
	return features.New("chaos 6: the webhook server down").
		WithLabel("area", "chaos").
		Assess("creates are refused with a clear message; nothing is half-created", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc = newScenario(ctx, t, cfg, 6, "webhook server down (failurePolicy Fail)", 6)
			if err := createDatabase(ctx, sc.c, sc.ns); err != nil {
				t.Fatal(err)
			}
			if err := operator.primary.stop(); err != nil {
				t.Fatal(err)
			}
			s := newSchedule(sc.res.Seed, appsFor(10, 300)).creates()
			r := sc.runner()
			for _, op := range s.ops {
				sc.res.Ops++
				err := r.try(ctx, op)
				if err == nil {
					t.Fatalf("create of %s admitted with no webhook server", op.app)
				}
				if !hasAll(err.Error(), `failed calling webhook "mwebapp-v1.kb.io"`, "connection refused") {
					t.Errorf("create of %s refused with %q: want the webhook's name and the cause", op.app, err)
				}
				sc.res.Faults++
			}
			sc.res.FaultsWhat = "creates refused"
			requireEmpty(ctx, t, sc)
			return ctx
		}).
		Assess("back up: every create is admitted at the first attempt and converges", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := operator.primary.start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := operator.waitWebhookServing(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			lastFault := time.Now()
			s := newSchedule(sc.res.Seed, appsFor(10, 300)).creates()
			r := sc.runner()
			if err := r.run(ctx, s); err != nil {
				t.Fatal(err)
			}
			if n := r.refused.Load(); n > 0 {
				t.Errorf("%d creates were refused with the webhook server back up", n)
			}
			sc.res.Ops += r.issued.Load()
			sc.converge(ctx, t, s.final, lastFault)
			return ctx
		}).
		Teardown(restorePrimaryStep).
		Feature()
}

// requireEmpty fails t if the namespace holds any WebApp or anything the
// operator would have created for one.
func requireEmpty(ctx context.Context, t *testing.T, sc *scenario) {
	t.Helper()
	iv := newInvariants(sc.c, sc.ns, map[string]appModel{})
	violations, _, err := iv.check(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range violations {
		t.Errorf("half-created: %s", v)
	}
}
