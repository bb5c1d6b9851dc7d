package storageversion_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
// by webhook) applied while the operator (its webhook server and storage
// migration) runs.
func TestUpgradeFromV1(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	c := env.Client
	ns := env.Namespace(t)

	// Before: v1 only. legacy passes the CRD's schema but not today's
	// webhook (memory below webhook.MinMemory): it was created while no
	// webhook was installed, as under an older release's looser rules.
	oldApps := map[string]webappv1.WebAppSpec{
		"shop": {Image: "registry.example.com/shop:1.0", Replicas: new(int32(2)), DBRef: new("orders-db"),
			Resources: &webappv1.ContainerResources{CPU: q("250m"), Memory: q("64Mi")}},
		"blog": {Image: "registry.example.com/blog:1.0", Replicas: new(int32(1)),
			Resources: &webappv1.ContainerResources{CPU: q("500m"), Memory: q("256Mi")}},
		"legacy": {Image: "registry.example.com/legacy:1.0", Replicas: new(int32(1)),
			Resources: &webappv1.ContainerResources{CPU: q("100m"), Memory: q("8Mi")}},
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

	// The operator runs before the upgrade, and its migration has looked
	// at the CRD (nothing to do: v1 is stored and the storage version).
	startWebhookServer(t, ctx)
	// Run after the migrator stops and before the webhook server does.
	t.Cleanup(func() { restoreBeforeUpgrade(t) })
	installAdmissionWebhooks(t, ctx)
	migrations := &migrationLog{}
	stopMigrator := startMigrator(t, ctx, migrations)

	// The upgrade: the current CRD, with its conversion webhook at the
	// webhook server this test starts.
	upgradeCRD(t, ctx)

	// Without a restart, the migration ends with storedVersions trimmed;
	// every WebApp stored as v1 was written (its resourceVersion moved)
	// with no change to its spec (its generation did not), legacy too.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []string{"v2"}, storedVersions(c, ctx))
	}, time.Minute, 50*time.Millisecond, "status.storedVersions trimmed to [v2] by the running operator")
	for name, spec := range oldApps {
		v2 := &webappv2.WebApp{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, v2), "read as v2 through the conversion webhook")
		assert.NotEqual(t, oldRV[name], v2.ResourceVersion, "%s was rewritten in the storage version", name)
		assert.Equal(t, int64(1), v2.Generation, "%s: the rewrite changed no spec", name)
		if spec.DBRef != nil {
			require.NotNil(t, v2.Spec.Database)
			assert.Equal(t, *spec.DBRef, v2.Spec.Database.ServiceName)
		} else {
			assert.Nil(t, v2.Spec.Database)
		}
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
	assert.Equal(t, []int{len(oldApps)}, migrations.rewritten(t), "one migration, counting the objects it rewrote")

	t.Run("v2 resources v1 cannot say survive a v1 client's update", func(t *testing.T) {
		app := &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "burst"}, Spec: webappv2.WebAppSpec{
			Image: "web:1", Database: &webappv2.DatabaseReference{ServiceName: "orders-db"},
			Resources: &webappv2.ResourceRequirements{
				Requests: &webappv2.ContainerResources{CPU: q("100m"), Memory: q("64Mi")},
				Limits:   &webappv2.ContainerResources{CPU: q("1")},
			}}}
		require.NoError(t, c.Create(ctx, app))
		assert.Equal(t, "64Mi", app.Spec.Resources.Limits.Memory.String(), "v2 defaulting: an unset limit is the request")

		v1 := &webappv1.WebApp{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(app), v1))
		assert.Equal(t, "100m", v1.Spec.Resources.CPU.String(), "v1 shows the requests")
		assert.Equal(t, new("orders-db"), v1.Spec.DBRef)
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
				Requests: &webappv2.ContainerResources{CPU: q("2")}, Limits: &webappv2.ContainerResources{CPU: q("1")}}}}
		err = c.Create(ctx, badV2)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.resources.limits.cpu", "v2 validation: no limit below its request")
	})

	// legacy's memory is below today's minimum. Validation ratchets:
	// another field may change, the invalid one only to a valid value.
	t.Run("an object invalid under today's rules can be updated elsewhere", func(t *testing.T) {
		key := client.ObjectKey{Namespace: ns, Name: "legacy"}
		v2 := &webappv2.WebApp{}
		require.NoError(t, c.Get(ctx, key, v2))
		v2.Spec.Replicas = new(int32(3))
		require.NoError(t, c.Update(ctx, v2), "v2: another field changes")
		v2.Spec.Resources.Requests.Memory = q("4Mi")
		err := c.Update(ctx, v2)
		require.Error(t, err, "v2: the invalid field changes to another invalid value")
		assert.Contains(t, err.Error(), `spec.resources.requests.memory: Invalid value: "4Mi"`)
		assert.NotContains(t, err.Error(), "spec.resources.limits.memory", "the limit did not change")

		v1 := &webappv1.WebApp{}
		require.NoError(t, c.Get(ctx, key, v1))
		v1.Spec.Image = "registry.example.com/legacy:1.1"
		require.NoError(t, c.Update(ctx, v1), "v1: another field changes")
		v1.Spec.Resources.Memory = q("4Mi")
		err = c.Update(ctx, v1)
		require.Error(t, err, "v1: the invalid field changes to another invalid value")
		assert.Contains(t, err.Error(), `spec.resources.memory: Invalid value: "4Mi"`)
		v1.Spec.Resources.Memory = q("32Mi")
		require.NoError(t, c.Update(ctx, v1), "v1: the invalid field becomes valid")
		v1.Spec.Resources.Memory = q("8Mi")
		require.Error(t, c.Update(ctx, v1), "a valid field cannot go back to an invalid value")
	})

	// The generated configurations call the webhooks only for updates that
	// change spec, so the migration's empty patches never reach them. A
	// configuration without that condition (an older one, or another
	// operator's) calls them on every update: the rewrite of an object
	// invalid under today's rules must pass all the same.
	t.Run("a webhook called on every update lets the rewrite through", func(t *testing.T) {
		invalid := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "invalid"},
			Spec: webappv1.WebAppSpec{Image: "registry.example.com/invalid:1.0", Replicas: new(int32(1)),
				Resources: &webappv1.ContainerResources{CPU: q("100m"), Memory: q("8Mi")}}}
		withoutAdmission(t, ctx, func() { require.NoError(t, c.Create(ctx, invalid)) })
		validateEveryUpdate(t, ctx, ns)
		setStoredVersions(t, ctx, "v1", "v2")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, []string{"v2"}, storedVersions(c, ctx))
		}, time.Minute, 50*time.Millisecond, "status.storedVersions trimmed: the webhook admitted the rewrite of %s", invalid.Name)
	})

	// The tests below call Migrate themselves.
	stopMigrator()
	disco := discoveryClient(t)

	t.Run("a repeated migration rewrites nothing", func(t *testing.T) {
		rvs := resourceVersions(t, ctx, ns)
		setStoredVersions(t, ctx, "v1", "v2")
		m := &storageversion.Migrator{Client: c, Reader: c, Discovery: disco, CRD: crdName}
		res, err := m.Migrate(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, res.Rewritten, "every object is stored as v2 already")
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
		m := &storageversion.Migrator{Client: failing, Reader: c, Discovery: disco, CRD: crdName}
		_, err = m.Migrate(ctx)
		require.ErrorContains(t, err, "injected")
		assert.Equal(t, []string{"v1", "v2"}, storedVersions(t, ctx), "not trimmed: blog might still be stored as v1")

		_, err = (&storageversion.Migrator{Client: c, Reader: c, Discovery: disco, CRD: crdName}).Migrate(ctx)
		require.NoError(t, err)
		assert.Equal(t, []string{"v2"}, storedVersions(t, ctx))
	})
}

// TestUnchangedWriteTellsTheStoredVersion is the control of the e2e
// suite's check that the upgraded WebApps are stored as v2
// (TestWebAppUpgrade's unchangedWrite): a WebApp written back unchanged,
// locked to the resourceVersion just read, is stored again (its version
// moves) while it is stored as v1 under the v2 storage version, and not
// once it is stored as v2. No migration runs here.
func TestUnchangedWriteTellsTheStoredVersion(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	app := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stored-as-v1"}, Spec: webappv1.WebAppSpec{
		Image: "registry.example.com/web:1.0", Replicas: new(int32(1)), Resources: &webappv1.ContainerResources{CPU: q("250m"), Memory: q("64Mi")}}}
	require.NoError(t, env.Client.Create(ctx, app))
	startWebhookServer(t, ctx)
	t.Cleanup(func() { restoreBeforeUpgrade(t) })
	upgradeCRD(t, ctx)

	unchangedWrite := func() (read, written string) {
		w := &webappv2.WebApp{}
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(app), w))
		read = w.ResourceVersion
		lock := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q}}`, read))
		require.NoError(t, env.Client.Patch(ctx, w, lock))
		return read, w.ResourceVersion
	}
	read, written := unchangedWrite()
	assert.NotEqual(t, read, written, "stored as v1: the unchanged write is stored, in v2")
	read, written = unchangedWrite()
	assert.Equal(t, read, written, "stored as v2: the unchanged write is not stored")
}

// restoreBeforeUpgrade puts the cluster back as TestMain left it, so that
// the test can run again (-count): no admission webhook configuration (they
// call a webhook server that stops with the test), and the v1-only CRD.
// The upgraded CRD cannot be turned back (v2 is in its storedVersions): it
// is deleted, with its WebApps, and the CRD of before the upgrade installed
// again.
func restoreBeforeUpgrade(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, cfg := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
	} {
		require.NoError(t, env.Client.DeleteAllOf(ctx, cfg))
	}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName}}
	require.NoError(t, client.IgnoreNotFound(env.Client.Delete(ctx, crd)))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{}))
	}, time.Minute, 50*time.Millisecond, "the upgraded CRD deleted, with its WebApps")
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(webappDir(), "testdata", "webapps-crd-v1-only.yaml")}, ErrorIfPathMissing: true,
	})
	require.NoError(t, err, "installing the v1-only CRD again")
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
		// storage version; v1 stays until the migration (which may
		// already have run).
		return slices.Contains(got.Status.StoredVersions, "v2")
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

// startWebhookServer runs the operator's webhook server with the WebApp
// webhooks (and so /convert) until the test ends.
func startWebhookServer(t *testing.T, ctx context.Context) {
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
	start(t, ctx, mgr)
}

// startMigrator runs the operator's storage migration, logging into log,
// and waits until it has read the CRD. It returns a function that stops it.
func startMigrator(t *testing.T, ctx context.Context, log *migrationLog) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:  env.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// The test may run again in this process (-count): the
		// controller's name is taken by the first run's.
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	require.NoError(t, err)
	reader := &countingReader{Reader: mgr.GetAPIReader()}
	m := &storageversion.Migrator{
		Client: mgr.GetClient(), Reader: reader, CRD: crdName,
		Log: funcr.NewJSON(log.add, funcr.Options{}), Backoff: 100 * time.Millisecond,
	}
	require.NoError(t, m.SetupWithManager(mgr))
	stop = start(t, ctx, mgr)
	require.Eventually(t, func() bool { return reader.gets.Load() > 0 }, time.Minute, 10*time.Millisecond,
		"the migration read the CRD")
	return stop
}

// start runs mgr until the test ends or stop is called, and requires that
// it stopped without error.
func start(t *testing.T, ctx context.Context, mgr ctrl.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return stop
}

// countingReader counts the Gets of its Reader.
type countingReader struct {
	client.Reader
	gets atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// migrationLog holds the Migrator's JSON log lines.
type migrationLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *migrationLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

// rewritten returns the "rewritten" count of every migration logged.
func (l *migrationLog) rewritten(t *testing.T) []int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for _, line := range l.lines {
		var entry struct {
			Rewritten *int `json:"rewritten"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		if entry.Rewritten != nil {
			out = append(out, *entry.Rewritten)
		}
	}
	return out
}

func discoveryClient(t *testing.T) discovery.DiscoveryInterface {
	t.Helper()
	d, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	return d
}

// withoutAdmission runs fn while no admission webhook configuration is
// installed, as on a cluster where the webhook was not yet deployed, and
// reinstalls them.
func withoutAdmission(t *testing.T, ctx context.Context, fn func()) {
	t.Helper()
	for _, cfg := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
	} {
		require.NoError(t, env.Client.DeleteAllOf(ctx, cfg))
	}
	// The apiserver stops calling them a moment after: retry until fn's
	// object is admitted.
	probe := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"},
		Spec: webappv1.WebAppSpec{Image: "web:1", Resources: &webappv1.ContainerResources{CPU: q("0")}}}
	require.Eventually(t, func() bool {
		return env.Client.Create(ctx, probe, client.DryRunAll) == nil
	}, time.Minute, 50*time.Millisecond, "an invalid WebApp admitted once the webhooks are gone")
	fn()
	installAdmissionWebhooks(t, ctx)
}

// validateEveryUpdate removes the matchConditions from the validating
// webhooks, so that the apiserver calls them for every update, and waits
// until it does: a metadata-only update of a WebApp in ns reaches the v2
// webhook.
func validateEveryUpdate(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	var cfgs admissionregistrationv1.ValidatingWebhookConfigurationList
	require.NoError(t, env.Client.List(ctx, &cfgs))
	for i := range cfgs.Items {
		for j := range cfgs.Items[i].Webhooks {
			cfgs.Items[i].Webhooks[j].MatchConditions = nil
		}
		require.NoError(t, env.Client.Update(ctx, &cfgs.Items[i]))
	}
	app := &webappv2.WebApp{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, app))
	const path = "/validate-apps-example-com-v2-webapp"
	n := 0
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		before := webhookCalls(c, path)
		n++
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{"probe":"%d"}}}`, n))
		require.NoError(c, env.Client.Patch(ctx, app, patch))
		assert.Greater(c, webhookCalls(c, path), before)
	}, time.Minute, 50*time.Millisecond, "a metadata-only update calls the validating webhook")
}

// webhookCalls is how many requests the webhook server answered on path.
func webhookCalls(t require.TestingT, path string) float64 {
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "webhook" && l.GetValue() == path {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
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

func storedVersions(t require.TestingT, ctx context.Context) []string {
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
