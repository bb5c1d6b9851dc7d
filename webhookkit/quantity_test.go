package webhookkit

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestPositiveResourceQuantity(t *testing.T) {
	p := field.NewPath("spec", "memory")
	for _, tt := range []struct {
		q     resource.Quantity
		valid bool
	}{
		{resource.MustParse("1Gi"), true},
		{resource.MustParse("500m"), true},
		{resource.MustParse("0"), false},
		{resource.MustParse("-1"), false},
		{resource.Quantity{}, false}, // a field the request left out
	} {
		t.Run(tt.q.String(), func(t *testing.T) {
			assert.Equal(t, tt.valid, PositiveResourceQuantity(p, tt.q) == nil)
		})
	}
	errs := PositiveResourceQuantity(p, resource.Quantity{})
	if assert.Len(t, errs, 1) {
		assert.Equal(t, `spec.memory: Invalid value: "0": must be greater than zero`, errs[0].Error())
	}
}

// tenantSpec is docs/webhookkit.md's required quantity.
type tenantSpec struct {
	// Memory is the tenant's memory quota.
	// +required
	Memory resource.Quantity `json:"memory,omitzero"`
}

// A required resource.Quantity with omitempty is sent as "0" when a Go
// client leaves it unset, which satisfies the schema's required; with
// omitzero it is left out, and the API server reports it Required.
func TestRequiredQuantityNeedsOmitzero(t *testing.T) {
	withOmitempty := struct {
		Memory resource.Quantity `json:"memory,omitempty"`
	}{}
	got, err := json.Marshal(withOmitempty)
	require.NoError(t, err)
	assert.JSONEq(t, `{"memory":"0"}`, string(got))

	got, err = json.Marshal(tenantSpec{})
	require.NoError(t, err)
	assert.JSONEq(t, `{}`, string(got))
}
