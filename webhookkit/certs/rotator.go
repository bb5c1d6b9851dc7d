package certs

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Options configure a self-managed [Rotator]. Namespace, SecretName and at
// least one name for the certificate (ServiceName, ExtraDNSNames or ExtraIPs)
// are required.
type Options struct {
	// Namespace holds the Secret and the webhook Service.
	Namespace string
	// SecretName is the kubernetes.io/tls Secret the Rotator owns: tls.crt,
	// tls.key, ca.crt (the CA bundle) and ca.key. It is created if missing.
	SecretName string
	// ServiceName is the webhook Service. The certificate covers
	// <ServiceName>.<Namespace>.svc and <ServiceName>.<Namespace>.svc.cluster.local.
	ServiceName string
	// ExtraDNSNames are further DNS names for the certificate (e.g. for a
	// cluster domain other than cluster.local).
	ExtraDNSNames []string
	// ExtraIPs are IP addresses for the certificate, e.g. 127.0.0.1 when the
	// apiserver reaches a locally running manager by URL.
	ExtraIPs []net.IP

	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations name
	// the configurations whose every webhook entry gets the CA bundle in
	// clientConfig.caBundle.
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string
	// ConversionCRDs name CustomResourceDefinitions whose conversion webhook
	// gets the CA bundle. A CRD without webhook conversion is left alone.
	ConversionCRDs []string

	// Validity is the lifetime of each generated CA and serving certificate.
	// Default 90 days.
	Validity time.Duration
	// RenewBefore is how long before expiry a certificate is replaced.
	// Default Validity/3; must be less than Validity.
	RenewBefore time.Duration
	// TrustPropagation is how long a new CA must have been in every injected
	// caBundle before a serving certificate signed by it is put in the
	// Secret, giving every apiserver time to see the new bundle. Default
	// 30s, capped at RenewBefore/4; must be at most RenewBefore/2.
	TrustPropagation time.Duration
	// CheckInterval bounds how long the leader waits between checks when no
	// watch event arrives (watch events and expiry timers trigger checks
	// sooner). Default 1 minute.
	CheckInterval time.Duration
}

const (
	defaultValidity         = 90 * 24 * time.Hour
	defaultTrustPropagation = 30 * time.Second
	defaultCheckInterval    = time.Minute
	recorderName            = "webhookkit-certs"
)

// Rotator is the self-managed certificate mode: it keeps a CA and a serving
// certificate for the webhook Service in a Secret, injects the CA bundle into
// the named webhook configurations and CRDs, rotates before expiry and serves
// the current certificate from memory.
//
// Wiring (the webhook server must be built with the Rotator's TLSOpt, so New
// comes before ctrl.NewManager):
//
//	rot, err := certs.New(certs.Options{Namespace: ns, SecretName: "webhook-tls", ServiceName: "webhook", ...})
//	mgr, err := ctrl.NewManager(cfg, ctrl.Options{WebhookServer: webhook.NewServer(webhook.Options{TLSOpts: []func(*tls.Config){rot.TLSOpt}})})
//	err = rot.SetupWithManager(mgr)
//	err = mgr.AddReadyzCheck("webhook-certs", certs.ReadyCheck(mgr.GetWebhookServer()))
//
// Why serve from memory (tls.Config.GetCertificate) instead of writing files
// into the webhook server's CertDir for certwatcher: the webhook server starts
// before any other runnable and certwatcher fails when the files do not exist
// yet, files written one after the other can be read as a mismatched
// cert/key pair, and a mounted Secret volume lags by the kubelet sync period.
// An atomic pointer swap has none of these problems; handshakes simply fail
// (and the readiness check fails) until the first certificate is loaded.
//
// Guarantees:
//   - Only the elected leader writes (a Runnable with NeedLeaderElection
//     true); every replica serves the Secret's current certificate (a
//     Runnable with NeedLeaderElection false that watches the Secret).
//   - Checks are idempotent: nothing is written when the Secret and every
//     caBundle are already as desired.
//   - Rotation never breaks admission: a new CA is added to the bundle next
//     to the old one, and the serving certificate switches to it only after
//     TrustPropagation; the old CA stays in the bundle until it expires.
//   - A deleted Secret is recreated from the certificate the leader is
//     serving, with a new CA staged as above (deletion forces a rotation
//     without failed requests). Without anything in memory (e.g. the
//     Secret was deleted while no replica was running) a new CA and
//     certificate are issued at once.
//   - An invalid or expired Secret never replaces a valid certificate being
//     served; the leader restores it around the served certificate, staging
//     a new CA as for a deletion.
//   - A caBundle reset by re-applying manifests (kubectl apply, helm upgrade)
//     is restored as soon as the watch reports it.
//   - A named configuration or CRD that does not exist holds nothing up: a
//     new CA counts as trusted once every existing target carries it, and
//     the missing target gets the current bundle as soon as the watch
//     reports it created. It is reported in the log, as a Warning Event
//     InjectionTargetMissing on the Secret and by the gauge
//     reconcilekit_webhook_ca_injection_target_missing; readiness is not
//     affected. A target that cannot be read or written (RBAC, a conflict)
//     still holds the new certificate back: it may exist with an older
//     bundle.
//
// Caveats:
//   - RBAC: get/list/watch/create/update on the Secret; get/list/watch/update
//     on the named webhook configurations and CRDs; create on
//     events.k8s.io events.
//   - The CA private key is stored in the Secret; restrict who can read it.
//   - Certificates are ECDSA P-256.
type Rotator struct {
	opts     Options
	dnsNames []string
	ips      []net.IP
	now      func() time.Time

	// served is the Secret content whose certificate is being served.
	served atomic.Pointer[material]
	// readKick and writeKick wake the serving and writing loops.
	readKick, writeKick chan struct{}

	// Set by SetupWithManager.
	setUp    bool
	c        client.Client
	meta     metadata.Interface
	log      logr.Logger
	recorder recorder.EventRecorder

	// trustedSince is owned by the writing loop: per CA fingerprint, when the
	// CA was first seen in every injected caBundle.
	trustedSince map[string]time.Time
	// missing is owned by the writing loop: the targets its last look found
	// missing.
	missing map[targetKey]bool
	// passes counts completed writer passes (for tests).
	passes atomic.Int64
}

// New validates opts, applies defaults and returns a Rotator that serves
// nothing until [Rotator.SetupWithManager] and the manager are started.
func New(opts Options) (*Rotator, error) {
	if opts.Namespace == "" || opts.SecretName == "" {
		return nil, errors.New("webhookkit/certs: Options.Namespace and Options.SecretName are required")
	}
	if opts.ServiceName == "" && len(opts.ExtraDNSNames) == 0 && len(opts.ExtraIPs) == 0 {
		return nil, errors.New("webhookkit/certs: set Options.ServiceName, ExtraDNSNames or ExtraIPs: the certificate needs a name")
	}
	if opts.Validity == 0 {
		opts.Validity = defaultValidity
	}
	if opts.RenewBefore == 0 {
		opts.RenewBefore = opts.Validity / 3
	}
	if opts.TrustPropagation == 0 {
		opts.TrustPropagation = min(defaultTrustPropagation, opts.RenewBefore/4)
	}
	if opts.CheckInterval == 0 {
		opts.CheckInterval = defaultCheckInterval
	}
	switch {
	case opts.Validity < 0 || opts.CheckInterval < 0 || opts.TrustPropagation < 0:
		return nil, errors.New("webhookkit/certs: Options durations must not be negative")
	case opts.RenewBefore <= 0 || opts.RenewBefore >= opts.Validity:
		return nil, fmt.Errorf("webhookkit/certs: Options.RenewBefore %v must be positive and less than Validity %v", opts.RenewBefore, opts.Validity)
	case opts.TrustPropagation > opts.RenewBefore/2:
		return nil, fmt.Errorf("webhookkit/certs: Options.TrustPropagation %v must be at most RenewBefore/2 (%v) so the old certificate is replaced before it expires", opts.TrustPropagation, opts.RenewBefore/2)
	}
	r := &Rotator{
		opts:         opts,
		now:          time.Now,
		readKick:     make(chan struct{}, 1),
		writeKick:    make(chan struct{}, 1),
		trustedSince: map[string]time.Time{},
		missing:      map[targetKey]bool{},
	}
	if opts.ServiceName != "" {
		svc := opts.ServiceName + "." + opts.Namespace + ".svc"
		r.dnsNames = append(r.dnsNames, svc, svc+".cluster.local")
	}
	for _, n := range opts.ExtraDNSNames {
		if n == "" {
			return nil, errors.New("webhookkit/certs: Options.ExtraDNSNames contains an empty name")
		}
		r.dnsNames = append(r.dnsNames, n)
	}
	r.ips = append(r.ips, opts.ExtraIPs...)
	return r, nil
}

// TLSOpt installs the Rotator as the certificate source of a TLS server. Pass
// it in webhook.Options.TLSOpts; the webhook server then skips certwatcher
// and CertDir entirely.
func (r *Rotator) TLSOpt(c *tls.Config) {
	c.GetCertificate = r.getCertificate
}

func (r *Rotator) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	m := r.served.Load()
	if m == nil {
		return nil, fmt.Errorf("webhookkit/certs: no serving certificate loaded yet from Secret %s", r.secretKey())
	}
	return m.cert, nil
}

// SetupWithManager adds the Rotator's serving loop (every replica) and
// writing loop (leader only) to mgr. Call it once, before mgr.Start.
//
// The Rotator uses its own uncached client with a private scheme, so mgr's
// scheme and cache need not know Secrets, webhook configurations or CRDs,
// and no cluster-wide Secret informer is started.
func (r *Rotator) SetupWithManager(mgr ctrl.Manager) error {
	if r.setUp {
		return errors.New("webhookkit/certs: SetupWithManager called twice")
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, admissionregistrationv1.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(s); err != nil {
			return fmt.Errorf("webhookkit/certs: building scheme: %w", err)
		}
	}
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: s, HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("webhookkit/certs: building client: %w", err)
	}
	mc, err := metadata.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("webhookkit/certs: building metadata client: %w", err)
	}
	r.c, r.meta = c, mc
	r.log = mgr.GetLogger().WithName("webhookkit-certs").WithValues("secret", r.secretKey().String())
	r.recorder = mgr.GetEventRecorder(recorderName)
	if err := mgr.Add(&servingLoop{r}); err != nil {
		return fmt.Errorf("webhookkit/certs: adding serving loop: %w", err)
	}
	if err := mgr.Add(&writingLoop{r}); err != nil {
		return fmt.Errorf("webhookkit/certs: adding writing loop: %w", err)
	}
	r.setUp = true
	return nil
}

func (r *Rotator) secretKey() types.NamespacedName {
	return types.NamespacedName{Namespace: r.opts.Namespace, Name: r.opts.SecretName}
}

// kick wakes a loop without blocking; a pending wake-up absorbs further ones.
func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
