package webhookkit_test

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	v1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/webhookkit"
	"github.com/reconcilekit/reconcilekit/webhookkit/certs"
)

// A Widget gets defaulting, validation and self-managed certificates.
func Example() {
	rot, err := certs.New(certs.Options{Namespace: "widgets-system", SecretName: "webhook-tls", ServiceName: "widgets-webhook",
		MutatingWebhookConfigurations: []string{"widgets-mutating"}, ValidatingWebhookConfigurations: []string{"widgets-validating"}})
	if err != nil {
		panic(err)
	}
	scheme, _ := testenv.NewScheme()
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Scheme: scheme,
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
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	fmt.Println(err)
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
