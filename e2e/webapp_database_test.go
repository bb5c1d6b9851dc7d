//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// TestWebAppDatabase checks the dependency on a database Service named by
// spec.dbRef: the WebApp explains what it waits for, and the Service
// appearing is enough for it to proceed (a watch, not polling or a spec
// change).
func TestWebAppDatabase(t *testing.T) {
	const app, db = "shop", "shop-db"

	f := features.New("a WebApp waits for its database Service").
		WithLabel("area", "dependencies").
		Assess("a missing database Service is explained by DatabaseReady=False DatabaseNotFound", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			w := newWebApp(ns, app, "registry.example.com/shop:v1.0.0")
			w.Spec.DBRef = new(db)
			createWebApp(ctx, t, cfg, w)

			wantMsg := fmt.Sprintf("database Service %q not found in namespace %q", db, ns)
			eventually(ctx, t, convergeTimeout, "DatabaseReady=False DatabaseNotFound", func(ctx context.Context) (bool, string, error) {
				got, err := getWebApp(ctx, cfg, ns, app)
				if err != nil {
					return false, "", err
				}
				c := meta.FindStatusCondition(got.Status.Conditions, webappv1.DatabaseReady)
				ok := ptr.Deref(got.Status.ObservedGeneration, 0) == got.Generation && c != nil &&
					c.Status == metav1.ConditionFalse && c.Reason == "DatabaseNotFound" && c.Message == wantMsg &&
					!meta.IsStatusConditionTrue(got.Status.Conditions, conditionReady) &&
					meta.IsStatusConditionTrue(got.Status.Conditions, conditionReconciling) &&
					!got.Status.IsReady() && strings.Contains(ptr.Deref(got.Status.Message, ""), wantMsg)
				return ok, describeWebApp(got) + " message=" + ptr.Deref(got.Status.Message, ""), nil
			})
			// The READY column says false, not nothing.
			out := harness.MustKubectl(ctx, t, "get", "wa", "-n", ns, app, "--no-headers")
			if row := strings.Fields(out); len(row) < 2 || row[1] != "false" {
				t.Errorf("kubectl get wa %s: row %q, want READY false", app, strings.TrimSpace(out))
			}
			// It waits: nothing is deployed before the database exists.
			var d appsv1.Deployment
			if err := cfg.Client().Resources().Get(ctx, app, ns, &d); !apierrors.IsNotFound(err) {
				t.Errorf("Deployment %s/%s while the database is missing: err = %v, want NotFound", ns, app, err)
			}
			return ctx
		}).
		Assess("creating the Service makes the WebApp Ready without any other change", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			before, err := getWebApp(ctx, cfg, ns, app)
			if err != nil {
				t.Fatal(err)
			}
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: db, Namespace: ns},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "postgres", Port: 5432}}},
			}
			if err := cfg.Client().Resources().Create(ctx, svc); err != nil {
				t.Fatal(err)
			}
			w := waitWebAppReady(ctx, t, cfg, ns, app, 1)
			if w.Generation != before.Generation {
				t.Errorf("the WebApp's spec changed (generation %d -> %d); only the Service should have", before.Generation, w.Generation)
			}
			c := meta.FindStatusCondition(w.Status.Conditions, webappv1.DatabaseReady)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "DatabaseFound" {
				t.Errorf("DatabaseReady = %+v, want True DatabaseFound", c)
			}
			var d appsv1.Deployment
			if err := cfg.Client().Resources().Get(ctx, app, ns, &d); err != nil {
				t.Fatal(err)
			}
			want := corev1.EnvVar{Name: "DATABASE_HOST", Value: db + "." + ns + ".svc"}
			if env := d.Spec.Template.Spec.Containers[0].Env; len(env) != 1 || env[0] != want {
				t.Errorf("container env %+v, want [%+v]", env, want)
			}
			return ctx
		}).
		Feature()

	testenv.Test(t, f)
}
