package reconciler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// Configuration errors surface at New, naming the field, not on every pass.
func TestNewRejectsBadConfiguration(t *testing.T) {
	scheme, err := testenv.NewScheme()
	require.NoError(t, err)
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	run := func(context.Context, *scope) reconciler.Outcome { return reconciler.Continue() }
	noop := []widgetStep{{Name: "noop", Run: func(context.Context, *scope) reconciler.Outcome {
		return reconciler.Continue()
	}}}
	for _, tt := range []struct {
		name string
		opts reconciler.Options[*testv1.Widget]
		want string
	}{
		{"Ready names a condition no step owns", reconciler.Options[*testv1.Widget]{
			Steps: []widgetStep{{Name: "a", Condition: "A", Run: run}}, ReadyDependsOn: []string{"A", "Typo"},
		}, `Options.ReadyDependsOn[1]: no step owns condition "Typo"`},
		{"Ready depends on a kstatus condition", reconciler.Options[*testv1.Widget]{
			Steps: []widgetStep{{Name: "a", Condition: "A", Run: run}}, ReadyDependsOn: []string{"Stalled"},
		}, `Options.ReadyDependsOn[0]: "Stalled" cannot be a dependent of Ready`},
		{"two steps own one condition", reconciler.Options[*testv1.Widget]{
			Steps: []widgetStep{{Name: "a", Condition: "A", Run: run}, {Name: "b", Condition: "A", Run: run}},
		}, `Options.Steps[1].Condition "A" is already owned by step "a"`},
		{"unqualified finalizer name", reconciler.Options[*testv1.Widget]{
			Steps: []widgetStep{{Name: "a", Run: run}}, Finalizer: "cleanup", Cleanup: noop,
		}, `Options.Finalizer: invalid finalizer name "cleanup"`},
		{"invalid finalizer name", reconciler.Options[*testv1.Widget]{
			Steps: []widgetStep{{Name: "a", Run: run}}, Finalizer: "example.com/clean up", Cleanup: noop,
		}, `invalid finalizer name "example.com/clean up"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Name, tt.opts.Client, tt.opts.APIReader, tt.opts.Scheme = "test", c, c, scheme
			_, err := reconciler.New(nil, tt.opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
