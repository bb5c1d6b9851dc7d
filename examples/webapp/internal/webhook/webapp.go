// Package webhook holds the WebApp's defaulting and validating admission
// webhooks, built with webhookkit.
//
// The CRD schema already rejects what a schema can express (a missing tag,
// replicas outside 1..100, wrong types) even when the webhook is not
// installed; the webhook adds the defaults and the rules a schema cannot
// express (quantity comparisons, warnings).
package webhook

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/reconcilekit/reconcilekit/webhookkit"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

// MinMemory is the least memory a WebApp pod may ask for; below it the
// container runtime cannot start most web servers.
var MinMemory = resource.MustParse("16Mi")

// +kubebuilder:webhook:path=/mutate-apps-example-com-v1-webapp,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps.example.com,resources=webapps,verbs=create;update,versions=v1,name=mwebapp-v1.kb.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-apps-example-com-v1-webapp,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.example.com,resources=webapps,verbs=create;update,versions=v1,name=vwebapp-v1.kb.io,admissionReviewVersions=v1

// Setup registers the WebApp webhooks with mgr's webhook server.
func Setup(mgr ctrl.Manager) error {
	return webhookkit.Register(mgr, webhookkit.Webhook[*webappv1.WebApp]{
		Default: Default,
		ValidateCreate: func(_ context.Context, app *webappv1.WebApp) (webhookkit.Warnings, field.ErrorList) {
			return Validate(app)
		},
		ValidateUpdate: func(_ context.Context, _, app *webappv1.WebApp) (webhookkit.Warnings, field.ErrorList) {
			return Validate(app)
		},
	})
}

// Default fills in replicas (1) and resources (500m CPU, 256Mi memory),
// each only when unset.
func Default(_ context.Context, app *webappv1.WebApp) error {
	if app.Spec.Replicas == nil {
		app.Spec.Replicas = new(int32(1))
	}
	if app.Spec.Resources == nil {
		app.Spec.Resources = &webappv1.ContainerResources{}
	}
	if app.Spec.Resources.CPU == nil {
		app.Spec.Resources.CPU = new(controller.DefaultCPU.DeepCopy())
	}
	if app.Spec.Resources.Memory == nil {
		app.Spec.Resources.Memory = new(controller.DefaultMemory.DeepCopy())
	}
	return nil
}

// Validate reports every invalid field at once, and warns about mutable
// image tags.
func Validate(app *webappv1.WebApp) (webhookkit.Warnings, field.ErrorList) {
	spec := field.NewPath("spec")
	errs := webhookkit.ImageReference(spec.Child("image"), app.Spec.Image)
	if r := app.Spec.Replicas; r != nil && (*r < 1 || *r > 100) {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *r, "must be between 1 and 100"))
	}
	if app.Spec.DBRef != "" {
		errs = append(errs, webhookkit.DNS1123Label(spec.Child("dbRef"), app.Spec.DBRef)...)
	}
	if res := app.Spec.Resources; res != nil {
		if res.CPU != nil && res.CPU.Sign() <= 0 {
			errs = append(errs, field.Invalid(spec.Child("resources", "cpu"), res.CPU.String(), "must be positive"))
		}
		if res.Memory != nil && res.Memory.Cmp(MinMemory) < 0 {
			errs = append(errs, field.Invalid(spec.Child("resources", "memory"), res.Memory.String(), "must be at least "+MinMemory.String()))
		}
	}
	var warnings webhookkit.Warnings
	if strings.HasSuffix(app.Spec.Image, ":latest") {
		warnings = append(warnings, "spec.image: the tag \"latest\" can change under a running WebApp; pin a version or a digest")
	}
	return warnings, errs
}
