package certs

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/big"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/webhookkit"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	os.Exit(testenv.Main(m, &env, testenv.Options{AddToScheme: []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme}}))
}

// hookLabel scopes each test's webhook configurations to Widgets labelled
// with the test's namespace.
const hookLabel = "webhookkit.test/certs"

var widgetHooks = webhookkit.Webhook[*testv1.Widget]{
	Default: func(_ context.Context, w *testv1.Widget) error {
		if w.Spec.Color == "" {
			w.Spec.Color = "blue"
		}
		return nil
	},
	ValidateCreate: func(_ context.Context, w *testv1.Widget) (webhookkit.Warnings, field.ErrorList) {
		if w.Spec.Size < 1 {
			return nil, field.ErrorList{field.Invalid(field.NewPath("spec", "size"), w.Spec.Size, "must be at least 1")}
		}
		return nil, nil
	},
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// installConfigs creates webhook configurations that reach the kit's server
// on 127.0.0.1:port by URL, without a caBundle: the Rotator must inject it.
func installConfigs(t *testing.T, ns string, port int) (mutating, validating string) {
	t.Helper()
	url := func(p string) *string { return ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", port, p)) }
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{testv1.GroupVersion.Group}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
	}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{hookLabel: ns}}
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	m := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "mutating-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mwidget.test.reconcilekit.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/mutate-test-reconcilekit-io-v1-widget")},
			Rules: rules, ObjectSelector: sel, SideEffects: &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "validating-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "vwidget.test.reconcilekit.io", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: url("/validate-test-reconcilekit-io-v1-widget")},
			Rules: rules, ObjectSelector: sel, SideEffects: &none, FailurePolicy: &fail, AdmissionReviewVersions: []string{"v1"},
		}},
	}
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, m))
	require.NoError(t, env.Client.Create(ctx, v))
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, m)
		_ = env.Client.Delete(ctx, v)
	})
	return m.Name, v.Name
}

type fixture struct {
	ns                   string
	mutating, validating string
	opts                 Options
}

func newFixture(t *testing.T, port int, mutate func(*Options)) fixture {
	t.Helper()
	ns := env.Namespace(t)
	m, v := installConfigs(t, ns, port)
	o := Options{
		Namespace: ns, SecretName: "webhook-tls", ServiceName: "webhook",
		ExtraIPs:                        []net.IP{net.IPv4(127, 0, 0, 1)},
		MutatingWebhookConfigurations:   []string{m},
		ValidatingWebhookConfigurations: []string{v},
		CheckInterval:                   time.Second,
	}
	if mutate != nil {
		mutate(&o)
	}
	return fixture{ns: ns, mutating: m, validating: v, opts: o}
}

type replica struct {
	r     *Rotator
	mgr   ctrl.Manager
	ready func() error
}

// startReplica starts a manager serving the Widget webhooks on port with a
// Rotator; it is stopped when the test ends.
func startReplica(t *testing.T, f fixture, port int, leaderElection bool) replica {
	t.Helper()
	r, err := New(f.opts)
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:        env.Scheme,
		Metrics:       metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){r.TLSOpt}}),

		LeaderElection:          leaderElection,
		LeaderElectionID:        "webhookkit-certs",
		LeaderElectionNamespace: f.ns,
		LeaseDuration:           ptr.To(4 * time.Second),
		RenewDeadline:           ptr.To(3 * time.Second),
		RetryPeriod:             ptr.To(200 * time.Millisecond),
	})
	require.NoError(t, err)
	require.NoError(t, r.SetupWithManager(mgr))
	require.NoError(t, webhookkit.Register(mgr, widgetHooks))
	check := ReadyCheck(mgr.GetWebhookServer())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done)
	})
	return replica{r: r, mgr: mgr, ready: func() error { return check(nil) }}
}

func (f fixture) secret(t *testing.T) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: f.opts.SecretName}, &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return &s
}

// bundles returns the configurations' caBundles; nil for one that does not
// exist.
func (f fixture) bundles(t *testing.T) (mutating, validating []byte) {
	t.Helper()
	var m admissionregistrationv1.MutatingWebhookConfiguration
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: f.mutating}, &m); !apierrors.IsNotFound(err) {
		require.NoError(t, err)
		mutating = m.Webhooks[0].ClientConfig.CABundle
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: f.validating}, &v); !apierrors.IsNotFound(err) {
		require.NoError(t, err)
		validating = v.Webhooks[0].ClientConfig.CABundle
	}
	return mutating, validating
}

// admitUntil creates Widgets through the webhooks until done returns true,
// and returns every unexpected outcome: a valid Widget must be admitted and
// defaulted by the mutating webhook, an invalid one rejected as Invalid by
// the validating webhook (a TLS failure would surface as an InternalError).
func admitUntil(t *testing.T, ns string, timeout time.Duration, done func() bool) (admitted int, failures []string) {
	t.Helper()
	return admitThrough(t, ns, true, timeout, done)
}

// admitThrough is admitUntil with the mutating configuration present
// (mutating) or absent: then a valid Widget must be admitted undefaulted.
func admitThrough(t *testing.T, ns string, mutating bool, timeout time.Duration, done func() bool) (admitted int, failures []string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		require.True(t, time.Now().Before(deadline), "condition not reached within %v (%d admitted, failures: %v)", timeout, admitted, failures)
		good := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "w-", Labels: map[string]string{hookLabel: ns}}, Spec: testv1.WidgetSpec{Size: 1}}
		switch err := env.Client.Create(ctx, good); {
		case err != nil:
			failures = append(failures, fmt.Sprintf("%s valid widget: %v", time.Now().Format(time.StampMilli), err))
		case mutating && good.Spec.Color != "blue":
			failures = append(failures, "valid widget admitted without the mutating webhook")
		case !mutating && good.Spec.Color != "":
			failures = append(failures, "valid widget defaulted by a deleted mutating webhook")
		default:
			admitted++
		}
		bad := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "w-", Labels: map[string]string{hookLabel: ns}}}
		if err := env.Client.Create(ctx, bad); !apierrors.IsInvalid(err) {
			failures = append(failures, fmt.Sprintf("%s invalid widget: want Invalid, got %v", time.Now().Format(time.StampMilli), err))
		}
		<-tick.C
	}
	return admitted, failures
}

func servedSerial(r *Rotator) *big.Int {
	if leaf := r.served.Load().leaf(); leaf != nil {
		return leaf.SerialNumber
	}
	return nil
}

func TestRotationKeepsAdmitting(t *testing.T) {
	testenv.Require(t)
	port := freePort(t)
	f := newFixture(t, port, func(o *Options) {
		o.Validity, o.RenewBefore, o.TrustPropagation = 20*time.Second, 8*time.Second, 2*time.Second
	})
	rep := startReplica(t, f, port, false)
	require.Eventually(t, func() bool { return rep.ready() == nil }, 30*time.Second, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		m, v := f.bundles(t)
		return len(m) > 0 && len(v) > 0
	}, 30*time.Second, 50*time.Millisecond, "caBundle injected")

	serials, caBundles := map[string]bool{}, map[string]bool{}
	admitted, failures := admitUntil(t, f.ns, 90*time.Second, func() bool {
		serials[servedSerial(rep.r).String()] = true
		_, v := f.bundles(t)
		caBundles[string(v)] = true
		return len(serials) >= 3 && len(caBundles) >= 3
	})
	assert.Empty(t, failures, "admission failed during rotation")
	assert.Positive(t, admitted)
	t.Logf("%d widgets admitted across %d serving certificates and %d CA bundles", admitted, len(serials), len(caBundles))

	// Converged: both configurations carry the Secret's bundle, and the
	// served certificate verifies against it for the Service name.
	require.Eventually(t, func() bool {
		s := f.secret(t)
		m, v := f.bundles(t)
		return s != nil && string(m) == string(s.Data["ca.crt"]) && string(v) == string(s.Data["ca.crt"])
	}, 10*time.Second, 50*time.Millisecond)
	verifyServed(t, rep.r, f.secret(t).Data["ca.crt"], "webhook."+f.ns+".svc")
}

func verifyServed(t *testing.T, r *Rotator, bundle []byte, dnsName string) {
	t.Helper()
	cas, err := parseCertsPEM(bundle)
	require.NoError(t, err)
	leaf := r.served.Load().leaf()
	require.NotNil(t, leaf)
	assert.True(t, signedBy(leaf, cas...), "served certificate chains to the bundle")
	assert.Contains(t, leaf.DNSNames, dnsName)
}

func TestSecretLossRecovers(t *testing.T) {
	testenv.Require(t)
	port := freePort(t)
	f := newFixture(t, port, func(o *Options) { o.Validity, o.TrustPropagation = time.Hour, 2*time.Second })
	rep := startReplica(t, f, port, false)
	require.Eventually(t, func() bool { return rep.ready() == nil }, 30*time.Second, 50*time.Millisecond)
	before := f.secret(t)
	require.NotNil(t, before)
	oldSerial := servedSerial(rep.r)
	oldCA := rep.r.served.Load().signer

	require.NoError(t, env.Client.Delete(context.Background(), before))
	_, failures := admitUntil(t, f.ns, 60*time.Second, func() bool {
		s := f.secret(t)
		return s != nil && s.UID != before.UID && servedSerial(rep.r).Cmp(oldSerial) != 0
	})
	assert.Empty(t, failures, "admission failed while the Secret was recreated")

	// Deletion forced a new CA; the new certificate is signed by it while the
	// old CA stays trusted for replicas still serving the old certificate.
	after := f.secret(t)
	m, problems := parseMaterial(after.Data)
	require.Empty(t, problems)
	assert.NotEqual(t, oldCA.Raw, m.signer.Raw)
	assert.True(t, signedBy(m.leaf(), m.signer))
	assert.Len(t, m.cas, 2)
	assert.Equal(t, corev1.SecretTypeTLS, after.Type)

	// A corrupted certificate is restored the same way, without failures.
	corrupt := after.DeepCopy()
	corrupt.Data["tls.crt"] = []byte("garbage")
	require.NoError(t, env.Client.Update(context.Background(), corrupt))
	servingBefore := servedSerial(rep.r)
	_, failures = admitUntil(t, f.ns, 60*time.Second, func() bool {
		s := f.secret(t)
		m, problems := parseMaterial(s.Data)
		return len(problems) == 0 && m.leaf() != nil && servedSerial(rep.r).Cmp(servingBefore) != 0
	})
	assert.Empty(t, failures, "admission failed while the corrupted Secret was repaired")
}

// TestReplicasServeOnlyLeaderWrites runs two replicas. While neither leads,
// nothing is written and neither is ready; once one leads, both serve the
// same certificate, only the leader ever wrote, and extra passes write
// nothing. A caBundle reset by a re-applied manifest is repaired.
func TestReplicasServeOnlyLeaderWrites(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	portA, portB := freePort(t), freePort(t)
	f := newFixture(t, portA, func(o *Options) { o.Validity, o.CheckInterval = time.Hour, 200*time.Millisecond })

	// Someone else holds the lease, so both replicas start as followers.
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "webhookkit-certs"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("someone-else"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()},
		},
	}
	require.NoError(t, env.Client.Create(ctx, lease))
	a := startReplica(t, f, portA, true)
	b := startReplica(t, f, portB, true)

	for i, rep := range []replica{a, b} {
		addr := net.JoinHostPort("127.0.0.1", fmt.Sprint([]int{portA, portB}[i]))
		require.Eventually(t, func() bool {
			conn, err := net.Dial("tcp", addr)
			if err == nil {
				_ = conn.Close()
			}
			return err == nil
		}, 30*time.Second, 50*time.Millisecond, "webhook server listening")
		assert.Error(t, rep.ready(), "not ready without a certificate")
	}
	assert.Nil(t, f.secret(t), "followers write nothing")
	assert.Zero(t, a.r.passes.Load()+b.r.passes.Load())

	require.NoError(t, env.Client.Delete(ctx, lease))
	require.Eventually(t, func() bool { return a.ready() == nil && b.ready() == nil }, 30*time.Second, 50*time.Millisecond)
	leader, follower := a, b
	select {
	case <-a.mgr.Elected():
	case <-b.mgr.Elected():
		leader, follower = b, a
	}
	assert.Zero(t, follower.r.passes.Load(), "the follower never ran the writer")
	require.Eventually(t, func() bool {
		return servedSerial(follower.r) != nil && servedSerial(follower.r).Cmp(servedSerial(leader.r)) == 0
	}, 10*time.Second, 50*time.Millisecond, "both replicas serve the same certificate")

	// Converged: further passes write nothing.
	require.Eventually(t, func() bool {
		m, v := f.bundles(t)
		return len(m) > 0 && len(v) > 0
	}, 10*time.Second, 50*time.Millisecond)
	rv := func() []string {
		var m admissionregistrationv1.MutatingWebhookConfiguration
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: f.mutating}, &m))
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: f.validating}, &v))
		return []string{f.secret(t).ResourceVersion, m.ResourceVersion, v.ResourceVersion}
	}
	// Let the leader settle (trust recorded, no pending work), then count.
	settle := leader.r.passes.Load() + 2
	require.Eventually(t, func() bool { return leader.r.passes.Load() >= settle }, 10*time.Second, 10*time.Millisecond)
	before := rv()
	target := leader.r.passes.Load() + 5
	require.Eventually(t, func() bool {
		kick(leader.r.writeKick)
		return leader.r.passes.Load() >= target
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, before, rv(), "no writes when everything is already correct")

	// A re-applied manifest wipes the caBundle; the watch brings it back.
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: f.validating}, &v))
	v.Webhooks[0].ClientConfig.CABundle = nil
	require.NoError(t, env.Client.Update(ctx, &v))
	require.Eventually(t, func() bool {
		_, vb := f.bundles(t)
		return string(vb) == string(f.secret(t).Data["ca.crt"])
	}, 10*time.Second, 20*time.Millisecond)

	// The leader reported what it did on the Secret.
	require.Eventually(t, func() bool {
		var evs eventsv1.EventList
		require.NoError(t, env.Client.List(ctx, &evs, client.InNamespace(f.ns)))
		for _, e := range evs.Items {
			if e.Regarding.Kind == "Secret" && e.Regarding.Name == f.opts.SecretName && e.Reason == "CertificatesUpdated" {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)
}

// gadgetCRD is a two-version CRD; with webhook set it converts through
// 127.0.0.1:port/convert (never called here: only the caBundle matters).
func gadgetCRD(group string, port int, webhook bool) *apiextensionsv1.CustomResourceDefinition {
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true),
	}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schema},
				{Name: "v2", Served: true, Schema: schema},
			},
		},
	}
	if webhook {
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/convert", port))},
				ConversionReviewVersions: []string{"v1"},
			},
		}
	}
	return crd
}

func TestConversionCRDInjected(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	port := freePort(t)
	f := newFixture(t, port, nil)
	withWebhook := gadgetCRD(f.ns+".webhookkit.test", port, true)
	without := gadgetCRD(f.ns+"-none.webhookkit.test", port, false)
	for _, crd := range []*apiextensionsv1.CustomResourceDefinition{withWebhook, without} {
		require.NoError(t, env.Client.Create(ctx, crd))
		t.Cleanup(func() { _ = env.Client.Delete(ctx, crd) })
	}
	f.opts.ConversionCRDs = []string{withWebhook.Name, without.Name}
	rep := startReplica(t, f, port, false)
	require.Eventually(t, func() bool { return rep.ready() == nil }, 30*time.Second, 50*time.Millisecond)

	require.Eventually(t, func() bool {
		var got apiextensionsv1.CustomResourceDefinition
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(withWebhook), &got))
		s := f.secret(t)
		return s != nil && string(got.Spec.Conversion.Webhook.ClientConfig.CABundle) == string(s.Data["ca.crt"])
	}, 30*time.Second, 50*time.Millisecond)

	var got apiextensionsv1.CustomResourceDefinition
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(without), &got))
	assert.Equal(t, apiextensionsv1.NoneConverter, got.Spec.Conversion.Strategy, "a CRD without webhook conversion is left alone")
	assert.Nil(t, got.Spec.Conversion.Webhook)
}
