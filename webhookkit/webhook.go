package webhookkit

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Warnings are messages returned to the client alongside an admitted or
// denied request; kubectl prints each as "Warning: <message>". It is
// controller-runtime's type, aliased so user code needs no extra import.
type Warnings = admission.Warnings

// Webhook describes the admission behaviour of one API type T (a pointer such
// as *v1.Widget). Every function is optional; nil means "nothing to do" for
// that operation.
//
// Validation functions return a field.ErrorList instead of an error so that
// every failing field is reported at once: the kit turns a non-empty list into
// apierrors.NewInvalid for T's GroupKind (HTTP 422), which kubectl prints as
//
//	Widget.test.reconcilekit.io "w" is invalid: [spec.size: Invalid value: 0: must be at least 1, spec.color: ...]
//
// Warnings are passed to the client whether or not the request is denied.
//
// Caveats:
//   - The apiserver only calls a webhook for the operations listed in the
//     webhook configuration's rules; ValidateDelete is only invoked when the
//     validating configuration includes DELETE (controller-gen:
//     `verbs=create;update;delete`).
//   - Default runs before validation and may be called more than once for the
//     same request (reinvocation policy); it must be idempotent.
//   - Default returning an error denies the request (HTTP 403) with the
//     error's message; return an apierrors status error to choose the code.
type Webhook[T client.Object] struct {
	// Default sets defaults on obj in place; the kit computes the JSON patch.
	// It is not called for DELETE.
	Default func(ctx context.Context, obj T) error
	// ValidateCreate validates a new object (after defaulting).
	ValidateCreate func(ctx context.Context, obj T) (Warnings, field.ErrorList)
	// ValidateUpdate validates a change from oldObj to newObj (after
	// defaulting newObj). Use [Immutable] for fields that must not change.
	ValidateUpdate func(ctx context.Context, oldObj, newObj T) (Warnings, field.ErrorList)
	// ValidateDelete validates a deletion; obj is the object being deleted.
	ValidateDelete func(ctx context.Context, obj T) (Warnings, field.ErrorList)
}

// Register serves wh for the type PT on mgr's webhook server, through
// controller-runtime's builder (ctrl.NewWebhookManagedBy), so the paths are
// exactly those controller-gen's `+kubebuilder:webhook` markers generate:
//
//	/mutate-<group with dots replaced by dashes>-<version>-<lowercase kind>
//	/validate-<group with dots replaced by dashes>-<version>-<lowercase kind>
//
// Call it as Register(mgr, Webhook[*v1.Widget]{...}); both type parameters are
// inferred.
//
// Guarantees:
//   - A mutating webhook is registered only when wh.Default is set, a
//     validating webhook only when at least one Validate function is set.
//   - Objects are decoded into PT with mgr's scheme before any function runs;
//     user code never sees runtime.Object or raw JSON.
//
// Caveats:
//   - PT must be registered in mgr's scheme; otherwise an error naming the
//     type is returned.
//   - Registering the same type twice on one manager is an error in the
//     webhook server (duplicate path); the builder silently skips it.
func Register[T any, PT interface {
	*T
	client.Object
}](mgr ctrl.Manager, wh Webhook[PT]) error {
	obj := PT(new(T))
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("webhookkit: registering webhooks for %T: %w", obj, err)
	}
	validates := wh.ValidateCreate != nil || wh.ValidateUpdate != nil || wh.ValidateDelete != nil
	if wh.Default == nil && !validates {
		return fmt.Errorf("webhookkit: registering webhooks for %s: neither Default nor any Validate function is set", gvk.Kind)
	}
	b := ctrl.NewWebhookManagedBy(mgr, obj)
	if wh.Default != nil {
		b = b.WithDefaulter(defaulter[PT]{fn: wh.Default})
	}
	if validates {
		b = b.WithValidator(&validator[PT]{wh: wh, scheme: mgr.GetScheme()})
	}
	if err := b.Complete(); err != nil {
		return fmt.Errorf("webhookkit: registering webhooks for %s: %w", gvk, err)
	}
	return nil
}

// defaulter adapts a function to admission.Defaulter[T].
type defaulter[T client.Object] struct {
	fn func(context.Context, T) error
}

func (d defaulter[T]) Default(ctx context.Context, obj T) error { return d.fn(ctx, obj) }

// validator adapts a Webhook's Validate functions to admission.Validator[T],
// converting field.ErrorLists into Invalid status errors.
type validator[T client.Object] struct {
	wh     Webhook[T]
	scheme *runtime.Scheme
}

var _ admission.Validator[client.Object] = &validator[client.Object]{}

func (v *validator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	if v.wh.ValidateCreate == nil {
		return nil, nil
	}
	w, errs := v.wh.ValidateCreate(ctx, obj)
	return w, invalid(v.scheme, obj, errs)
}

func (v *validator[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	if v.wh.ValidateUpdate == nil {
		return nil, nil
	}
	w, errs := v.wh.ValidateUpdate(ctx, oldObj, newObj)
	return w, invalid(v.scheme, newObj, errs)
}

func (v *validator[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	if v.wh.ValidateDelete == nil {
		return nil, nil
	}
	w, errs := v.wh.ValidateDelete(ctx, obj)
	return w, invalid(v.scheme, obj, errs)
}

// invalid converts errs into the apiserver's own 422 Invalid status for obj's
// GroupKind, listing every error in the message and in status.details.causes.
// It returns nil for an empty list. controller-runtime forwards an
// apierrors.APIStatus unchanged to the apiserver, which returns it to the
// client (prefixed with the webhook's name).
func invalid(scheme *runtime.Scheme, obj client.Object, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		// Unreachable after Register, which resolved the same type; still
		// report every field rather than hiding them behind a scheme error.
		return errors.Join(fmt.Errorf("webhookkit: resolving kind of %T: %w", obj, err), errs.ToAggregate())
	}
	return apierrors.NewInvalid(gvk.GroupKind(), obj.GetName(), errs)
}
