// Package webhookkit gives a Kubernetes API type typed admission webhooks —
// defaulting and validation — in a few lines, built on controller-runtime's
// generic admission.Defaulter[T] / admission.Validator[T] and its webhook
// builder.
//
// # The problem it prevents
//
// Hand-written validating webhooks tend to return the first problem as a
// plain error. controller-runtime then denies with HTTP 403 and a bare
// string, so kubectl shows one field at a time, clients cannot tell a
// validation failure from a permission error (apierrors.IsInvalid is false),
// and users fix, re-apply and fail again. Webhooks registered by hand also
// drift from the paths controller-gen writes into the generated
// MutatingWebhookConfiguration/ValidatingWebhookConfiguration, which fails
// every request at runtime, not at build time.
//
// With this package a validation function returns a field.ErrorList; the kit
// turns it into the apiserver's own 422 Invalid status for the type's
// GroupKind, so kubectl prints every failing field:
//
//	The Widget "w" is invalid: [spec.size: Invalid value: 0: must be between 1 and 10,
//	  spec.color: Invalid value: "Not_A_Label": a lowercase RFC 1123 label must consist of ...]
//
// [Register] wires the functions through ctrl.NewWebhookManagedBy, which
// serves them at exactly the paths of `+kubebuilder:webhook` markers
// (/mutate-<group>-<version>-<kind>, /validate-...). Warnings returned by a
// validation function reach the client (kubectl prints "Warning: ...").
//
// Helpers for common rules return field.ErrorList so they compose by
// appending: [Immutable] (equality.Semantic), [DNS1123Label] and
// [DNS1123Subdomain] for references, [Quantity] and [PositiveQuantity], and
// [ImageReference], which requires a tag or digest. [Ratchet] validates an
// update as the apiserver validates a CRD's schema: only the errors the old
// object did not have refuse it.
//
// Serving certificates are handled by the subpackage certs: either
// self-managed (a CA and serving certificate in a Secret, CA bundle injected
// into the webhook configurations, rotated without failed requests) or
// external (cert-manager mounts the files; controller-runtime's certwatcher
// reloads them), with a readiness check for both.
package webhookkit
