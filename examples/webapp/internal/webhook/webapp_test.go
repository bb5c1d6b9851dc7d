package webhook_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/webhook"
)

func q(s string) *resource.Quantity { return new(resource.MustParse(s)) }

func TestDefault(t *testing.T) {
	app := &webappv1.WebApp{Spec: webappv1.WebAppSpec{Image: "web:1", Resources: &webappv1.ContainerResources{Memory: q("1Gi")}}}
	require.NoError(t, webhook.Default(context.Background(), app))
	assert.Equal(t, int32(1), *app.Spec.Replicas)
	assert.Equal(t, "500m", app.Spec.Resources.CPU.String())
	assert.Equal(t, "1Gi", app.Spec.Resources.Memory.String(), "a set field is kept")

	again := app.DeepCopy()
	require.NoError(t, webhook.Default(context.Background(), again))
	assert.Equal(t, app, again, "defaulting is idempotent (the apiserver may reinvoke it)")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		spec     webappv1.WebAppSpec
		fields   []string // every field path the error must name
		warnings int
	}{
		{name: "valid", spec: webappv1.WebAppSpec{Image: "registry.example.com/web:v2.1.0", Replicas: new(int32(3)), DBRef: "orders-db"}},
		{name: "digest", spec: webappv1.WebAppSpec{Image: "web@sha256:" + strings.Repeat("a", 64)}},
		{name: "latest warns", spec: webappv1.WebAppSpec{Image: "web:latest"}, warnings: 1},
		{name: "no tag", spec: webappv1.WebAppSpec{Image: "web"}, fields: []string{"spec.image"}},
		{name: "replicas out of range", spec: webappv1.WebAppSpec{Image: "web:1", Replicas: new(int32(101))}, fields: []string{"spec.replicas"}},
		{name: "bad dbRef", spec: webappv1.WebAppSpec{Image: "web:1", DBRef: "Orders_DB"}, fields: []string{"spec.dbRef"}},
		{
			name:   "what a schema cannot say, every field at once",
			spec:   webappv1.WebAppSpec{Image: "web:1", Resources: &webappv1.ContainerResources{CPU: q("0"), Memory: q("1Mi")}},
			fields: []string{"spec.resources.cpu", "spec.resources.memory"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			warnings, errs := webhook.Validate(&webappv1.WebApp{Spec: tt.spec})
			assert.Len(t, warnings, tt.warnings)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			assert.ElementsMatch(t, tt.fields, got, "%v", errs)
		})
	}
}
