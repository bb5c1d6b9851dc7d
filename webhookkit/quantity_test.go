package webhookkit

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
