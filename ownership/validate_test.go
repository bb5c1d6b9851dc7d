package ownership

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestApplierRequiresItsFields(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	tests := []struct {
		name    string
		a       Applier
		wantErr string
	}{
		{"no client", Applier{APIReader: c, Scheme: runtime.NewScheme(), FieldManager: "m"}, "Client is required"},
		{"no API reader", Applier{Client: c, Scheme: runtime.NewScheme(), FieldManager: "m"}, "APIReader is required"},
		{"no scheme", Applier{Client: c, APIReader: c, FieldManager: "m"}, "Scheme is required"},
		{"no field manager", Applier{Client: c, APIReader: c, Scheme: runtime.NewScheme()}, "FieldManager is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.a.Apply(context.Background(), &corev1.ConfigMap{}, corev1ac.ConfigMap("cm", "ns"))
			assert.ErrorContains(t, err, tt.wantErr)
			_, err = tt.a.Prune(context.Background(), &corev1.ConfigMap{}, &corev1.ConfigMapList{})
			assert.ErrorContains(t, err, tt.wantErr)
		})
	}
}
