package certs

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

// exportedExpiry reads reconcilekit_webhook_certificate_expiration_timestamp_seconds
// for secret from controller-runtime's registry.
func exportedExpiry(t *testing.T, secret string) (float64, bool) {
	t.Helper()
	return gaugeValue(t, "reconcilekit_webhook_certificate_expiration_timestamp_seconds", map[string]string{"secret": secret})
}

// gaugeValue reads the gauge name with exactly labels from
// controller-runtime's registry.
func gaugeValue(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// TestServedCertificateExpiryIsExported: the gauge says when the
// certificate being served expires, and follows it through a rotation, so
// an alert on it measures what the apiserver will see.
func TestServedCertificateExpiryIsExported(t *testing.T) {
	testenv.Require(t)
	port := freePort(t)
	f := newFixture(t, port, func(o *Options) {
		o.Validity, o.RenewBefore, o.TrustPropagation = 20*time.Second, 8*time.Second, 2*time.Second
	})
	rep := startReplica(t, f, port, false)
	secret := f.ns + "/webhook-tls"
	matches := func() (bool, float64) {
		m := rep.r.served.Load()
		if m.leaf() == nil {
			return false, 0
		}
		v, ok := exportedExpiry(t, secret)
		return ok && v == float64(m.leaf().NotAfter.Unix()), float64(m.leaf().NotAfter.Unix())
	}
	var first float64
	require.Eventually(t, func() bool {
		ok, want := matches()
		first = want
		return ok
	}, 30*time.Second, 50*time.Millisecond, "the served certificate's expiry is exported")
	require.Eventually(t, func() bool {
		ok, want := matches()
		return ok && want > first
	}, 60*time.Second, 100*time.Millisecond, "after a rotation, the new certificate's expiry is exported")
}
