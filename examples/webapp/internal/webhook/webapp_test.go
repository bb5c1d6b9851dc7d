package webhook_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
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
		{name: "valid", spec: webappv1.WebAppSpec{Image: "registry.example.com/web:v2.1.0", Replicas: new(int32(3)), DBRef: new("orders-db")}},
		{name: "digest", spec: webappv1.WebAppSpec{Image: "web@sha256:" + strings.Repeat("a", 64)}},
		{name: "latest warns", spec: webappv1.WebAppSpec{Image: "web:latest"}, warnings: 1},
		{name: "no tag", spec: webappv1.WebAppSpec{Image: "web"}, fields: []string{"spec.image"}},
		{name: "replicas out of range", spec: webappv1.WebAppSpec{Image: "web:1", Replicas: new(int32(101))}, fields: []string{"spec.replicas"}},
		{name: "bad dbRef", spec: webappv1.WebAppSpec{Image: "web:1", DBRef: new("Orders_DB")}, fields: []string{"spec.dbRef"}},
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

func TestDefaultV2(t *testing.T) {
	app := &webappv2.WebApp{Spec: webappv2.WebAppSpec{Image: "web:1", Resources: &webappv2.ResourceRequirements{
		Requests: &webappv2.ContainerResources{Memory: q("1Gi")},
		Limits:   &webappv2.ContainerResources{CPU: q("2")},
	}}}
	require.NoError(t, webhook.DefaultV2(context.Background(), app))
	assert.Equal(t, int32(1), *app.Spec.Replicas)
	r := app.Spec.Resources
	assert.Equal(t, "500m", r.Requests.CPU.String())
	assert.Equal(t, "1Gi", r.Requests.Memory.String(), "a set field is kept")
	assert.Equal(t, "2", r.Limits.CPU.String(), "a set limit is kept")
	assert.Equal(t, "1Gi", r.Limits.Memory.String(), "an unset limit is the request")

	again := app.DeepCopy()
	require.NoError(t, webhook.DefaultV2(context.Background(), again))
	assert.Equal(t, app, again, "defaulting is idempotent (the apiserver may reinvoke it)")

	// Nothing said: what v1's Default gives, as requests and limits.
	empty := &webappv2.WebApp{Spec: webappv2.WebAppSpec{Image: "web:1"}}
	require.NoError(t, webhook.DefaultV2(context.Background(), empty))
	v1 := &webappv1.WebApp{Spec: webappv1.WebAppSpec{Image: "web:1"}}
	require.NoError(t, webhook.Default(context.Background(), v1))
	assert.Equal(t, v1.Spec.Resources.CPU.String(), empty.Spec.Resources.Requests.CPU.String())
	assert.Equal(t, v1.Spec.Resources.Memory.String(), empty.Spec.Resources.Requests.Memory.String())
	assert.True(t, equality.Semantic.DeepEqual(empty.Spec.Resources.Requests, empty.Spec.Resources.Limits), "limits are the requests")
}

func TestValidateV2(t *testing.T) {
	res := func(reqCPU, reqMem, limCPU, limMem string) *webappv2.ResourceRequirements {
		r := &webappv2.ResourceRequirements{Requests: &webappv2.ContainerResources{}, Limits: &webappv2.ContainerResources{}}
		for _, f := range []struct {
			s   string
			dst **resource.Quantity
		}{{reqCPU, &r.Requests.CPU}, {reqMem, &r.Requests.Memory}, {limCPU, &r.Limits.CPU}, {limMem, &r.Limits.Memory}} {
			if f.s != "" {
				*f.dst = q(f.s)
			}
		}
		return r
	}
	tests := []struct {
		name     string
		spec     webappv2.WebAppSpec
		fields   []string
		warnings int
	}{
		{name: "valid", spec: webappv2.WebAppSpec{Image: "registry.example.com/web:v2.1.0", Replicas: new(int32(3)),
			Database: &webappv2.DatabaseReference{ServiceName: "orders-db"}, Resources: res("100m", "64Mi", "1", "1Gi")}},
		{name: "latest warns", spec: webappv2.WebAppSpec{Image: "web:latest"}, warnings: 1},
		{name: "no tag", spec: webappv2.WebAppSpec{Image: "web"}, fields: []string{"spec.image"}},
		{name: "replicas out of range", spec: webappv2.WebAppSpec{Image: "web:1", Replicas: new(int32(0))}, fields: []string{"spec.replicas"}},
		{name: "bad database", spec: webappv2.WebAppSpec{Image: "web:1", Database: &webappv2.DatabaseReference{ServiceName: "Orders_DB"}},
			fields: []string{"spec.database.serviceName"}},
		{name: "amounts", spec: webappv2.WebAppSpec{Image: "web:1", Resources: res("0", "1Mi", "0", "8Mi")},
			fields: []string{"spec.resources.requests.cpu", "spec.resources.requests.memory", "spec.resources.limits.cpu", "spec.resources.limits.memory"}},
		{name: "limits below requests", spec: webappv2.WebAppSpec{Image: "web:1", Resources: res("2", "1Gi", "1", "512Mi")},
			fields: []string{"spec.resources.limits.cpu", "spec.resources.limits.memory"}},
		{name: "a limit without its request is not compared", spec: webappv2.WebAppSpec{Image: "web:1", Resources: res("", "", "100m", "32Mi")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			warnings, errs := webhook.ValidateV2(&webappv2.WebApp{Spec: tt.spec})
			assert.Len(t, warnings, tt.warnings)
			var got []string
			for _, e := range errs {
				got = append(got, e.Field)
			}
			assert.ElementsMatch(t, tt.fields, got, "%v", errs)
		})
	}
}
