//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
)

// primaryStatusManager is the field manager of the primary instance's
// status writes: argv[0] of its process (see operatorProcess).
const primaryStatusManager = "webapp-operator-primary/status"

// TestOperatorLeaderElection runs a second operator beside the primary:
// only the Lease holder reconciles, and when the leader is SIGKILLed the
// other takes the Lease over and reconciles.
//
// While the primary is down its webhooks are down too (failurePolicy
// Fail), so nothing here writes a WebApp then: the check after the
// fail-over deletes a Deployment, which no webhook guards.
func TestOperatorLeaderElection(t *testing.T) {
	if operator.mode != modeProcess {
		t.Skip("starts and kills operator processes: needs E2E_OPERATOR=process")
	}
	const app = "ha"
	var standby *operatorProcess
	var leaderBefore string
	var leaseDuration time.Duration

	f := features.New("leader election: one writer; a SIGKILLed leader is replaced").
		WithLabel("area", "operator").
		Assess("with two operators, only the Lease holder writes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			if !operator.leading(operator.primary) {
				t.Fatal("the primary does not lead at the start of the feature")
			}
			lease, err := operator.lease(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			leaderBefore = *lease.Spec.HolderIdentity
			leaseDuration = time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second

			if standby, err = operator.newProcess("standby", false); err != nil {
				t.Fatal(err)
			}
			if err := standby.start(ctx); err != nil {
				t.Fatal(err)
			}
			// A WebApp's whole creation happens with both running.
			w := newWebApp(ns, app, "registry.example.com/web:v1.0.0")
			w.Spec.Replicas = new(int32(2))
			createWebApp(ctx, t, cfg, w)
			w = waitWebAppReady(ctx, t, cfg, ns, app, 2)

			ms := managers(w)
			if !slices.Contains(ms, primaryStatusManager) || hasPrefix(ms, "webapp-operator-standby") {
				t.Errorf("WebApp managedFields managers %v: want status written by the primary only", ms)
			}
			if operator.leading(standby) {
				t.Errorf("the standby started its controllers while the primary led")
			}
			if lease, err = operator.lease(ctx, cfg); err != nil || *lease.Spec.HolderIdentity != leaderBefore {
				t.Errorf("Lease holder changed from %s to %v (%v) with the primary alive", leaderBefore, lease.Spec.HolderIdentity, err)
			}
			return ctx
		}).
		Assess("SIGKILL the leader: the other takes the Lease over and reconciles", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			operator.primary.kill() // no release: the Lease must expire
			killed := time.Now()
			// The follower takes the Lease once it has not seen it
			// renewed for the lease duration, counted from when it last
			// observed a renewal (up to one try before the kill), at its
			// next try (takeoverBound: 23.8 s with the Lease's 15 s), then
			// syncs its caches and starts the controllers. What is tested
			// is that it takes over, not how fast: the deadline is a
			// safety net of two minutes over that (leadTimeout), with the
			// duration this Lease says in place of the default's.
			deadline := leadTimeout - electionLease + leaseDuration
			eventually(ctx, t, deadline, "the standby holds the Lease and runs the controllers", func(ctx context.Context) (bool, string, error) {
				lease, err := operator.lease(ctx, cfg)
				if err != nil {
					return false, "", err
				}
				holder := ""
				if lease.Spec.HolderIdentity != nil {
					holder = *lease.Spec.HolderIdentity
				}
				return holder != "" && holder != leaderBefore && operator.leading(standby),
					fmt.Sprintf("holder %q (killed leader %q), standby leading: %t", holder, leaderBefore, operator.leading(standby)), nil
			})
			t.Logf("the standby led %v after the kill (lease %v, takeover within %v when on time)",
				time.Since(killed).Round(100*time.Millisecond), leaseDuration, takeoverBound-electionLease+leaseDuration)

			// Reconciling continues: a deleted Deployment comes back, and
			// the status now carries the standby's writes.
			r := cfg.Client().Resources(ns)
			var old appsv1.Deployment
			if err := r.Get(ctx, app, ns, &old); err != nil {
				t.Fatal(err)
			}
			if err := r.Delete(ctx, &old, resources.WithDeletePropagation(string(metav1.DeletePropagationBackground))); err != nil {
				t.Fatal(err)
			}
			waitDeployment(ctx, t, cfg, ns, app, "recreated by the new leader", func(d *appsv1.Deployment) bool {
				return d.UID != old.UID && deploymentRolledOut(d, 2)
			})
			eventually(ctx, t, convergeTimeout, "the WebApp is Ready with the standby's status", func(ctx context.Context) (bool, string, error) {
				// Read in the storage version (v2): a v1 read needs the
				// conversion webhook, which only the killed primary serves.
				var w webappv2.WebApp
				if err := r.Get(ctx, app, ns, &w); err != nil {
					return false, "", err
				}
				// The status may or may not carry a write of the standby's:
				// if the recreated Deployment rolled out before the standby's
				// first look, Ready never changed, and a converged pass
				// writes nothing. The recreated Deployment above is the
				// standby's work either way.
				ready := ptr.Deref(w.Status.ObservedGeneration, 0) == w.Generation && meta.IsStatusConditionTrue(w.Status.Conditions, conditionReady)
				return ready && ptr.Deref(w.Status.ReadyReplicas, 0) == 2,
					fmt.Sprintf("ready=%t readyReplicas=%d managers=%v", ready, ptr.Deref(w.Status.ReadyReplicas, 0), managers(&w)), nil
			})
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := operator.restorePrimary(ctx, cfg); err != nil {
				t.Errorf("restoring the primary operator: %v", err)
			}
			return ctx
		}).
		Feature()

	testenv.Test(t, f)
}

// TestOperatorRestart checks that WebApps created while no operator
// reconciles converge once one starts: the new process finds them in its
// initial list, not through events it saw.
//
// Creating a WebApp needs the webhooks (failurePolicy Fail), and those are
// served by the operator. The honest way to have webhooks without
// reconciling is the operator's own leader election: the suite holds the
// Lease (as another replica would), so a running operator serves webhooks
// as a follower and never starts its controllers. The WebApps are created
// through it; then it is stopped, the Lease released, and a fresh operator
// process started. Nothing in the operator is bypassed or reconfigured.
func TestOperatorRestart(t *testing.T) {
	if operator.mode != modeProcess {
		t.Skip("starts and stops operator processes: needs E2E_OPERATOR=process")
	}
	apps := map[string]int32{"restart-a": 1, "restart-b": 3} // name -> replicas; 1 is the webhook's default

	f := features.New("WebApps created while the operator is down converge when it starts").
		WithLabel("area", "operator").
		Assess("with the operator stopped, WebApp writes fail closed", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			if err := operator.primary.stop(); err != nil {
				t.Fatal(err)
			}
			// stop waited for the exit, and the leader releases the Lease
			// before it exits: one read says so; the deadline is a safety net.
			eventually(ctx, t, convergeTimeout, "the stopped leader released the Lease", func(ctx context.Context) (bool, string, error) {
				lease, err := operator.lease(ctx, cfg)
				if err != nil {
					return false, "", err
				}
				return lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "", fmt.Sprint(lease.Spec.HolderIdentity), nil
			})
			err := cfg.Client().Resources().Create(ctx, newWebApp(ns, "refused", "registry.example.com/web:v1.0.0"))
			if err == nil || !strings.Contains(err.Error(), `failed calling webhook "mwebapp-v1.kb.io"`) {
				t.Fatalf("create with no webhook server: err = %v, want the webhook call to fail", err)
			}
			return ctx
		}).
		Assess("WebApps created through a follower's webhooks are not reconciled", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			if err := operator.setLeaseHolder(ctx, cfg, suiteLeaseHolder, time.Hour); err != nil {
				t.Fatalf("taking the Lease: %v", err)
			}
			if err := operator.primary.start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := operator.waitWebhookServing(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			for name, replicas := range apps {
				w := newWebApp(ns, name, "registry.example.com/web:v1.0.0")
				if replicas != 1 {
					w.Spec.Replicas = new(replicas)
				}
				createWebApp(ctx, t, cfg, w)
				if w.Spec.Resources == nil || w.Spec.Resources.CPU == nil {
					t.Errorf("WebApp %s was not defaulted by the webhook: %+v", name, w.Spec)
				}
			}
			for name := range apps {
				w, err := getWebApp(ctx, cfg, ns, name)
				if err != nil {
					t.Fatal(err)
				}
				if len(w.Finalizers) > 0 || w.Status.ObservedGeneration != nil || len(w.Status.Conditions) > 0 {
					t.Errorf("WebApp %s was reconciled by a follower: finalizers %v, %s", name, w.Finalizers, describeWebApp(w))
				}
				var d appsv1.Deployment
				if err := cfg.Client().Resources().Get(ctx, name, ns, &d); !apierrors.IsNotFound(err) {
					t.Errorf("Deployment %s exists (err %v) though nothing reconciles", name, err)
				}
			}
			if operator.leading(operator.primary) {
				t.Error("the operator started its controllers while the suite held the Lease")
			}
			if err := operator.primary.stop(); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("a fresh operator process reconciles them to Ready", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			if err := operator.setLeaseHolder(ctx, cfg, "", time.Second); err != nil {
				t.Fatalf("releasing the Lease: %v", err)
			}
			if err := operator.primary.start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := operator.waitLeading(ctx, operator.primary, leadTimeout); err != nil {
				t.Fatal(err)
			}
			for name, replicas := range apps {
				w := waitWebAppReady(ctx, t, cfg, ns, name, replicas)
				var d appsv1.Deployment
				if err := cfg.Client().Resources().Get(ctx, name, ns, &d); err != nil {
					t.Fatal(err)
				}
				requireControlledBy(t, &d, w)
				requireRegistryEntry(ctx, t, cfg, ns, name, true)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := operator.restorePrimary(ctx, cfg); err != nil {
				t.Errorf("restoring the primary operator: %v", err)
			}
			return ctx
		}).
		Feature()

	testenv.Test(t, f)
}

// hasPrefix reports whether any of list starts with prefix.
func hasPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
