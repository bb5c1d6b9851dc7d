package webhookkit

import (
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// PositiveResourceQuantity requires a typed resource.Quantity field (what
// an API type's `Memory resource.Quantity` holds, already parsed by the API
// server) to be greater than zero. A zero value, including a field the
// request left out, is Invalid with value "0": mark such a field
// +required with omitzero, not omitempty, so the schema rejects it
// first (docs/webhookkit.md). For quantities in string fields and
// annotations, which must be parsed, use [PositiveQuantity].
func PositiveResourceQuantity(path *field.Path, q resource.Quantity) field.ErrorList {
	if q.Sign() <= 0 {
		return field.ErrorList{field.Invalid(path, q.String(), "must be greater than zero")}
	}
	return nil
}
