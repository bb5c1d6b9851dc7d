package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

// unboundedInformers reads reconcilekit_unbounded_cache_informers{kind},
// 0 while the series does not exist yet.
func unboundedInformers(t *testing.T, kind string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != "reconcilekit_unbounded_cache_informers" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// TestCacheOptionsBoundSecretsAndConfigMaps: the operator's cache, guarded
// by reconciler.CacheOptions, starts no informer that holds every
// Secret or ConfigMap in the cluster, with the controller's watches running
// and a registry ConfigMap read through the cached client.
func TestCacheOptionsBoundSecretsAndConfigMaps(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	before := map[string]float64{"Secret": unboundedInformers(t, "Secret"), "ConfigMap": unboundedInformers(t, "ConfigMap")}

	mgr := startOperator(t, ns)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := mgr.GetClient().Get(ctx, types.NamespacedName{Namespace: ns, Name: "absent"}, &corev1.ConfigMap{})
	require.True(t, apierrors.IsNotFound(err), "a cached read of a registry ConfigMap: %v", err)

	for kind, n := range before {
		assert.Equal(t, n, unboundedInformers(t, kind), "unbounded %s informers", kind)
	}
}
