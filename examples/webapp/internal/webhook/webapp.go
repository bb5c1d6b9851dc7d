// Package webhook holds the WebApp's defaulting and validating admission
// webhooks, built with webhookkit.
//
// The CRD schema already rejects what a schema can express (a missing tag,
// replicas outside 1..100, wrong types) even when the webhook is not
// installed; the webhook adds the defaults and the rules a schema cannot
// express (quantity comparisons, warnings).
//
// Both served versions have their own webhooks, each with matchPolicy
// Exact: a v1 request is defaulted and validated as v1 (errors name the
// fields the client wrote, such as spec.dbRef), a v2 request as v2, and
// neither is converted on its way through admission. With the default
// matchPolicy (Equivalent) the apiserver would also send every v1 request,
// converted by the conversion webhook, to the v2 webhooks and the other way
// round: each object would be admitted twice, and errors would name fields
// of a version the client did not use.
//
// Each webhook also carries a matchCondition (the markers' patch) that sends
// it only CREATEs and the UPDATEs that change spec. The webhooks default and
// validate spec alone, so a metadata-only update (the operator adding or
// removing its finalizer, also while the WebApp is being deleted) has nothing
// to ask them; without the condition such an update fails whenever the
// webhook server is unreachable (failurePolicy Fail), and a deleted WebApp
// stays in Terminating until it is back. Status and scale updates never
// reach the webhooks: their rules name webapps, not its subresources.
package webhook

import (
	"context"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/reconcilekit/reconcilekit/webhookkit"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
)

// MinMemory is the least memory a WebApp pod may ask for; below it the
// container runtime cannot start most web servers.
var MinMemory = resource.MustParse("16Mi")

// +kubebuilder:webhook:path=/mutate-apps-example-com-v1-webapp,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps.example.com,resources=webapps,verbs=create;update,versions=v1,name=mwebapp-v1.kb.io,admissionReviewVersions=v1,matchPolicy=Exact,patch=`{"matchConditions":[{"name":"create-or-spec-change","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/validate-apps-example-com-v1-webapp,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.example.com,resources=webapps,verbs=create;update,versions=v1,name=vwebapp-v1.kb.io,admissionReviewVersions=v1,matchPolicy=Exact,patch=`{"matchConditions":[{"name":"create-or-spec-change","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/mutate-apps-example-com-v2-webapp,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps.example.com,resources=webapps,verbs=create;update,versions=v2,name=mwebapp-v2.kb.io,admissionReviewVersions=v1,matchPolicy=Exact,patch=`{"matchConditions":[{"name":"create-or-spec-change","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`
// +kubebuilder:webhook:path=/validate-apps-example-com-v2-webapp,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.example.com,resources=webapps,verbs=create;update,versions=v2,name=vwebapp-v2.kb.io,admissionReviewVersions=v1,matchPolicy=Exact,patch=`{"matchConditions":[{"name":"create-or-spec-change","expression":"request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"}]}`

// Setup registers the WebApp webhooks with mgr's webhook server: v1's, and
// v2's, whose registration also serves /convert (controller-runtime's
// conversion webhook, because v2 is a conversion.Hub and v1 a
// conversion.Convertible in mgr's scheme).
//
// An update is validated with ratcheting (webhookkit.Ratchet): it is refused
// only for errors the old object did not have, so a WebApp stored under
// looser rules (an older release, or created while the webhook was not
// installed) can still be edited elsewhere and rewritten by the storage
// migration, while a change to its invalid field must make it valid.
func Setup(mgr ctrl.Manager) error {
	err := webhookkit.Register(mgr, webhookkit.Webhook[*webappv1.WebApp]{
		Default: Default,
		ValidateCreate: func(_ context.Context, app *webappv1.WebApp) (webhookkit.Warnings, field.ErrorList) {
			return Validate(app)
		},
		ValidateUpdate: func(_ context.Context, old, app *webappv1.WebApp) (webhookkit.Warnings, field.ErrorList) {
			_, oldErrs := Validate(old)
			warnings, errs := Validate(app)
			return warnings, webhookkit.Ratchet(oldErrs, errs)
		},
	})
	if err != nil {
		return err
	}
	return webhookkit.Register(mgr, webhookkit.Webhook[*webappv2.WebApp]{
		Default: DefaultV2,
		ValidateCreate: func(_ context.Context, app *webappv2.WebApp) (webhookkit.Warnings, field.ErrorList) {
			return ValidateV2(app)
		},
		ValidateUpdate: func(_ context.Context, old, app *webappv2.WebApp) (webhookkit.Warnings, field.ErrorList) {
			_, oldErrs := ValidateV2(old)
			warnings, errs := ValidateV2(app)
			return warnings, webhookkit.Ratchet(oldErrs, errs)
		},
	})
}

// Default fills in a v1 WebApp's replicas (1) and resources (500m CPU, 256Mi memory),
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

// Validate reports every invalid field of a v1 WebApp at once, and warns
// about mutable image tags.
func Validate(app *webappv1.WebApp) (webhookkit.Warnings, field.ErrorList) {
	spec := field.NewPath("spec")
	errs := webhookkit.ImageReference(spec.Child("image"), app.Spec.Image)
	if r := app.Spec.Replicas; r != nil && (*r < 1 || *r > 100) {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *r, "must be between 1 and 100"))
	}
	if ref := app.Spec.DBRef; ref != nil {
		errs = append(errs, webhookkit.DNS1123Label(spec.Child("dbRef"), *ref)...)
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

// DefaultV2 fills in a v2 WebApp's replicas (1), resource requests (500m
// CPU, 256Mi memory) and limits (each the request), each only when unset.
// A v2 WebApp that says nothing about resources gets what a v1 WebApp gets,
// so it reads as v1 without the ResourcesAnnotation.
func DefaultV2(_ context.Context, app *webappv2.WebApp) error {
	if app.Spec.Replicas == nil {
		app.Spec.Replicas = new(int32(1))
	}
	if app.Spec.Resources == nil {
		app.Spec.Resources = &webappv2.ResourceRequirements{}
	}
	r := app.Spec.Resources
	if r.Requests == nil {
		r.Requests = &webappv2.ContainerResources{}
	}
	if r.Limits == nil {
		r.Limits = &webappv2.ContainerResources{}
	}
	if r.Requests.CPU == nil {
		r.Requests.CPU = new(controller.DefaultCPU.DeepCopy())
	}
	if r.Requests.Memory == nil {
		r.Requests.Memory = new(controller.DefaultMemory.DeepCopy())
	}
	if r.Limits.CPU == nil {
		r.Limits.CPU = new(r.Requests.CPU.DeepCopy())
	}
	if r.Limits.Memory == nil {
		r.Limits.Memory = new(r.Requests.Memory.DeepCopy())
	}
	return nil
}

// ValidateV2 reports every invalid field of a v2 WebApp at once, and warns
// about mutable image tags. Beyond v1's rules: no limit below its request.
func ValidateV2(app *webappv2.WebApp) (webhookkit.Warnings, field.ErrorList) {
	spec := field.NewPath("spec")
	errs := webhookkit.ImageReference(spec.Child("image"), app.Spec.Image)
	if r := app.Spec.Replicas; r != nil && (*r < 1 || *r > 100) {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *r, "must be between 1 and 100"))
	}
	if db := app.Spec.Database; db != nil {
		errs = append(errs, webhookkit.DNS1123Label(spec.Child("database", "serviceName"), db.ServiceName)...)
	}
	if res := app.Spec.Resources; res != nil {
		path := spec.Child("resources")
		for _, amounts := range []struct {
			path *field.Path
			r    *webappv2.ContainerResources
		}{{path.Child("requests"), res.Requests}, {path.Child("limits"), res.Limits}} {
			if amounts.r == nil {
				continue
			}
			if c := amounts.r.CPU; c != nil && c.Sign() <= 0 {
				errs = append(errs, field.Invalid(amounts.path.Child("cpu"), c.String(), "must be positive"))
			}
			if m := amounts.r.Memory; m != nil && m.Cmp(MinMemory) < 0 {
				errs = append(errs, field.Invalid(amounts.path.Child("memory"), m.String(), "must be at least "+MinMemory.String()))
			}
		}
		if lim, req := res.Limits, res.Requests; lim != nil && req != nil {
			if l, r := lim.CPU, req.CPU; l != nil && r != nil && l.Cmp(*r) < 0 {
				errs = append(errs, field.Invalid(path.Child("limits", "cpu"), l.String(), "must be at least the request, "+r.String()))
			}
			if l, r := lim.Memory, req.Memory; l != nil && r != nil && l.Cmp(*r) < 0 {
				errs = append(errs, field.Invalid(path.Child("limits", "memory"), l.String(), "must be at least the request, "+r.String()))
			}
		}
	}
	var warnings webhookkit.Warnings
	if strings.HasSuffix(app.Spec.Image, ":latest") {
		warnings = append(warnings, "spec.image: the tag \"latest\" can change under a running WebApp; pin a version or a digest")
	}
	return warnings, errs
}
