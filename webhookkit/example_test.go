package webhookkit_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	v1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/webhookkit"
	"github.com/reconcilekit/reconcilekit/webhookkit/certs"
)

// A Widget gets defaulting, validation and self-managed certificates. main
// would build the manager with ctrl.GetConfigOrDie() and end with
// mgr.Start(ctrl.SetupSignalHandler()); here nothing contacts an API server
// (the manager is never started), and admit, below, plays the API server's
// calls to the registered webhooks, so the output is what a client is told.
func Example() {
	rot, err := certs.New(certs.Options{Namespace: "widgets-system", SecretName: "webhook-tls", ServiceName: "widgets-webhook",
		MutatingWebhookConfigurations: []string{"widgets-mutating"}, ValidatingWebhookConfigurations: []string{"widgets-validating"}})
	if err != nil {
		panic(err)
	}
	scheme, _ := testenv.NewScheme()
	cfg := &rest.Config{Host: "https://127.0.0.1:1"} // ctrl.GetConfigOrDie() in main
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme,
		WebhookServer: webhook.NewServer(webhook.Options{TLSOpts: []func(*tls.Config){rot.TLSOpt}})})
	if err != nil {
		panic(err)
	}
	color := field.NewPath("spec", "color")
	err = errors.Join(rot.SetupWithManager(mgr),
		mgr.AddReadyzCheck("webhook-certs", certs.ReadyCheck(mgr.GetWebhookServer())),
		webhookkit.Register(mgr, webhookkit.Webhook[*v1.Widget]{
			Default: func(_ context.Context, w *v1.Widget) error { w.Spec.Color = cmp.Or(w.Spec.Color, "blue"); return nil },
			ValidateCreate: func(_ context.Context, w *v1.Widget) (webhookkit.Warnings, field.ErrorList) {
				return nil, webhookkit.DNS1123Label(color, w.Spec.Color)
			},
			ValidateUpdate: func(_ context.Context, old, w *v1.Widget) (webhookkit.Warnings, field.ErrorList) {
				return nil, webhookkit.Immutable(color, old.Spec.Color, w.Spec.Color)
			},
		}))
	if err != nil {
		panic(err)
	}

	// The paths of controller-gen's +kubebuilder:webhook markers.
	const mutate, validate = "/mutate-test-reconcilekit-io-v1-widget", "/validate-test-reconcilekit-io-v1-widget"
	hooks := mgr.GetWebhookServer().WebhookMux()
	widget := func(color string) *v1.Widget {
		return &v1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "default"}, Spec: v1.WidgetSpec{Size: 1, Color: color}}
	}
	fmt.Println("create, no color:", admit(hooks, mutate, nil, widget("")))
	fmt.Println("create, blue:", admit(hooks, validate, nil, widget("blue")))
	fmt.Println("create, Not_A_Label:", admit(hooks, validate, nil, widget("Not_A_Label")))
	fmt.Println("update, blue to red:", admit(hooks, validate, widget("blue"), widget("red")))
	// Output:
	// create, no color: allowed, patch [{"op":"add","path":"/spec/color","value":"blue"}]
	// create, blue: allowed
	// create, Not_A_Label: denied (422) Widget.test.reconcilekit.io "w" is invalid: spec.color: Invalid value: "Not_A_Label": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')
	// update, blue to red: denied (422) Widget.test.reconcilekit.io "w" is invalid: spec.color: Invalid value: "red": field is immutable
}

// admit sends hooks the AdmissionReview the API server sends a webhook for
// the creation of obj (old nil) or its update from old, and returns the
// webhook's verdict: allowed, with the JSON patch of a mutating webhook, or
// denied, with the status code and message the client is given.
func admit(hooks http.Handler, path string, old, obj *v1.Widget) string {
	raw := func(w *v1.Widget) runtime.RawExtension {
		if w == nil {
			return runtime.RawExtension{}
		}
		w.APIVersion, w.Kind = v1.GroupVersion.String(), "Widget"
		b, err := json.Marshal(w)
		if err != nil {
			panic(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	op := admissionv1.Create
	if old != nil {
		op = admissionv1.Update
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "705ab4f5-6393-11e8-b7cc-42010a800002",
			Kind:      metav1.GroupVersionKind{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Kind: "Widget"},
			Resource:  metav1.GroupVersionResource{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version, Resource: "widgets"},
			Name:      obj.Name,
			Namespace: obj.Namespace,
			Operation: op,
			Object:    raw(obj),
			OldObject: raw(old),
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	hooks.ServeHTTP(rec, req)
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil {
		return fmt.Sprintf("HTTP %d %s", rec.Code, rec.Body)
	}
	switch r := answer.Response; {
	case !r.Allowed && r.Result != nil:
		return fmt.Sprintf("denied (%d) %s", r.Result.Code, r.Result.Message)
	case !r.Allowed:
		return "denied"
	case len(r.Patch) > 0:
		return "allowed, patch " + string(r.Patch)
	default:
		return "allowed"
	}
}

// Every problem is reported, with the field path kubectl shows.
func ExampleImageReference() {
	img := field.NewPath("spec", "image")
	for _, ref := range []string{"registry:5000/team/app:v1", "nginx", "nginx@sha256:short"} {
		fmt.Println(ref, "->", webhookkit.ImageReference(img, ref).ToAggregate())
	}
	// Output:
	// registry:5000/team/app:v1 -> <nil>
	// nginx -> spec.image: Invalid value: "nginx": must include a tag (name:tag) or digest (name@sha256:...)
	// nginx@sha256:short -> spec.image: Invalid value: "nginx@sha256:short": sha256 digest must be 64 lower-case hex characters
}
