package storageversion_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/yaml"

	"github.com/reconcilekit/reconcilekit/internal/testenv"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/storageversion"
	webappwebhook "github.com/reconcilekit/reconcilekit/examples/webapp/internal/webhook"
)

const crdName = "webapps.apps.example.com"

var env *testenv.Env

func webappDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestMain starts the apiserver with the WebApp CRD as released before v2
// (testdata/webapps-crd-v1-only.yaml: v1 only, stored as v1). envtest
// prepares a serving certificate and port for the webhook server but
// installs no webhook configuration: the tests install the current ones
// after the upgrade.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(webappDir(), "testdata", "webapps-crd-v1-only.yaml")},
		AddToScheme:       []func(*k8sruntime.Scheme) error{webappv1.AddToScheme, webappv2.AddToScheme, apiextensionsv1.AddToScheme},
	}))
}

func q(s string) *resource.Quantity { return new(resource.MustParse(s)) }

// TestUpgradeFromV1 is the upgrade a cluster goes through, against a real
// apiserver calling the operator's real webhooks: WebApps created and
// stored as v1, then the current CRD (v1 and v2, stored as v2, conversion
// by webhook) and the operator's webhook server and storage migration.
func TestUpgradeFromV1(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	c := env.Client
	ns := env.Namespace(t)

	// Before: v1 only.
	oldApps := map[string]webappv1.WebAppSpec{
		"shop": {Image: "registry.example.com/shop:1.0", Replicas: new(int32(2)), DBRef: "orders-db",
			Resources: &webappv1.ContainerResources{CPU: q("250m"), Memory: q("64Mi")}},
		"blog": {Image: "registry.example.com/blog:1.0", Replicas: new(int32(1)),
			Resources: &webappv1.ContainerResources{CPU: q("500m"), Memory: q("256Mi")}},
	}
	oldRV := map[string]string{}
	for name, spec := range oldApps {
		app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
		require.NoError(t, c.Create(ctx, app))
		oldRV[name] = app.ResourceVersion
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: crdName}, crd))
	require.Equal(t, []string{"v1"}, crd.Status.StoredVersions)

	// The upgrade: the current CRD, with its conversion webhook at the
	// webhook server this test starts.
	upgradeCRD(t, ctx)
	installAdmissionWebhooks(t, ctx)
	startOperator(t, ctx, 100*time.Millisecond)

	// The migration ends with storedVersions trimmed; every WebApp stored
	// as v1 was written (its resourceVersion moved) with no change to its
	// spec (its generation did not).
	require.Eventually(t, func() bool {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		return c.Get(ctx, client.ObjectKey{Name: crdName}, crd) == nil &&
			len(crd.Status.StoredVersions) == 1 && crd.Status.StoredVersions[0] == "v2"
	}, time.Minute, 50*time.Millisecond, "status.storedVersions trimmed to [v2]")
	for name, spec := range oldApps {
		v2 := &webappv2.WebApp{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, v2), "read as v2 through the conversion webhook")
		assert.NotEqual(t, oldRV[name], v2.ResourceVersion, "%s was rewritten in the storage version", name)
		assert.Equal(t, int64(1), v2.Generation, "%s: the rewrite changed no spec", name)
		assert.Equal(t, spec.DBRef, v2.Spec.Database.ServiceName)
		assert.Equal(t, spec.Image, v2.Spec.Image)
		require.NotNil(t, v2.Spec.Resources)
		assert.Equal(t, spec.Resources.CPU.String(), v2.Spec.Resources.Requests.CPU.String())
		assert.Equal(t, spec.Resources.CPU.String(), v2.Spec.Resources.Limits.CPU.String(), "v1's amounts are the limits too")
		assert.Equal(t, spec.Resources.Memory.String(), v2.Spec.Resources.Limits.Memory.String())

		v1 := &webappv1.WebApp{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, v1), "read as v1 through the conversion webhook")
		assert.Equal(t, spec.DBRef, v1.Spec.DBRef)
		assert.Equal(t, *spec.Replicas, *v1.Spec.Replicas)
		assert.Equal(t, spec.Resources.CPU.String(), v1.Spec.Resources.CPU.String())
		assert.Empty(t, v1.Annotations, "nothing v1 cannot say, so no annotation")
	}

	t.Run("v2 resources v1 cannot say survive a v1 client's update", func(t *testing.T) {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst"}, Spec: webappv2.WebAppSpec{
			Image: "web:1", Database: webappv2.DatabaseReference{ServiceName: "orders-db"},
			Resources: &webappv2.ResourceRequirements{
				Requests: webappv2.ContainerResources{CPU: q("100m"), Memory: q("64Mi")},
				Limits:   webappv2.ContainerResources{CPU: q("1")},
			}}}
		require.NoError(t, c.Create(ctx, app))
		assert.Equal(t, "64Mi", app.Spec.Resources.Limits.Memory.String(), "v2 defaulting: an unset limit is the request")

		v1 := &webappv1.WebApp{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(app), v1))
		assert.Equal(t, "100m", v1.Spec.Resources.CPU.String(), "v1 shows the requests")
		assert.Equal(t, "orders-db", v1.Spec.DBRef)
		assert.JSONEq(t, `{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"1","memory":"64Mi"}}`,
			v1.Annotations[webappv1.ResourcesAnnotation])

		// A v1 client that edits something else and sends back what it
		// read (annotation included) keeps the limits.
		v1.Spec.Image = "web:2"
		require.NoError(t, c.Update(ctx, v1))
		got := &webappv2.WebApp{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(app), got))
		assert.Equal(t, "web:2", got.Spec.Image)
		assert.Equal(t, "1", got.Spec.Resources.Limits.CPU.String(), "the limit v1 cannot say survived")
		assert.Empty(t, got.Annotations, "the annotation lives only in the v1 form")

		// A v1 client that changes resources says requests and limits at
		// once, as v1 always meant.
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(app), v1))
		v1.Spec.Resources.CPU = q("200m")
		require.NoError(t, c.Update(ctx, v1))
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(app), got))
		assert.Equal(t, "200m", got.Spec.Resources.Requests.CPU.String())
		assert.Equal(t, "200m", got.Spec.Resources.Limits.CPU.String())
	})

	t.Run("each version is admitted by its own webhooks", func(t *testing.T) {
		v1 := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain-v1"}, Spec: webappv1.WebAppSpec{Image: "web:1"}}
		require.NoError(t, c.Create(ctx, v1))
		require.NotNil(t, v1.Spec.Resources, "v1 defaulting")
		assert.Equal(t, "500m", v1.Spec.Resources.CPU.String())

		bad := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-v1"},
			Spec: webappv1.WebAppSpec{Image: "web:1", Resources: &webappv1.ContainerResources{CPU: q("0")}}}
		err := c.Create(ctx, bad)
		require.Error(t, err)
		assert.Contains(t, err.Error(), `spec.resources.cpu: Invalid value: "0"`, "a v1 request's errors name v1's fields")

		badV2 := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-v2"},
			Spec: webappv2.WebAppSpec{Image: "web:1", Resources: &webappv2.ResourceRequirements{
				Requests: webappv2.ContainerResources{CPU: q("2")}, Limits: webappv2.ContainerResources{CPU: q("1")}}}}
		err = c.Create(ctx, badV2)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.resources.limits.cpu", "v2 validation: no limit below its request")
	})

	t.Run("a repeated migration rewrites nothing", func(t *testing.T) {
		rvs := resourceVersions(t, ctx, ns)
		setStoredVersions(t, ctx, "v1", "v2")
		m := &storageversion.Migrator{Client: c, Reader: c, CRD: crdName}
		res, err := m.Migrate(ctx)
		require.NoError(t, err)
		assert.Equal(t, len(rvs), res.Objects)
		assert.Equal(t, []string{"v1"}, res.Trimmed)
		assert.Equal(t, rvs, resourceVersions(t, ctx, ns), "objects stored as v2 already are not written again")
		assert.Equal(t, []string{"v2"}, storedVersions(t, ctx))

		res, err = m.Migrate(ctx)
		require.NoError(t, err)
		assert.Equal(t, storageversion.Result{StorageVersion: "v2"}, res, "nothing to do: no list, no write")
	})

	t.Run("storedVersions is kept when an object could not be rewritten", func(t *testing.T) {
		setStoredVersions(t, ctx, "v1", "v2")
		direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		failing := interceptor.NewClient(direct, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if obj.GetName() == "blog" {
					return errors.New("injected: the apiserver refused the write")
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
		})
		m := &storageversion.Migrator{Client: failing, Reader: c, CRD: crdName}
		_, err = m.Migrate(ctx)
		require.ErrorContains(t, err, "injected")
		assert.Equal(t, []string{"v1", "v2"}, storedVersions(t, ctx), "not trimmed: blog might still be stored as v1")

		_, err = (&storageversion.Migrator{Client: c, Reader: c, CRD: crdName}).Migrate(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"v2"}, storedVersions(t, ctx))
	})
}

// upgradeCRD replaces the installed CRD's spec with config/crd/bases' (v1
// and v2, stored as v2) and converts through the webhook server envtest
// prepared, as config/local does with https://127.0.0.1:9443/convert.
func upgradeCRD(t *testing.T, ctx context.Context) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(webappDir(), "config", "crd", "bases", "apps.example.com_webapps.yaml"))
	require.NoError(t, err)
	next := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(b, next))
	wh := env.Environment.WebhookInstallOptions
	next.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ConversionReviewVersions: []string{"v1"},
			ClientConfig: &apiextensionsv1.WebhookClientConfig{
				URL:      new(fmt.Sprintf("https://%s/convert", net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)))),
				CABundle: wh.LocalServingCAData,
			},
		},
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd))
	crd.Spec = next.Spec
	require.NoError(t, env.Client.Update(ctx, crd))
	require.Eventually(t, func() bool {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if env.Client.Get(ctx, client.ObjectKey{Name: crdName}, got) != nil {
			return false
		}
		// The apiserver added v2 to storedVersions when v2 became the
		// storage version; v1 stays until the migration.
		return len(got.Status.StoredVersions) == 2
	}, time.Minute, 50*time.Millisecond, "the apiserver took the new storage version")
}

// installAdmissionWebhooks creates config/webhook's configurations, each
// webhook calling the test's webhook server by URL.
func installAdmissionWebhooks(t *testing.T, ctx context.Context) {
	t.Helper()
	f, err := os.Open(filepath.Join(webappDir(), "config", "webhook", "manifests.yaml"))
	require.NoError(t, err)
	defer f.Close()
	wh := env.Environment.WebhookInstallOptions
	base := fmt.Sprintf("https://%s", net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort)))
	cc := func(c *admissionregistrationv1.WebhookClientConfig) {
		*c = admissionregistrationv1.WebhookClientConfig{URL: new(base + *c.Service.Path), CABundle: wh.LocalServingCAData}
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			break
		}
		b, err := yaml.Marshal(raw)
		require.NoError(t, err)
		switch raw["kind"] {
		case "MutatingWebhookConfiguration":
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			require.NoError(t, yaml.Unmarshal(b, cfg))
			for i := range cfg.Webhooks {
				cc(&cfg.Webhooks[i].ClientConfig)
			}
			require.NoError(t, env.Client.Create(ctx, cfg))
		case "ValidatingWebhookConfiguration":
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			require.NoError(t, yaml.Unmarshal(b, cfg))
			for i := range cfg.Webhooks {
				cc(&cfg.Webhooks[i].ClientConfig)
			}
			require.NoError(t, env.Client.Create(ctx, cfg))
		}
	}
}

// startOperator runs what the operator runs for the upgrade: the webhook
// server with the WebApp webhooks (and so /convert), and the storage
// migration.
func startOperator(t *testing.T, ctx context.Context, backoff time.Duration) {
	t.Helper()
	wh := env.Environment.WebhookInstallOptions
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir,
		}),
	})
	require.NoError(t, err)
	require.NoError(t, webappwebhook.Setup(mgr))
	require.NoError(t, mgr.Add(&storageversion.Migrator{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), CRD: crdName, Log: logr.Discard(), Backoff: backoff,
	}))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

func resourceVersions(t *testing.T, ctx context.Context, ns string) map[string]string {
	t.Helper()
	var list webappv2.WebAppList
	require.NoError(t, env.Client.List(ctx, &list, client.InNamespace(ns)))
	out := map[string]string{}
	for _, a := range list.Items {
		out[a.Name] = a.ResourceVersion
	}
	return out
}

func storedVersions(t *testing.T, ctx context.Context) []string {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd))
	return crd.Status.StoredVersions
}

// setStoredVersions sets status.storedVersions as an apiserver that once
// stored v1 would have it.
func setStoredVersions(t *testing.T, ctx context.Context, versions ...string) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: crdName}, crd))
	crd.Status.StoredVersions = versions
	require.NoError(t, env.Client.Status().Update(ctx, crd))
}
