//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// chaosFaultyAPI is scenario 3: the operator talks to the apiserver
// through faultProxy, which delays, resets, throttles (429 with
// Retry-After), fails (500, 503) a share of its requests and drops or
// expires (410 Gone) its watches, leader election included. A manager that
// loses its Lease exits; the supervisor restarts it, as a kubelet would.
func chaosFaultyAPI() features.Feature {
	var sc *scenario
	return features.New("chaos 3: a fault-injecting proxy between operator and apiserver").
		WithLabel("area", "chaos").
		Assess("the invariants hold after the faults", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc = newScenario(ctx, t, cfg, 3, "fault-injecting proxy: delays, resets, 429, 5xx, dropped watches, 410 Gone", 3)
			if err := createDatabase(ctx, sc.c, sc.ns); err != nil {
				t.Fatal(err)
			}
			proxy, err := startFaultProxy(cfg.Client().RESTConfig(), sc.res.Seed, 0.2)
			if err != nil {
				t.Fatal(err)
			}
			defer proxy.Close()
			kubeconfig := filepath.Join(operator.workDir, "proxy.kubeconfig")
			if err := proxy.writeKubeconfig(operator.saKubeconfig, kubeconfig); err != nil {
				t.Fatal(err)
			}
			if err := operator.primary.stop(); err != nil {
				t.Fatal(err)
			}
			sup, err := sc.fleet.supervise(ctx, instanceOptions{role: "proxied", webhooks: true, leaderElect: true, kubeconfig: kubeconfig})
			if err != nil {
				t.Fatal(err)
			}
			proxy.enable()
			s := newSchedule(sc.res.Seed, appsFor(12, 300))
			r := sc.runner()
			done := make(chan error, 1)
			go func() { done <- r.run(ctx, s) }()
			faulty := time.After(time.Duration(size(15, 120)) * time.Second)
			// Watches live for minutes; besides the share of new ones
			// the proxy breaks, every open one is cut every 5 s.
			cut := time.NewTicker(5 * time.Second)
			defer cut.Stop()
			for pending := 2; pending > 0; {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					pending--
				case <-faulty:
					pending--
				case <-cut.C:
					proxy.cutWatches()
				}
			}
			proxy.enabled.Store(false)
			lastFault := time.Now()
			inc, err := sup.halt(ctx)
			if err != nil {
				t.Fatal(err)
			}
			sc.res.Faults, sc.res.FaultsWhat = proxy.summary()
			// The workload's requests and the operator's through the proxy.
			sc.res.Ops = r.issued.Load() + proxy.requests.Load()
			sc.converge(ctx, t, s.final, lastFault)
			// Stop it while the proxy still forwards, so it releases the Lease.
			if err := inc.p.stop(); err != nil {
				t.Error(err)
			}
			return ctx
		}).
		Teardown(restoreAndRetire(&sc)).
		Feature()
}

// chaosAPIServerRestart is scenario 2: kube-apiserver and etcd SIGKILLed
// and started again mid-convergence. Every watch breaks, every request
// fails while they are down, and a leader that cannot renew its Lease for
// 10 s exits; the supervisor restarts it.
func chaosAPIServerRestart() features.Feature {
	var sc *scenario
	return features.New("chaos 2: kube-apiserver and etcd killed and restarted").
		WithLabel("area", "chaos").
		Assess("the invariants hold after the restarts", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if _, err := harness.component("kube-apiserver"); err != nil {
				t.Skipf("kills and restarts the control plane's processes: needs E2E_PROVIDER=kwok (%v)", err)
			}
			sc = newScenario(ctx, t, cfg, 2, "kube-apiserver and etcd SIGKILLed and restarted mid-convergence", 2)
			if err := createDatabase(ctx, sc.c, sc.ns); err != nil {
				t.Fatal(err)
			}
			// On a real control plane the kubelet restarts these when they
			// exit after losing their Lease to the apiserver's outage.
			stopSupervising, err := harness.supervise(ctx, "kube-controller-manager", "kube-scheduler")
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if restarts := stopSupervising(); len(restarts) > 0 {
					t.Logf("control-plane supervisor: %s", strings.Join(restarts, "; "))
				}
			}()
			if err := operator.primary.stop(); err != nil {
				t.Fatal(err)
			}
			sup, err := sc.fleet.supervise(ctx, instanceOptions{role: "op", webhooks: true, leaderElect: true})
			if err != nil {
				t.Fatal(err)
			}
			s := newSchedule(sc.res.Seed, appsFor(12, 300))
			r := sc.runner()
			done := make(chan error, 1)
			go func() { done <- r.run(ctx, s) }()

			kills := []string{"kube-apiserver", "etcd"}
			if chaosLong() {
				kills = append(kills, "kube-apiserver", "etcd")
			}
			var lastFault time.Time
			for _, name := range kills {
				time.Sleep(sc.jitter(time.Second, 4*time.Second)) // the schedule: when the next fault strikes
				c, err := harness.component(name)
				if err != nil {
					t.Fatal(err)
				}
				spec, err := c.kill(ctx)
				if err != nil {
					t.Fatal(err)
				}
				killed := time.Now()
				time.Sleep(sc.jitter(time.Second, 5*time.Second)) // the schedule: how long it stays down
				if err := c.start(spec); err != nil {
					t.Fatal(err)
				}
				lastFault = time.Now()
				sc.res.Faults++
				if err := waitAPIServerReady(ctx, cfg); err != nil {
					t.Fatalf("after restarting %s: %v", name, err)
				}
				t.Logf("timeline: %s killed at %s, started at %s, the apiserver ready at %s",
					name, killed.Format(timeOfDay), lastFault.Format(timeOfDay), time.Now().Format(timeOfDay))
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			t.Logf("timeline: the workload done at %s, %v after the last fault", time.Now().Format(timeOfDay), time.Since(lastFault).Round(100*time.Millisecond))
			if _, err := sup.halt(ctx); err != nil {
				t.Fatal(err)
			}
			sc.res.FaultsWhat = fmt.Sprintf("SIGKILLs (%s)", strings.Join(kills, ", "))
			sc.res.Ops = r.issued.Load()
			sc.converge(ctx, t, s.final, lastFault)
			logRecoveryTimeline(ctx, t, cfg, sc.fleet, lastFault)
			// The scenario broke the control plane: it ends only once the
			// cluster works for the next feature as before.
			if err := verifyClusterHealth(ctx, cfg); err != nil {
				// kwok, standing in for the kubelets, drops a pod's stage
				// (its deletion, its Running status) when the request
				// fails with an error it does not retry (an EOF, a 500
				// from an apiserver without etcd) and, unlike a kubelet,
				// never resyncs: only a relist, at its start, sees the
				// pod again.
				kwok, cerr := harness.component("kwok-controller")
				if cerr != nil {
					t.Fatalf("after the restarts the cluster does not work: %v", err)
				}
				t.Logf("after the restarts the cluster does not work: %v\nend of the kwok-controller log:\n%s",
					err, tail(filepath.Join(kwok.workdir, "logs", "kwok-controller.log"), 20))
				if err := kwok.restart(ctx); err != nil {
					t.Fatal(err)
				}
				if err := verifyClusterHealth(ctx, cfg); err != nil {
					t.Fatalf("after the restarts, and kwok-controller's, the cluster does not work: %v", err)
				}
				t.Log("kwok-controller restarted: the cluster works again")
			}
			return ctx
		}).
		Teardown(restoreAndRetire(&sc)).
		Feature()
}

// timeOfDay formats the times of a scenario's timeline.
const timeOfDay = "15:04:05.000"

// logRecoveryTimeline logs, relative to lastFault, when the control
// plane's leaders last acquired their Leases (a restarted
// kube-controller-manager or kube-scheduler waits out its predecessor's)
// and when the operator's last pass failed: where the minutes after an
// outage go (docs/reliability.md).
func logRecoveryTimeline(ctx context.Context, t *testing.T, cfg *envconf.Config, f *fleet, lastFault time.Time) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		t.Logf("timeline: %v", err)
		return
	}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.AcquireTime == nil {
			t.Logf("timeline: %s Lease: %v", name, err)
			continue
		}
		t.Logf("timeline: %s Lease acquired at %s (%v after the last fault), %d transitions",
			name, l.Spec.AcquireTime.Format(timeOfDay), l.Spec.AcquireTime.Sub(lastFault).Round(100*time.Millisecond), ptr.Deref(l.Spec.LeaseTransitions, 0))
	}
	var last time.Time
	var lastErr string
	for _, inc := range f.all() {
		at, msg := lastReconcilerError(inc.p.logPath)
		if at.After(last) {
			last, lastErr = at, msg
		}
	}
	if !last.IsZero() {
		t.Logf("timeline: the operator's last failed pass at %s (%v after the last fault): %s", last.Format(timeOfDay), last.Sub(lastFault).Round(100*time.Millisecond), lastErr)
	}
}

// lastReconcilerError returns the time and error of the last "Reconciler
// error" line of an operator's JSON log.
func lastReconcilerError(path string) (time.Time, string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, ""
	}
	var last time.Time
	var msg string
	for _, line := range strings.Split(string(b), "\n") {
		var l struct {
			Msg, Error string
			TS         time.Time `json:"ts"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "Reconciler error" && l.TS.After(last) {
			last, msg = l.TS, l.Error
		}
	}
	return last, msg
}

// waitAPIServerReady polls the apiserver's /readyz until it answers ok.
func waitAPIServerReady(ctx context.Context, cfg *envconf.Config) error {
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the apiserver is not ready: %w (last: %v)", err, last)
	}
	return nil
}

// restoreAndRetire is the teardown of the scenarios whose operators ran
// under faults that the suite's other checks would count against them (a
// kubeconfig pointing at the proxy; the Forbidden answers of an apiserver
// whose authorizer is still syncing after a restart): after the primary is
// back, their stopped processes are retired.
func restoreAndRetire(sc **scenario) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		ctx = restorePrimaryStep(ctx, t, cfg)
		if *sc != nil {
			var ps []*operatorProcess
			for _, inc := range (*sc).fleet.all() {
				ps = append(ps, inc.p)
			}
			operator.retire(ps...)
		}
		return ctx
	}
}
