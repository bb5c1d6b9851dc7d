package webhookkit_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/webhookkit"
	"github.com/reconcilekit/reconcilekit/webhookkit/certs"
)

var env *testenv.Env

// selectorLabel scopes the envtest-installed webhooks to Widgets carrying it,
// so objects created without it are not intercepted.
const selectorLabel = "webhookkit.test/admission"

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	os.Exit(testenv.Main(m, &env, testenv.Options{WebhookInstallOptions: envtest.WebhookInstallOptions{
		MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{mutatingConfig()},
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{validatingConfig()},
	}}))
}

func widgetRules(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{testv1.GroupVersion.Group}, APIVersions: []string{"v1"}, Resources: []string{"widgets"},
		},
	}}
}

// The configurations are what controller-gen generates from
// +kubebuilder:webhook markers; envtest rewrites the service references to
// its local URL and CA.
func mutatingConfig() *admissionregistrationv1.MutatingWebhookConfiguration {
	path := "/mutate-test-reconcilekit-io-v1-widget"
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "webhookkit-test-mutating"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mwidget.test.reconcilekit.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "webhook", Namespace: "system", Path: &path}},
			Rules:                   widgetRules(admissionregistrationv1.Create, admissionregistrationv1.Update),
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{selectorLabel: "true"}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

func validatingConfig() *admissionregistrationv1.ValidatingWebhookConfiguration {
	path := "/validate-test-reconcilekit-io-v1-widget"
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "webhookkit-test-validating"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vwidget.test.reconcilekit.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "webhook", Namespace: "system", Path: &path}},
			Rules:                   widgetRules(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete),
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{selectorLabel: "true"}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
}

const imageAnnotation = "test.reconcilekit.io/image"

func validateWidget(w *testv1.Widget) (webhookkit.Warnings, field.ErrorList) {
	var errs field.ErrorList
	var warnings webhookkit.Warnings
	spec := field.NewPath("spec")
	if w.Spec.Size < 1 || w.Spec.Size > 10 {
		errs = append(errs, field.Invalid(spec.Child("size"), w.Spec.Size, "must be between 1 and 10"))
	} else if w.Spec.Size > 5 {
		warnings = append(warnings, "spec.size above 5 is deprecated")
	}
	errs = append(errs, webhookkit.DNS1123Label(spec.Child("color"), w.Spec.Color)...)
	if img, ok := w.Annotations[imageAnnotation]; ok {
		errs = append(errs, webhookkit.ImageReference(field.NewPath("metadata", "annotations").Key(imageAnnotation), img)...)
	}
	return warnings, errs
}

var widgetWebhook = webhookkit.Webhook[*testv1.Widget]{
	Default: func(_ context.Context, w *testv1.Widget) error {
		if w.Spec.Color == "" {
			w.Spec.Color = "blue"
		}
		return nil
	},
	ValidateCreate: func(_ context.Context, w *testv1.Widget) (webhookkit.Warnings, field.ErrorList) {
		return validateWidget(w)
	},
	ValidateUpdate: func(_ context.Context, oldW, newW *testv1.Widget) (webhookkit.Warnings, field.ErrorList) {
		warnings, errs := validateWidget(newW)
		return warnings, append(errs, webhookkit.Immutable(field.NewPath("spec", "color"), oldW.Spec.Color, newW.Spec.Color)...)
	},
	ValidateDelete: func(_ context.Context, w *testv1.Widget) (webhookkit.Warnings, field.ErrorList) {
		if w.Labels["protected"] == "true" {
			return nil, field.ErrorList{field.Forbidden(field.NewPath("metadata", "labels").Key("protected"), "remove the label before deleting")}
		}
		return nil, nil
	},
}

var startOnce sync.Once

// startManager serves widgetWebhook with envtest's certificates, mounted at
// its LocalServingCertDir: the external certificate mode, where
// controller-runtime's certwatcher does the reloading.
func startManager(t *testing.T) {
	t.Helper()
	startOnce.Do(func() {
		wio := env.Environment.WebhookInstallOptions
		mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
			Scheme:  env.Scheme,
			Metrics: metricsserver.Options{BindAddress: "0"},
			WebhookServer: webhook.NewServer(webhook.Options{
				Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir,
			}),
		})
		require.NoError(t, err)
		require.NoError(t, webhookkit.Register(mgr, widgetWebhook))
		ready := certs.ReadyCheck(mgr.GetWebhookServer())
		require.Error(t, ready(nil), "not ready before the server serves a certificate")
		go func() {
			if err := mgr.Start(context.Background()); err != nil {
				panic(err)
			}
		}()
		require.Eventually(t, func() bool { return ready(nil) == nil }, 30*time.Second, 50*time.Millisecond)
	})
}

type warningCollector struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningCollector) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningCollector) get() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// clientWithWarnings returns a client whose warnings are collected.
func clientWithWarnings(t *testing.T) (client.Client, *warningCollector) {
	t.Helper()
	wc := &warningCollector{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandlerWithContext = wc
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return c, wc
}

func newWidget(ns, name string) *testv1.Widget {
	return &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{selectorLabel: "true"}}}
}

func TestDefaultsAppliedOnCreate(t *testing.T) {
	testenv.Require(t)
	startManager(t)
	ctx, c := t.Context(), env.Client
	w := newWidget(env.Namespace(t), "defaulted")
	w.Spec.Size = 1
	require.NoError(t, c.Create(ctx, w))
	assert.Equal(t, "blue", w.Spec.Color, "the create response carries the default")

	var got testv1.Widget
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), &got))
	assert.Equal(t, "blue", got.Spec.Color, "the default is persisted")
}

func TestInvalidObjectRejectedWithEveryField(t *testing.T) {
	testenv.Require(t)
	startManager(t)
	w := newWidget(env.Namespace(t), "invalid")
	w.Spec.Color = "Not_A_Label"
	w.Annotations = map[string]string{imageAnnotation: "nginx"}

	err := env.Client.Create(t.Context(), w)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	msg := err.Error()
	for _, want := range []string{
		`admission webhook "vwidget.test.reconcilekit.io" denied the request`,
		`Widget.test.reconcilekit.io "invalid" is invalid`,
		`spec.size: Invalid value: 0: must be between 1 and 10`,
		`spec.color: Invalid value: "Not_A_Label"`,
		`metadata.annotations[test.reconcilekit.io/image]: Invalid value: "nginx": must include a tag`,
	} {
		assert.Contains(t, msg, want)
	}
	status := err.(apierrors.APIStatus).Status()
	assert.Equal(t, "test.reconcilekit.io", status.Details.Group)
	assert.Equal(t, "Widget", status.Details.Kind)
	var fields []string
	for _, c := range status.Details.Causes {
		fields = append(fields, c.Field)
	}
	assert.Contains(t, fields, "spec.size")
	assert.Contains(t, fields, "spec.color")
	assert.Contains(t, fields, "metadata.annotations[test.reconcilekit.io/image]")
}

func TestImmutableFieldOnUpdate(t *testing.T) {
	testenv.Require(t)
	startManager(t)
	ctx, c := t.Context(), env.Client
	w := newWidget(env.Namespace(t), "immutable")
	w.Spec.Size, w.Spec.Color = 2, "red"
	require.NoError(t, c.Create(ctx, w))

	w.Spec.Color = "green"
	err := c.Update(ctx, w)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "want 422 Invalid, got %v", err)
	assert.Contains(t, err.Error(), `spec.color: Invalid value: "green": field is immutable`)

	var got testv1.Widget
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(w), &got))
	assert.Equal(t, "red", got.Spec.Color)
	got.Spec.Size = 3
	require.NoError(t, c.Update(ctx, &got), "other fields may change")
}

func TestWarningsReachClient(t *testing.T) {
	testenv.Require(t)
	startManager(t)
	c, warnings := clientWithWarnings(t)
	w := newWidget(env.Namespace(t), "warned")
	w.Spec.Size = 7
	require.NoError(t, c.Create(t.Context(), w))
	assert.Contains(t, warnings.get(), "spec.size above 5 is deprecated")

	// Warnings also accompany a denial.
	w2 := newWidget(w.Namespace, "warned-and-denied")
	w2.Spec.Size, w2.Spec.Color = 7, "BAD"
	require.Error(t, c.Create(t.Context(), w2))
	n := 0
	for _, m := range warnings.get() {
		if strings.Contains(m, "spec.size above 5") {
			n++
		}
	}
	assert.Equal(t, 2, n)
}

func TestDeleteValidation(t *testing.T) {
	testenv.Require(t)
	startManager(t)
	ctx, c := t.Context(), env.Client
	w := newWidget(env.Namespace(t), "protected")
	w.Spec.Size = 1
	w.Labels["protected"] = "true"
	require.NoError(t, c.Create(ctx, w))

	err := c.Delete(ctx, w)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metadata.labels[protected]: Forbidden: remove the label before deleting")

	delete(w.Labels, "protected")
	require.NoError(t, c.Update(ctx, w))
	require.NoError(t, c.Delete(ctx, w))
}
