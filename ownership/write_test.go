package ownership

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestAdoptionRefusedErrorNamesEverything(t *testing.T) {
	err := &AdoptionRefusedError{
		Kind:         "Namespace",
		Key:          client.ObjectKey{Name: "victim"},
		Owner:        metav1.OwnerReference{Kind: "Tenant", Name: "acme", UID: "u-1"},
		FieldManager: "tenant-operator",
	}
	assert.Equal(t, `refusing to adopt Namespace victim for Tenant "acme" (uid u-1): it exists without a controller and `+
		`field manager "tenant-operator" never wrote it; delete or rename it, or apply with ownership.Adopt() to take it over`, err.Error())
}

// replaced recognises the API server's two answers to an apply whose
// metadata.uid names an object that is no longer there, and nothing else.
func TestReplaced(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"gone", apierrors.NewConflict(gr, "cfg", errors.New("uid mismatch: the provided object specified uid 1, and no existing object was found")), true},
		{"another incarnation", apierrors.NewInvalid(gk, "cfg", field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), "2", "field is immutable")}), true},
		{"invalid elsewhere", apierrors.NewInvalid(gk, "cfg", field.ErrorList{field.Invalid(field.NewPath("data"), "x", "bad")}), false},
		{"not found", apierrors.NewNotFound(gr, "cfg"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, replaced(tt.err))
		})
	}
}
