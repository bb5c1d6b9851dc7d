package conditions

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/reconcilekit/reconcilekit/internal/text"
)

const (
	// maxTypeLength is the maxLength in the OpenAPI schema of
	// metav1.Condition.Type (a prefix of at most 253 characters, "/" and a
	// name of at most 63 would otherwise be allowed: 317).
	maxTypeLength = 316
	// maxReasonLength and maxMessageLength are apimachinery's limits for
	// metav1.Condition, in bytes (CRD schemas count characters, so a byte
	// limit satisfies both).
	maxReasonLength  = 1024
	maxMessageLength = 32 * 1024
	// truncationMarker ends a message that was cut to maxMessageLength.
	truncationMarker = "…(truncated)"
)

// ValidateReason reports whether reason would be accepted by the apiserver
// as a metav1.Condition reason: non-empty, at most 1024 bytes, and matching
// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$. Call it where reasons are built
// at run time (e.g. from an external system's error code) to fail early with
// a clear error rather than have the whole status write rejected.
//
// Guarantees: the checks are apimachinery's own (ValidateCondition and
// IsValidConditionReason), so a reason accepted here is accepted by the
// built-in condition validation and by the CRD schema controller-gen
// generates for metav1.Condition; the error names the field and the rule.
//
// Caveats: Kubernetes API conventions also ask for CamelCase reasons
// ("ReplicasUnavailable"); that is a recommendation, not a rule, and is not
// enforced: "Odd_but:valid,Reason" passes.
func ValidateReason(reason string) error {
	if validReason(reason) {
		return nil
	}
	// Validate a condition that is valid apart from its reason, so the
	// message is apimachinery's, with the field path "reason".
	probe := metav1.Condition{
		Type:               Ready,
		Status:             metav1.ConditionTrue,
		Reason:             reason,
		LastTransitionTime: metav1.Unix(1, 0),
	}
	if err := metav1validation.ValidateCondition(probe, nil).ToAggregate(); err != nil {
		return fmt.Errorf("conditions: %w", err)
	}
	return nil
}

// validate checks a stamped condition. The fast path allocates nothing, so
// a no-op Set stays allocation-free; anything it does not accept is handed
// to apimachinery's ValidateCondition, which is authoritative and produces
// the error messages.
func validate(c metav1.Condition) error {
	if validType(c.Type) &&
		validStatus(c.Status) &&
		validReason(c.Reason) &&
		len(c.Message) <= maxMessageLength &&
		c.ObservedGeneration >= 0 &&
		!c.LastTransitionTime.IsZero() {
		return nil
	}
	path := field.NewPath("status", "conditions").Key(c.Type)
	errs := metav1validation.ValidateCondition(c, path)
	if len(c.Type) > maxTypeLength {
		errs = append(errs, field.TooLong(path.Child("type"), "", maxTypeLength))
	}
	return errs.ToAggregate()
}

func validStatus(s metav1.ConditionStatus) bool {
	return s == metav1.ConditionTrue || s == metav1.ConditionFalse || s == metav1.ConditionUnknown
}

func validReason(r string) bool {
	return r != "" && len(r) <= maxReasonLength && len(metav1validation.IsValidConditionReason(r)) == 0
}

// validType is content.IsLabelKey (what ValidateCondition uses) without its
// strings.Split allocation, plus the 316-character schema limit: an optional
// DNS-subdomain prefix and "/", then a name that is a non-empty label value.
func validType(t string) bool {
	if t == "" || len(t) > maxTypeLength {
		return false
	}
	name := t
	if prefix, rest, found := strings.Cut(t, "/"); found {
		if prefix == "" || len(content.IsDNS1123Subdomain(prefix)) != 0 {
			return false
		}
		name = rest
	}
	return name != "" && len(content.IsLabelValue(name)) == 0
}

// normalizeMessage makes a message storable without changing its meaning:
// invalid UTF-8 bytes become U+FFFD (what JSON encoding sends, so the
// in-memory value equals the value read back), then an over-long message is
// cut on a rune boundary and marked.
func normalizeMessage(m string) string {
	if !utf8.ValidString(m) {
		m = replaceInvalidUTF8(m)
	}
	return text.Truncate(m, maxMessageLength, truncationMarker)
}

// replaceInvalidUTF8 replaces every byte that does not start a valid UTF-8
// sequence with U+FFFD, byte by byte as encoding/json does (unlike
// strings.ToValidUTF8, which replaces a run of bad bytes once).
func replaceInvalidUTF8(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2*utf8.UTFMax)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
