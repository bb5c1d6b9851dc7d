package webhook_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/reconcilekit/reconcilekit/internal/testenv"

	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

var env *testenv.Env

func webappDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestMain starts the apiserver with the WebApp CRD as controller-gen
// generates it (config/crd/bases: no conversion webhook, and the scheme
// has no WebApp version for envtest to add one, so v1 and v2 requests need
// no webhook server) and no webhook configuration; the tests install the
// generated ones. Under -short the unit tests run alone.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{
		CRDDirectoryPaths: []string{filepath.Join(webappDir(), "config", "crd", "bases")},
	}))
}

// generatedWebhooks reads config/webhook/manifests.yaml (what the
// +kubebuilder:webhook markers generate), with every webhook's clientConfig
// replaced by url, the path appended.
func generatedWebhooks(t *testing.T, url string) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	t.Helper()
	f, err := os.Open(filepath.Join(webappDir(), "config", "webhook", "manifests.yaml"))
	require.NoError(t, err)
	defer f.Close()
	cc := func(c *admissionregistrationv1.WebhookClientConfig) {
		*c = admissionregistrationv1.WebhookClientConfig{URL: new(url + *c.Service.Path)}
	}
	var (
		v *admissionregistrationv1.ValidatingWebhookConfiguration
		m *admissionregistrationv1.MutatingWebhookConfiguration
	)
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
			m = &admissionregistrationv1.MutatingWebhookConfiguration{}
			require.NoError(t, yaml.UnmarshalStrict(b, m))
			for i := range m.Webhooks {
				cc(&m.Webhooks[i].ClientConfig)
				require.Equal(t, admissionregistrationv1.Fail, *m.Webhooks[i].FailurePolicy, m.Webhooks[i].Name)
			}
		case "ValidatingWebhookConfiguration":
			v = &admissionregistrationv1.ValidatingWebhookConfiguration{}
			require.NoError(t, yaml.UnmarshalStrict(b, v))
			for i := range v.Webhooks {
				cc(&v.Webhooks[i].ClientConfig)
				require.Equal(t, admissionregistrationv1.Fail, *v.Webhooks[i].FailurePolicy, v.Webhooks[i].Name)
			}
		}
	}
	require.NotNil(t, v, "a ValidatingWebhookConfiguration in manifests.yaml")
	require.NotNil(t, m, "a MutatingWebhookConfiguration in manifests.yaml")
	require.Len(t, v.Webhooks, 2)
	require.Len(t, m.Webhooks, 2)
	return v, m
}

// closedURL is https://127.0.0.1:<port> with nothing listening on port: a
// webhook server that is down.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return "https://" + addr
}

// webappVersion is one served version's WebApp, as the test drives it.
type webappVersion struct {
	name string
	// validating and mutating are the generated names of its webhooks.
	validating, mutating string
}

var versions = []webappVersion{
	{name: "v1", validating: "vwebapp-v1.kb.io", mutating: "mwebapp-v1.kb.io"},
	{name: "v2", validating: "vwebapp-v2.kb.io", mutating: "mwebapp-v2.kb.io"},
}

// newApp returns a valid WebApp of version v named name in namespace ns,
// unstructured: the scheme knows neither version, so envtest installs the
// CRD without a conversion webhook and each version is stored as written.
func (v webappVersion) newApp(ns, name string) *unstructured.Unstructured {
	app := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"image": "registry.example.com/web:1.0", "replicas": int64(1)},
	}}
	app.SetAPIVersion("apps.example.com/" + v.name)
	app.SetKind("WebApp")
	app.SetNamespace(ns)
	app.SetName(name)
	return app
}

// tag numbers the images changeSpec sets, so each call changes spec.
var tag int

// changeSpec patches app's spec to an image it never had, returning the
// apiserver's answer.
func changeSpec(ctx context.Context, app *unstructured.Unstructured) error {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
		return err
	}
	before := app.DeepCopy()
	tag++
	if err := unstructured.SetNestedField(app.Object, fmt.Sprintf("registry.example.com/web:1.%d", tag), "spec", "image"); err != nil {
		return err
	}
	return env.Client.Patch(ctx, app, client.MergeFrom(before))
}

// setFinalizer adds (add) or removes the operator's finalizer with a
// metadata-only merge patch, as the operator's reconciler does.
func setFinalizer(ctx context.Context, app *unstructured.Unstructured, add bool) error {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
		return err
	}
	before := app.DeepCopy()
	if add {
		controllerutil.AddFinalizer(app, controller.Finalizer)
	} else {
		controllerutil.RemoveFinalizer(app, controller.Finalizer)
	}
	return env.Client.Patch(ctx, app, client.MergeFrom(before))
}

// refusedBy reports whether err is the apiserver failing to call webhook.
func refusedBy(err error, webhook string) bool {
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("failed calling webhook %q", webhook))
}

// TestMetadataOnlyUpdatesSkipTheWebhooks installs the generated webhook
// configurations (failurePolicy Fail) with the webhook server down, and
// shows that the operator can still add and remove its finalizer, and so
// finish deleting a WebApp, in v1 and v2, while creating a WebApp or
// changing a spec is refused: the webhooks' matchConditions send them only
// CREATEs and the UPDATEs that change spec.
func TestMetadataOnlyUpdatesSkipTheWebhooks(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	ns := env.Namespace(t)

	// Created before the webhooks are installed: creating needs them.
	apps := map[string]*unstructured.Unstructured{}
	for _, v := range versions {
		apps[v.name] = v.newApp(ns, "shop-"+v.name)
		require.NoError(t, env.Client.Create(ctx, apps[v.name]))
	}

	validating, mutating := generatedWebhooks(t, closedURL(t))
	// One configuration at a time, each waited for until the apiserver
	// calls its webhooks (and fails): mutating webhooks run first, so with
	// both installed a refusal would not show the validating ones active.
	for _, step := range []struct {
		cfg     client.Object
		webhook func(webappVersion) string
	}{
		{validating, func(v webappVersion) string { return v.validating }},
		{mutating, func(v webappVersion) string { return v.mutating }},
	} {
		require.NoError(t, env.Client.Create(ctx, step.cfg))
		for _, v := range versions {
			var last error
			require.Eventually(t, func() bool {
				last = changeSpec(ctx, apps[v.name])
				return refusedBy(last, step.webhook(v))
			}, time.Minute, 100*time.Millisecond, "a %s spec change refused by %s; last: %v", v.name, step.webhook(v), last)
		}
	}

	for _, v := range versions {
		t.Run(v.name, func(t *testing.T) {
			app := apps[v.name]

			err := env.Client.Create(ctx, v.newApp(ns, "new-"+v.name))
			assert.True(t, refusedBy(err, v.mutating), "creating calls the webhooks (and fails): %v", err)
			err = changeSpec(ctx, app)
			assert.True(t, refusedBy(err, v.mutating), "a spec change calls the webhooks (and fails): %v", err)

			require.NoError(t, setFinalizer(ctx, app, true), "adding the finalizer")
			require.Contains(t, app.GetFinalizers(), controller.Finalizer)
			require.NoError(t, setFinalizer(ctx, app, false), "removing the finalizer")
			require.NotContains(t, app.GetFinalizers(), controller.Finalizer)

			// Deletion: the finalizer holds the WebApp in Terminating until
			// the operator removes it, an UPDATE with deletionTimestamp set.
			require.NoError(t, setFinalizer(ctx, app, true))
			require.NoError(t, env.Client.Delete(ctx, app))
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(app), app))
			require.NotNil(t, app.GetDeletionTimestamp(), "terminating, held by the finalizer")
			err = changeSpec(ctx, app)
			assert.True(t, refusedBy(err, v.mutating), "a spec change while terminating still calls the webhooks: %v", err)
			require.NoError(t, setFinalizer(ctx, app, false), "removing the finalizer from a terminating WebApp")
			require.Eventually(t, func() bool {
				err := env.Client.Get(ctx, client.ObjectKeyFromObject(app), v.newApp("", ""))
				return apierrors.IsNotFound(err)
			}, 30*time.Second, 50*time.Millisecond, "the WebApp is gone")
		})
	}
}
