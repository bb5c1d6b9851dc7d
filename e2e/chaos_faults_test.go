//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
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
				time.Sleep(sc.jitter(time.Second, 5*time.Second)) // the schedule: how long it stays down
				if err := c.start(spec); err != nil {
					t.Fatal(err)
				}
				lastFault = time.Now()
				sc.res.Faults++
				if err := waitAPIServerReady(ctx, cfg); err != nil {
					t.Fatalf("after restarting %s: %v", name, err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if _, err := sup.halt(ctx); err != nil {
				t.Fatal(err)
			}
			sc.res.FaultsWhat = fmt.Sprintf("SIGKILLs (%s)", strings.Join(kills, ", "))
			sc.res.Ops = r.issued.Load()
			sc.converge(ctx, t, s.final, lastFault)
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
