//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// chaosCrashLoop is scenario 1: the operator SIGKILLed every 1-5 s while
// WebApps are created, updated and deleted in random order. It runs as a
// lone replica without leader election (a killed leader's Lease would
// otherwise keep every successor waiting 15 s; scenario 5 covers that), and
// serves the webhooks, so they go down with it and the workload retries
// its writes as any client of a failing apiserver call would.
func chaosCrashLoop() features.Feature {
	return features.New("chaos 1: the operator SIGKILLed every 1-5 s").
		WithLabel("area", "chaos").
		Assess("the invariants hold after the kills", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc := newScenario(ctx, t, cfg, 1, "operator SIGKILLed every 1-5 s during create/update/delete", 1)
			if err := createDatabase(ctx, sc.c, sc.ns); err != nil {
				t.Fatal(err)
			}
			if err := operator.primary.stop(); err != nil {
				t.Fatal(err)
			}
			crash := instanceOptions{role: "crash", webhooks: true}
			inc, err := sc.fleet.spawn(ctx, crash)
			if err != nil {
				t.Fatal(err)
			}
			s := newSchedule(sc.res.Seed, appsFor(12, 300))
			r := sc.runner()
			done := make(chan error, 1)
			go func() { done <- r.run(ctx, s) }()

			minKills := size(4, 20)
			var lastFault time.Time
			var workloadErr error
			finished := false
			for !finished || sc.res.Faults < minKills {
				select {
				case workloadErr = <-done:
					finished = true
					if workloadErr != nil {
						t.Fatal(workloadErr)
					}
					continue
				case <-time.After(sc.jitter(time.Second, 5*time.Second)):
				}
				inc.kill()
				lastFault = time.Now()
				sc.res.Faults++
				if inc, err = sc.fleet.spawn(ctx, crash); err != nil {
					t.Fatal(err)
				}
			}
			sc.res.FaultsWhat = "SIGKILLs"
			sc.res.Ops = r.issued.Load()
			sc.converge(ctx, t, s.final, lastFault)
			return ctx
		}).
		Teardown(restorePrimaryStep).
		Feature()
}

// chaosLeaderFailover is scenario 5: the leader SIGKILLed while WebApps
// converge; the standby takes the Lease over once it expires and finishes
// them, including deletions made during the fail-over.
//
// The standby serves the webhooks, as the surviving replica of a Deployment
// would (every replica serves them behind the Service; here only one
// process can bind 127.0.0.1:9443). With the webhook server down as well,
// the standby could not finish: its own finalizer writes are UPDATEs the
// webhooks (failurePolicy Fail) intercept; scenario 6 covers that outage.
func chaosLeaderFailover() features.Feature {
	return features.New("chaos 5: leader SIGKILLed under load").
		WithLabel("area", "chaos").
		Assess("the standby finishes the work", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc := newScenario(ctx, t, cfg, 5, "leader SIGKILLed under load, standby finishes", 5)
			if err := createDatabase(ctx, sc.c, sc.ns); err != nil {
				t.Fatal(err)
			}
			if err := operator.primary.stop(); err != nil { // releases the Lease
				t.Fatal(err)
			}
			leader, err := sc.fleet.spawn(ctx, instanceOptions{role: "leader", leaderElect: true})
			if err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, leadTimeout, "the new leader starts its controllers", func(context.Context) (bool, string, error) {
				_, ok := leader.leadStart()
				return ok, "", nil
			})
			standby, err := sc.fleet.spawn(ctx, instanceOptions{role: "standby", webhooks: true, leaderElect: true})
			if err != nil {
				t.Fatal(err)
			}
			if err := operator.waitWebhookServing(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			s := newSchedule(sc.res.Seed, appsFor(20, 200)).creates()
			r := sc.runner()
			if err := r.run(ctx, s); err != nil {
				t.Fatal(err)
			}
			leader.kill()
			lastFault := time.Now()
			sc.res.Faults, sc.res.FaultsWhat = 1, "leader SIGKILL"
			// A fifth of the apps deleted while no one leads.
			deletes := 0
			for _, op := range s.ops {
				if deletes >= len(s.ops)/5 {
					break
				}
				del := chaosOp{kind: opDelete, app: op.app}
				if err := r.do(ctx, del); err != nil {
					t.Fatal(err)
				}
				s.final[op.app] = appModel{Deleted: true}
				deletes++
			}
			sc.res.Ops = r.issued.Load()
			sc.converge(ctx, t, s.final, lastFault)
			if at, ok := standby.leadStart(); !ok || at.Before(lastFault) {
				t.Errorf("the standby did not take over after the kill at %s (its controllers started: %t at %s)", lastFault.Format(time.RFC3339Nano), ok, at.Format(time.RFC3339Nano))
			}
			return ctx
		}).
		Teardown(restorePrimaryStep).
		Feature()
}

// chaosCompetingWriter is scenario 4: another writer edits the WebApps'
// labels and annotations, the owned Deployments' replicas and the route
// registry every 100 ms while the WebApps converge. The operator must
// repair every drift it owns, and nothing the user wrote may be lost.
func chaosCompetingWriter() features.Feature {
	return features.New("chaos 4: a competing writer every 100 ms").
		WithLabel("area", "chaos").
		Assess("every drift is repaired", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc := newScenario(ctx, t, cfg, 4, "competing writer every 100 ms (labels, replicas, registry)", 4)
			if err := createDatabase(ctx, sc.c, sc.ns); err != nil {
				t.Fatal(err)
			}
			s := newSchedule(sc.res.Seed, appsFor(12, 300))
			r := sc.runner()
			done := make(chan error, 1)
			go func() { done <- r.run(ctx, s) }()

			var writes atomic.Int64
			minDuration := time.Duration(size(6, 60)) * time.Second
			start := time.Now()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			finished := false
			for !finished || time.Since(start) < minDuration {
				select {
				case err := <-done:
					finished = true
					if err != nil {
						t.Fatal(err)
					}
				case <-tick.C:
					// Names are drawn in a seeded order; a map's order is not.
					name := fmt.Sprintf("app-%03d", sc.rng.IntN(len(s.final)))
					competingWrite(ctx, sc, name, s.final[name].Deleted, writes.Add(1))
				}
			}
			lastFault := time.Now()
			sc.res.Faults, sc.res.FaultsWhat = int(writes.Load()), "foreign writes"
			sc.res.Ops = r.issued.Load() + writes.Load()
			sc.converge(ctx, t, s.final, lastFault)
			return ctx
		}).
		Teardown(restorePrimaryStep).
		Feature()
}

// competingWrite makes one foreign edit; errors (the object is not there
// yet or any more, a conflict) are part of the game and ignored. The
// registry is edited only for apps the user keeps: an entry forged for a
// WebApp that never comes back has no reconcile to remove it, and is not
// the operator's doing.
func competingWrite(ctx context.Context, sc *scenario, app string, deleted bool, n int64) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fieldOwner := client.FieldOwner("chaos-writer")
	kinds := 4
	if deleted {
		kinds = 2
	}
	switch sc.rng.IntN(kinds) {
	case 0: // the WebApp's metadata (through both webhooks, an UPDATE)
		w := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: sc.ns}}
		patch := fmt.Sprintf(`{"metadata":{"labels":{"chaos/writer":"%d"},"annotations":{"chaos/writer":"%d"}}}`, n, n)
		_ = sc.c.Patch(ctx, w, rawMergePatch(patch), fieldOwner)
	case 1: // the owned Deployment's replicas
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: sc.ns}}
		_ = sc.c.Patch(ctx, d, rawMergePatch(fmt.Sprintf(`{"spec":{"replicas":%d}}`, 4+sc.rng.IntN(3))), fieldOwner)
	case 2: // the registry: the app's entry pointed elsewhere
		setRegistryEntry(ctx, sc, app, new("http://hijacked.example.com"))
	default: // the registry: the app's entry removed
		setRegistryEntry(ctx, sc, app, nil)
	}
}

func setRegistryEntry(ctx context.Context, sc *scenario, app string, value *string) {
	patch, err := json.Marshal(map[string]any{"data": map[string]*string{sc.ns + "." + app: value}})
	if err != nil {
		return
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: registryShard(sc.ns, app), Namespace: operatorNamespace}}
	_ = sc.c.Patch(ctx, cm, rawMergePatch(string(patch)), client.FieldOwner("chaos-writer"))
}
