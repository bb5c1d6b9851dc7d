package webhookkit

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The helpers below return a field.ErrorList (nil when valid) so that rules
// compose by appending and every failing field is reported together:
//
//	var errs field.ErrorList
//	errs = append(errs, webhookkit.DNS1123Subdomain(spec.Child("configMapName"), w.Spec.ConfigMapName)...)
//	errs = append(errs, webhookkit.ImageReference(spec.Child("image"), w.Spec.Image)...)

// Immutable reports newVal as invalid ("field is immutable") when it differs
// from oldVal under equality.Semantic, so that e.g. resource.Quantity "1000m"
// and "1" compare equal and nil and empty maps or slices do not (as the
// apiserver's own immutability checks behave). Use it from ValidateUpdate.
//
// The type parameter makes comparing values of different Go types (int32
// against int, which Semantic would always report as changed) a compile error.
func Immutable[V any](path *field.Path, oldVal, newVal V) field.ErrorList {
	errs := apivalidation.ValidateImmutableField(newVal, oldVal, path)
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// Ratchet returns the errors of newErrs that oldErrs does not hold too, so
// that the validation of an update reports what the update broke, not what
// the object already had. It is the webhook's counterpart of the API
// server's ratcheting of CRD schema validation (KEP-4008): an object stored
// under earlier, looser rules (or before the webhook was installed) can
// still be updated — another field edited, a storage migration's rewrite —
// while a change to an invalid field must make it valid. Validate the old
// and the new object with the same function and pass both lists:
//
//	ValidateUpdate: func(_ context.Context, oldObj, obj *v1.Widget) (webhookkit.Warnings, field.ErrorList) {
//		_, oldErrs := validate(oldObj)
//		warnings, errs := validate(obj)
//		return warnings, webhookkit.Ratchet(oldErrs, errs)
//	},
//
// Two errors are the same when their type, field path, detail and value
// (under equality.Semantic) are equal. So an error stays when the field's
// value changed, even from one invalid value to another, and when a
// cross-field rule whose detail names the other field's value (the limit
// below "the request, 2") fails after that other field changed. Errors that
// only an update can have, such as [Immutable]'s, belong outside Ratchet.
//
// Caveat: a rule that does not report the value it refused (a redacted
// secret) cannot tell one invalid value from another: a change between two
// of them passes. Report the value, or a digest of it.
func Ratchet(oldErrs, newErrs field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	for _, e := range newErrs {
		if !slices.ContainsFunc(oldErrs, func(o *field.Error) bool { return sameError(o, e) }) {
			errs = append(errs, e)
		}
	}
	return errs
}

func sameError(a, b *field.Error) bool {
	return a.Type == b.Type && a.Field == b.Field && a.Detail == b.Detail &&
		equality.Semantic.DeepEqual(a.BadValue, b.BadValue)
}

// DNS1123Label validates a reference to an object whose name must be a
// DNS-1123 label (at most 63 lowercase alphanumerics or '-', starting and
// ending alphanumeric), such as a Service or Namespace. An empty value is
// reported as Required; check for "" first if the reference is optional.
func DNS1123Label(path *field.Path, value string) field.ErrorList {
	return dnsName(path, value, validation.IsDNS1123Label)
}

// DNS1123Subdomain validates a reference to an object whose name must be a
// DNS-1123 subdomain (at most 253 characters of dot-separated labels), such
// as a ConfigMap, Secret or most other objects. An empty value is reported as
// Required; check for "" first if the reference is optional.
func DNS1123Subdomain(path *field.Path, value string) field.ErrorList {
	return dnsName(path, value, validation.IsDNS1123Subdomain)
}

func dnsName(path *field.Path, value string, check func(string) []string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range check(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

// Quantity validates that value parses as a resource.Quantity ("500m",
// "1Gi", "2"), for quantities carried in string fields or annotations (typed
// resource.Quantity fields are already parsed by the apiserver). An empty value
// is reported as Required.
//
// Caveat: it is stricter than resource.ParseQuantity in one respect: the
// value must contain a digit, because ParseQuantity reads a bare suffix or
// sign ("Gi", "m", "+", ".") as zero, which is always a typo in user input.
func Quantity(path *field.Path, value string) field.ErrorList {
	_, errs := parseQuantity(path, value)
	return errs
}

// PositiveQuantity is [Quantity] that additionally requires the value to be
// greater than zero, e.g. for a memory or CPU request held in a string field
// or an annotation. For a typed resource.Quantity field use
// [PositiveResourceQuantity].
func PositiveQuantity(path *field.Path, value string) field.ErrorList {
	q, errs := parseQuantity(path, value)
	if errs != nil {
		return errs
	}
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(path, value, "must be greater than zero")}
	}
	return nil
}

func parseQuantity(path *field.Path, value string) (resource.Quantity, field.ErrorList) {
	if value == "" {
		return resource.Quantity{}, field.ErrorList{field.Required(path, "")}
	}
	q, err := resource.ParseQuantity(value)
	if err != nil || !strings.ContainsAny(value, "0123456789") {
		return q, field.ErrorList{field.Invalid(path, value, "must be a quantity such as 500m, 2 or 1Gi")}
	}
	return q, nil
}

// ImageReference validates a container image reference that pins a version:
// it must carry a tag, a digest, or both ("nginx:1.25",
// "registry:5000/team/app:v1", "nginx@sha256:<64 hex>",
// "nginx:1.25@sha256:<64 hex>"). A bare "nginx" (implicitly :latest) is
// rejected, as are empty tags ("nginx:") and malformed digests.
//
// The grammar is the one of the distribution reference library:
// [host[:port]/]path-component[/path-component...][:tag][@algorithm:hex],
// where a first component is a registry host only if it contains '.' or ':',
// is "localhost" or contains upper-case letters; path components are
// lower-case alphanumerics joined by '.', '_', '__' or dashes; tags match
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; digests are sha256 (64 hex), sha384 (96
// hex) or sha512 (128 hex) in lower case. The repository path (without the
// host; on Docker Hub a one-component name counts as library/<name>) is at
// most 255 characters. It accepts what github.com/distribution/reference's
// ParseNormalizedNamed accepts with a tag or digest, except a registry port
// outside 1-65535 and a bracketed host that is not an IPv6 address (see
// parseImageReference), and its errors name the part that is wrong.
// An empty value is reported as Required.
func ImageReference(path *field.Path, value string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	ref, err := parseImageReference(value)
	if err != nil {
		return field.ErrorList{field.Invalid(path, value, err.Error())}
	}
	if ref.tag == "" && ref.digest == "" {
		return field.ErrorList{field.Invalid(path, value, "must include a tag (name:tag) or digest (name@sha256:...)")}
	}
	return nil
}
