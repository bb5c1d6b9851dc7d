//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
)

func init() {
	utilruntime.Must(webappv2.AddToScheme(scheme.Scheme))
}

// upgradeKey carries, from Setup to the assessments, the names of the
// WebApps created and stored as v1.
type upgradeKey struct{}

// TestWebAppUpgrade is the L2 upgrade, on the suite's cluster: WebApps
// created and stored as apps.example.com/v1 under the CRD as released
// before v2 (examples/webapp/testdata/webapps-crd-v1-only.yaml), then the
// current CRD (v1 and v2, stored as v2, conversion by the operator's
// webhook) and a restarted operator, as an upgrade applies them. The WebApps
// keep working: readable as v1 and v2, reconciled, changed through either
// version, rewritten in v2 by the operator's storage migration, and the
// CRD's status.storedVersions trimmed to [v2].
//
// Process mode only: the feature replaces the CRD, which deletes every
// WebApp in the cluster. It does not wait for earlier features' namespaces
// to be deleted (that depends on their pods, hence on the control plane
// those features left behind): it deletes the CRD itself while the
// operator still runs, which deletes and finalizes every WebApp left,
// whatever its namespace is doing. Before the upgrade no operator runs
// and no admission webhook is installed (the new operator cannot start
// without v2, and the old one is not built here), so the v1 WebApps say
// every field the old webhook would have defaulted. Its Teardown puts the
// current CRD, webhook configurations and primary operator back, whatever
// happened.
func TestWebAppUpgrade(t *testing.T) {
	const (
		shop, blog = "shop", "blog"
		db         = "shop-db"
	)
	oldCRD := filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "testdata", "webapps-crd-v1-only.yaml")
	localConfig := filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "config", "local")

	f := features.New("WebApps created as v1 survive the upgrade to v2").
		WithLabel("area", "upgrade").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if operator.mode != modeProcess {
				t.Skip("replaces the CRD and restarts the operator: process mode only")
			}
			c := cfg.Client().Resources().GetControllerRuntimeClient()
			// Deleting the CRD deletes every WebApp in the cluster, other
			// features' leftovers too; the operator still runs, so their
			// finalizer is removed as the CRD's deletion deletes them.
			harness.MustKubectl(ctx, t, "delete", "crd", webappCRD, "--wait=false")
			// However many WebApps earlier features left, each finalized
			// by the operator: the wait fails when no WebApp has gone for
			// convergeTimeout, not after a fixed time.
			eventuallyProgressing(ctx, t, convergeTimeout, 15*time.Minute, "CRD "+webappCRD+" deleted with every WebApp", func(ctx context.Context) (bool, string, error) {
				return crdGone(ctx, c)
			})

			// Before the upgrade: the old CRD, and no operator: the new
			// one cannot start without v2 (it fails at once, as it
			// should). Without the old operator's admission webhooks the
			// WebApps below say every field the old webhook defaulted.
			if err := operator.primary.stop(); err != nil {
				t.Fatal(err)
			}
			harness.MustKubectl(ctx, t, "delete", "mutatingwebhookconfiguration", "webapp-mutating-webhook-configuration", "--ignore-not-found")
			harness.MustKubectl(ctx, t, "delete", "validatingwebhookconfiguration", "webapp-validating-webhook-configuration", "--ignore-not-found")
			harness.MustKubectl(ctx, t, "apply", "--server-side", "-f", oldCRD)
			harness.MustKubectl(ctx, t, "wait", "--for=condition=Established", "crd/"+webappCRD, "--timeout="+establishTimeout)

			ns := Namespace(ctx, t)
			if err := c.Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: db},
				Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "postgres", Port: 5432}}},
			}); err != nil {
				t.Fatal(err)
			}
			withDB := newWebApp(ns, shop, "registry.example.com/shop:v1.0.0")
			withDB.Spec.Replicas = new(int32(2))
			withDB.Spec.DBRef = new(db)
			withDB.Spec.Resources = &webappv1.ContainerResources{CPU: new(quantity("100m")), Memory: new(quantity("64Mi"))}
			createWebApp(ctx, t, cfg, withDB)
			plain := newWebApp(ns, blog, "registry.example.com/blog:v1.0.0")
			plain.Spec.Replicas = new(int32(1))
			plain.Spec.Resources = &webappv1.ContainerResources{CPU: new(quantity("500m")), Memory: new(quantity("256Mi"))}
			createWebApp(ctx, t, cfg, plain)
			if got := storedVersions(ctx, t, c); !slices.Equal(got, []string{"v1"}) {
				t.Fatalf("before the upgrade: status.storedVersions = %v, want [v1]", got)
			}
			return context.WithValue(ctx, upgradeKey{}, []string{withDB.Name, plain.Name})
		}).
		Assess("after the upgrade the v1 WebApps are stored as v2 and storedVersions is [v2]", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// The upgrade: the current CRD, RBAC and webhook
			// configurations (config/local), then the new operator.
			if err := operator.primary.stop(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := operator.install(ctx, localConfig); err != nil {
				t.Fatal(err)
			}
			if err := operator.restorePrimary(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			c := cfg.Client().Resources().GetControllerRuntimeClient()
			eventually(ctx, t, convergeTimeout, "status.storedVersions trimmed to [v2]", func(ctx context.Context) (bool, string, error) {
				got := storedVersions(ctx, t, c)
				return slices.Equal(got, []string{"v2"}), fmt.Sprint(got), nil
			})
			t.Logf("upgrade: CRD applied, operator restarted, storage migrated in %v", time.Since(start).Round(100*time.Millisecond))

			ns := Namespace(ctx, t)
			// Stored as v2 now. Comparing the resourceVersion with the one
			// the WebApp had as v1 cannot tell: the operator's own writes
			// (its finalizer, the status) move it whatever the migration
			// did. An unchanged write does tell: the API server stores an
			// update only when its encoding differs from what etcd holds,
			// so an unchanged write of an object stored as v2 is not
			// stored (its resourceVersion stays), and one of an object
			// still stored as v1 is (it moves): the storageversion
			// package's TestUnchangedWriteTellsTheStoredVersion shows both
			// on envtest, with no migration.
			for _, name := range ctx.Value(upgradeKey{}).([]string) {
				key := client.ObjectKey{Namespace: ns, Name: name}
				read, written := unchangedWrite(ctx, t, c, key)
				if written != read {
					t.Errorf("%s: an unchanged write was stored (resourceVersion %s -> %s): it was not stored as v2 after the migration", name, read, written)
				}
			}
			logs, err := operator.primary.logs()
			if err != nil {
				t.Fatal(err)
			}
			if !hasAll(logs, `"msg":"Migrated stored objects to the storage version"`, `"storageVersion":"v2"`, `"trimmed":["v1"]`) {
				t.Errorf("the operator did not log its storage migration; its log:\n%s", tail(operator.primary.logPath, 20))
			}
			return ctx
		}).
		Assess("they read as v1 and as v2, and are reconciled", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			c := cfg.Client().Resources().GetControllerRuntimeClient()
			w1 := waitWebAppReady(ctx, t, cfg, ns, shop, 2)
			if ptr.Deref(w1.Spec.DBRef, "") != db || w1.Spec.Resources == nil || w1.Spec.Resources.CPU.String() != "100m" || len(w1.Annotations) != 0 {
				t.Errorf("as v1: dbRef=%q resources=%+v annotations=%v, want what was created", ptr.Deref(w1.Spec.DBRef, ""), w1.Spec.Resources, w1.Annotations)
			}
			var w2 webappv2.WebApp
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: shop}, &w2); err != nil {
				t.Fatal(err)
			}
			if w2.Spec.Database == nil || w2.Spec.Database.ServiceName != db || w2.Spec.Resources == nil ||
				w2.Spec.Resources.Requests == nil || w2.Spec.Resources.Limits == nil ||
				w2.Spec.Resources.Requests.CPU.String() != "100m" || w2.Spec.Resources.Limits.CPU.String() != "100m" ||
				w2.Spec.Resources.Limits.Memory.String() != "64Mi" {
				t.Errorf("as v2: database=%+v resources=%s, want serviceName %s and 100m/64Mi as requests and limits", w2.Spec.Database, jsonOf(w2.Spec.Resources), db)
			}
			d := waitDeployment(ctx, t, cfg, ns, shop, "the Deployment of v1's resources", func(d *appsv1.Deployment) bool {
				r := d.Spec.Template.Spec.Containers[0].Resources
				return r.Requests.Cpu().String() == "100m" && r.Limits.Cpu().String() == "100m" && r.Limits.Memory().String() == "64Mi"
			})
			if env := d.Spec.Template.Spec.Containers[0].Env; len(env) != 1 || env[0].Value != db+"."+ns+".svc" {
				t.Errorf("DATABASE_HOST: env = %v", env)
			}
			waitWebAppReady(ctx, t, cfg, ns, blog, 1)
			return ctx
		}).
		Assess("replicas change through v1 and through v2, and v2-only limits survive v1 clients", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			c := cfg.Client().Resources().GetControllerRuntimeClient()

			patchWebApp(ctx, t, cfg, ns, shop, `{"spec":{"replicas":3}}`)
			waitWebAppReady(ctx, t, cfg, ns, shop, 3)
			waitDeployment(ctx, t, cfg, ns, shop, "3 replicas (set through v1)", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })

			v2 := &webappv2.WebApp{}
			v2.SetNamespace(ns)
			v2.SetName(shop)
			if err := c.Patch(ctx, v2, rawMergePatch(`{"spec":{"replicas":4,"resources":{"limits":{"cpu":"1"}}}}`)); err != nil {
				t.Fatalf("patch as v2: %v", err)
			}
			waitWebAppReady(ctx, t, cfg, ns, shop, 4)
			waitDeployment(ctx, t, cfg, ns, shop, "4 replicas and a 1-CPU limit (set through v2)", func(d *appsv1.Deployment) bool {
				r := d.Spec.Template.Spec.Containers[0].Resources
				return *d.Spec.Replicas == 4 && r.Requests.Cpu().String() == "100m" && r.Limits.Cpu().String() == "1"
			})

			// A v1 client sees the requests and the annotation, and its
			// update of another field keeps the limit.
			w1, err := getWebApp(ctx, cfg, ns, shop)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := w1.Annotations[webappv1.ResourcesAnnotation]; !ok || w1.Spec.Resources.CPU.String() != "100m" {
				t.Errorf("as v1: resources %s, annotations %v: want the requests and %s", jsonOf(w1.Spec.Resources), w1.Annotations, webappv1.ResourcesAnnotation)
			}
			w1.Spec.Replicas = new(int32(2))
			if err := c.Update(ctx, w1); err != nil {
				t.Fatalf("update as v1: %v", err)
			}
			waitWebAppReady(ctx, t, cfg, ns, shop, 2)
			waitDeployment(ctx, t, cfg, ns, shop, "2 replicas (v1 update) with the 1-CPU limit kept", func(d *appsv1.Deployment) bool {
				return *d.Spec.Replicas == 2 && d.Spec.Template.Spec.Containers[0].Resources.Limits.Cpu().String() == "1"
			})
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if operator.mode != modeProcess {
				return ctx
			}
			// Whatever happened: the current CRD and the primary, as
			// every other feature expects.
			if err := operator.install(ctx, localConfig); err != nil {
				t.Error(err)
			}
			if err := operator.primary.stop(); err != nil {
				t.Error(err)
			}
			if err := operator.restorePrimary(ctx, cfg); err != nil {
				t.Error(err)
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// unchangedWrite reads the WebApp key as v2 and writes it back unchanged,
// locked to the resourceVersion it read (a JSON merge patch of that
// resourceVersion alone), and returns the resourceVersion read and the one
// the write answered: the same unless the write was stored. A conflict
// (the operator wrote the WebApp in between) is tried again; it fails t
// after a minute of them.
func unchangedWrite(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) (read, written string) {
	t.Helper()
	eventually(ctx, t, convergeTimeout, fmt.Sprintf("an unchanged write of WebApp %s not refused by a conflict", key), func(ctx context.Context) (bool, string, error) {
		var w webappv2.WebApp
		if err := c.Get(ctx, key, &w); err != nil {
			return false, "", err
		}
		read = w.ResourceVersion
		lock := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q}}`, read))
		err := c.Patch(ctx, &w, lock)
		if apierrors.IsConflict(err) {
			return false, "conflict: written since read at " + read, nil
		}
		written = w.ResourceVersion
		return err == nil, "read at " + read, err
	})
	return read, written
}

// crdGone reports whether the WebApp CRD is gone and, while it is not,
// which WebApps are left and why (their deletion timestamp and finalizers).
func crdGone(ctx context.Context, c client.Client) (bool, string, error) {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.Get(ctx, client.ObjectKey{Name: webappCRD}, crd); apierrors.IsNotFound(err) {
		return true, "CRD gone", nil
	} else if err != nil {
		return false, "", err
	}
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(webappv2.GroupVersion.WithKind("WebAppList"))
	if err := c.List(ctx, &list); err != nil {
		return false, "", fmt.Errorf("CRD still there (deletionTimestamp %v), listing its WebApps: %w", crd.GetDeletionTimestamp(), err)
	}
	left := make([]string, 0, len(list.Items))
	for _, w := range list.Items {
		left = append(left, fmt.Sprintf("%s/%s (deleted %v, finalizers %v)", w.Namespace, w.Name, w.DeletionTimestamp, w.Finalizers))
	}
	return false, fmt.Sprintf("CRD still there (deletionTimestamp %v), %d WebApps left: %v", crd.GetDeletionTimestamp(), len(left), left), nil
}

// storedVersions reads the WebApp CRD's status.storedVersions.
func storedVersions(ctx context.Context, t *testing.T, c client.Client) []string {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	if err := c.Get(ctx, client.ObjectKey{Name: webappCRD}, crd); err != nil {
		t.Fatalf("reading CRD %s: %v", webappCRD, err)
	}
	v, _, err := unstructured.NestedStringSlice(crd.Object, "status", "storedVersions")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
