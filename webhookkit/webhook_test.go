package webhookkit

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, testv1.AddToScheme(s))
	return s
}

// twoFieldErrors fails on two fields so tests can check that both reach the
// message and the causes.
func twoFieldErrors(_ context.Context, w *testv1.Widget) (Warnings, field.ErrorList) {
	spec := field.NewPath("spec")
	return Warnings{"size is checked"}, field.ErrorList{
		field.Invalid(spec.Child("size"), w.Spec.Size, "must be at least 1"),
		field.NotSupported(spec.Child("color"), w.Spec.Color, []string{"blue", "red"}),
	}
}

func TestInvalidConversion(t *testing.T) {
	s := testScheme(t)
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w1"}, Spec: testv1.WidgetSpec{Color: "green"}}
	_, errs := twoFieldErrors(context.Background(), w)

	err := invalid(s, w, errs)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err))
	status := err.(apierrors.APIStatus).Status()
	assert.Equal(t, int32(http.StatusUnprocessableEntity), status.Code)
	assert.Equal(t, "test.reconcilekit.io", status.Details.Group)
	assert.Equal(t, "Widget", status.Details.Kind)
	assert.Equal(t, "w1", status.Details.Name)
	assert.Equal(t,
		`Widget.test.reconcilekit.io "w1" is invalid: [spec.size: Invalid value: 0: must be at least 1, `+
			`spec.color: Unsupported value: "green": supported values: "blue", "red"]`,
		status.Message)
	if assert.Len(t, status.Details.Causes, 2) {
		assert.Equal(t, "spec.size", status.Details.Causes[0].Field)
		assert.Equal(t, metav1.CauseTypeFieldValueInvalid, status.Details.Causes[0].Type)
		assert.Equal(t, "spec.color", status.Details.Causes[1].Field)
		assert.Equal(t, metav1.CauseTypeFieldValueNotSupported, status.Details.Causes[1].Type)
	}

	assert.NoError(t, invalid(s, w, nil), "an empty list admits")
	assert.NoError(t, invalid(s, w, field.ErrorList{}), "an empty list admits")

	// A type missing from the scheme still reports every field.
	err = invalid(runtime.NewScheme(), w, errs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.size")
	assert.Contains(t, err.Error(), "spec.color")
}

// TestValidatorResponse runs the adapter through controller-runtime's real
// admission handler, as the webhook server does.
func TestValidatorResponse(t *testing.T) {
	s := testScheme(t)
	var gotOld, gotNew *testv1.Widget
	v := &validator[*testv1.Widget]{scheme: s, wh: Webhook[*testv1.Widget]{
		ValidateCreate: twoFieldErrors,
		ValidateUpdate: func(_ context.Context, oldObj, newObj *testv1.Widget) (Warnings, field.ErrorList) {
			gotOld, gotNew = oldObj, newObj
			return nil, Immutable(field.NewPath("spec", "color"), oldObj.Spec.Color, newObj.Spec.Color)
		},
	}}
	h := admission.WithValidator[*testv1.Widget](s, v)

	raw := func(w *testv1.Widget) runtime.RawExtension {
		w.APIVersion, w.Kind = testv1.GroupVersion.String(), "Widget"
		b, err := json.Marshal(w)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	red := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns"}, Spec: testv1.WidgetSpec{Color: "red", Size: 2}}
	blue := red.DeepCopy()
	blue.Spec.Color = "blue"

	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Object: raw(red.DeepCopy()),
	}})
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
	assert.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
	assert.Contains(t, resp.Result.Message, "spec.size: Invalid value: 2")
	assert.Contains(t, resp.Result.Message, `spec.color: Unsupported value: "red"`)
	assert.Equal(t, []string{"size is checked"}, resp.Warnings, "warnings accompany a denial")

	resp = h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Update, Object: raw(blue.DeepCopy()), OldObject: raw(red.DeepCopy()),
	}})
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code)
	assert.Contains(t, resp.Result.Message, `Widget.test.reconcilekit.io "w" is invalid: spec.color: Invalid value: "blue": field is immutable`)
	require.NotNil(t, gotOld)
	assert.Equal(t, "red", gotOld.Spec.Color, "old and new are not swapped")
	assert.Equal(t, "blue", gotNew.Spec.Color)

	resp = h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Delete, OldObject: raw(red.DeepCopy()),
	}})
	assert.True(t, resp.Allowed, "a nil ValidateDelete admits")
}

func TestDefaulterPatch(t *testing.T) {
	s := testScheme(t)
	h := admission.WithDefaulter[*testv1.Widget](s, defaulter[*testv1.Widget]{fn: func(_ context.Context, w *testv1.Widget) error {
		if w.Spec.Color == "" {
			w.Spec.Color = "blue"
		}
		return nil
	}})
	// A spec with one field set: an empty spec is left out of the encoding
	// (omitzero), and the patch would then add the whole spec.
	w := &testv1.Widget{TypeMeta: metav1.TypeMeta{APIVersion: testv1.GroupVersion.String(), Kind: "Widget"}, ObjectMeta: metav1.ObjectMeta{Name: "w"},
		Spec: testv1.WidgetSpec{Size: 1}}
	b, err := json.Marshal(w)
	require.NoError(t, err)
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: b},
	}})
	assert.True(t, resp.Allowed)
	require.Len(t, resp.Patches, 1)
	assert.Equal(t, "/spec/color", resp.Patches[0].Path)
	assert.Equal(t, "blue", resp.Patches[0].Value)
}

// TestRegisterPaths checks that Register serves the paths controller-gen's
// +kubebuilder:webhook markers generate. The manager is never started, so no
// apiserver is contacted.
func TestRegisterPaths(t *testing.T) {
	newMgr := func(t *testing.T, s *runtime.Scheme) ctrl.Manager {
		mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
			Scheme:        s,
			Metrics:       metricsserver.Options{BindAddress: "0"},
			WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1"}),
		})
		require.NoError(t, err)
		return mgr
	}
	served := func(mgr ctrl.Manager, path string) bool {
		_, pattern := mgr.GetWebhookServer().WebhookMux().Handler(&http.Request{URL: &url.URL{Path: path}})
		return pattern == path
	}
	const mutate, validate = "/mutate-test-reconcilekit-io-v1-widget", "/validate-test-reconcilekit-io-v1-widget"

	mgr := newMgr(t, testScheme(t))
	require.NoError(t, Register(mgr, Webhook[*testv1.Widget]{
		Default:        func(context.Context, *testv1.Widget) error { return nil },
		ValidateCreate: twoFieldErrors,
	}))
	assert.True(t, served(mgr, mutate))
	assert.True(t, served(mgr, validate))

	mgr = newMgr(t, testScheme(t))
	require.NoError(t, Register(mgr, Webhook[*testv1.Widget]{ValidateDelete: twoFieldErrors}))
	assert.False(t, served(mgr, mutate), "no defaulter, no mutating path")
	assert.True(t, served(mgr, validate))

	err := Register(newMgr(t, testScheme(t)), Webhook[*testv1.Widget]{})
	assert.ErrorContains(t, err, "neither Default nor any Validate function is set")

	err = Register(newMgr(t, runtime.NewScheme()), Webhook[*testv1.Widget]{ValidateCreate: twoFieldErrors})
	assert.ErrorContains(t, err, "*v1.Widget")
}
