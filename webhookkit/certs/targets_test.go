package certs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

// TestMissingTargetDoesNotBlockRotation: a named webhook configuration
// deleted while the Rotator runs, and a named CRD that never existed, do not
// hold rotation up. The new certificate is served before the old one
// expires, admission through the remaining configuration never fails, the
// replica stays ready, the missing targets are reported (gauge, Event), and
// the configuration, once recreated, gets the current CA bundle and admits.
func TestMissingTargetDoesNotBlockRotation(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	port := freePort(t)
	const renewBefore = 20 * time.Second
	f := newFixture(t, port, func(o *Options) {
		o.Validity, o.RenewBefore, o.TrustPropagation = time.Minute, renewBefore, 2*time.Second
	})
	crd := gadgetCRD(f.ns+".webhookkit.test", port, true)
	require.NoError(t, env.Client.Create(ctx, crd))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, crd) })
	absentCRD := "gizmos." + f.ns + ".webhookkit.test"
	f.opts.ConversionCRDs = []string{crd.Name, absentCRD}

	rep := startReplica(t, f, port, false)
	require.Eventually(t, func() bool { return rep.ready() == nil }, 30*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		m, v := f.bundles(t)
		return len(m) > 0 && len(v) > 0
	}, 30*time.Second, 50*time.Millisecond, "caBundle injected")
	first := rep.r.served.Load().leaf()

	var mutating admissionregistrationv1.MutatingWebhookConfiguration
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: f.mutating}, &mutating))
	require.NoError(t, env.Client.Delete(ctx, &mutating))
	// The API server calls a deleted webhook until its own watch of the
	// configurations has seen the deletion: wait for that, observed as a
	// Widget no longer defaulted, before counting admissions.
	require.Eventually(t, func() bool {
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, GenerateName: "w-", Labels: map[string]string{hookLabel: f.ns}}, Spec: testv1.WidgetSpec{Size: 1}}
		return env.Client.Create(ctx, w) == nil && w.Spec.Color == ""
	}, 30*time.Second, 50*time.Millisecond, "the API server stops calling the deleted mutating webhook")
	require.True(t, time.Now().Before(first.NotAfter.Add(-renewBefore)),
		"the configuration must be deleted before the rotation begins, at %s", first.NotAfter.Add(-renewBefore))

	// Rotation completes while a target is missing: the served certificate
	// changes, the old one never expires while served, and every admission
	// through the validating configuration succeeds.
	notReady := map[string]int{} // readiness errors, counted
	_, failures := admitThrough(t, f.ns, false, 90*time.Second, func() bool {
		if err := rep.ready(); err != nil {
			notReady[err.Error()]++
		}
		return servedSerial(rep.r).Cmp(first.SerialNumber) != 0
	})
	switchedAt := time.Now()
	assert.True(t, switchedAt.Before(first.NotAfter),
		"the new certificate is served at %s, before the old one expires at %s", switchedAt.Format(time.StampMilli), first.NotAfter.Format(time.StampMilli))
	assert.Empty(t, failures, "admission through the remaining configuration failed during rotation")
	assert.Empty(t, notReady, "ready while a target is missing: the server serves a valid certificate")

	// Every existing target carries the CA of the certificate served now.
	_, validating := f.bundles(t)
	var gotCRD apiextensionsv1.CustomResourceDefinition
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(crd), &gotCRD))
	verifyServed(t, rep.r, validating, "webhook."+f.ns+".svc")
	verifyServed(t, rep.r, gotCRD.Spec.Conversion.Webhook.ClientConfig.CABundle, "webhook."+f.ns+".svc")
	assert.Len(t, rep.r.served.Load().cas, 2, "the old CA stays in the bundle")

	// The missing targets are reported, the existing ones are not.
	secret := f.ns + "/" + f.opts.SecretName
	for _, c := range []struct {
		kind, name string
		want       float64
	}{
		{"MutatingWebhookConfiguration", f.mutating, 1},
		{"CustomResourceDefinition", absentCRD, 1},
		{"ValidatingWebhookConfiguration", f.validating, 0},
		{"CustomResourceDefinition", crd.Name, 0},
	} {
		v, ok := gaugeValue(t, "reconcilekit_webhook_ca_injection_target_missing", map[string]string{"secret": secret, "kind": c.kind, "name": c.name})
		assert.True(t, ok && v == c.want, "missing gauge for %s %s: got %v (exported %v), want %v", c.kind, c.name, v, ok, c.want)
	}
	requireSecretEvent(t, f, "InjectionTargetMissing", `MutatingWebhookConfiguration "`+f.mutating+`"`)
	requireSecretEvent(t, f, "InjectionTargetMissing", `CustomResourceDefinition "`+absentCRD+`"`)

	// Recreated (as a re-applied manifest would, without a caBundle), the
	// configuration gets the current bundle and admits again.
	recreated := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: mutating.Name},
		Webhooks:   mutating.Webhooks,
	}
	for i := range recreated.Webhooks {
		recreated.Webhooks[i].ClientConfig.CABundle = nil
	}
	require.NoError(t, env.Client.Create(ctx, recreated))
	require.Eventually(t, func() bool {
		m, _ := f.bundles(t)
		return string(m) == string(f.secret(t).Data["ca.crt"])
	}, 30*time.Second, 50*time.Millisecond, "the recreated configuration gets the current CA bundle")
	require.Eventually(t, func() bool {
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, GenerateName: "w-", Labels: map[string]string{hookLabel: f.ns}}, Spec: testv1.WidgetSpec{Size: 1}}
		return env.Client.Create(ctx, w) == nil && w.Spec.Color == "blue"
	}, 30*time.Second, 50*time.Millisecond, "the recreated mutating webhook defaults Widgets")
	v, _ := gaugeValue(t, "reconcilekit_webhook_ca_injection_target_missing", map[string]string{"secret": secret, "kind": "MutatingWebhookConfiguration", "name": f.mutating})
	assert.Zero(t, v, "the recreated configuration is no longer reported missing")
	requireSecretEvent(t, f, "InjectionTargetFound", `MutatingWebhookConfiguration "`+f.mutating+`"`)
}

// requireSecretEvent waits for an Event on the fixture's Secret with reason
// whose note names the target (`Kind "name"`) and whose related object is
// that target.
func requireSecretEvent(t *testing.T, f fixture, reason, target string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var evs eventsv1.EventList
		require.NoError(t, env.Client.List(context.Background(), &evs, client.InNamespace(f.ns)))
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Secret" && e.Regarding.Name == f.opts.SecretName && e.Reason == reason && strings.Contains(e.Note, target) &&
				e.Related != nil && e.Related.Kind+` "`+e.Related.Name+`"` == target {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "Event %s naming %s", reason, target)
}
