package certs

import (
	"bytes"
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
)

var (
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	mutatingGVR   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	validatingGVR = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	crdGVR        = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// watchNamed runs a metadata-only informer for the single object ns/name of
// gvr until ctx ends, calling onEvent on every add, update and delete (no
// resync: the loops have their own timers). Only metadata is transferred: the
// informers are triggers, the loops read the full object with a direct GET.
func (r *Rotator) watchNamed(ctx context.Context, gvr schema.GroupVersionResource, ns, name string, onEvent func()) error {
	inf := metadatainformer.NewFilteredMetadataInformer(r.meta, gvr, ns, 0, toolscache.Indexers{},
		func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}).Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { onEvent() },
		UpdateFunc: func(any, any) { onEvent() },
		DeleteFunc: func(any) { onEvent() },
	}); err != nil {
		return err
	}
	go inf.RunWithContext(ctx)
	return nil
}

// servingLoop runs on every replica: it keeps r.served equal to the Secret's
// certificate whenever that certificate is usable.
type servingLoop struct{ r *Rotator }

// NeedLeaderElection is false: every replica serves.
func (*servingLoop) NeedLeaderElection() bool { return false }

func (l *servingLoop) Start(ctx context.Context) error {
	r := l.r
	if err := r.watchNamed(ctx, secretsGVR, r.opts.Namespace, r.opts.SecretName, func() {
		kick(r.readKick)
		kick(r.writeKick)
	}); err != nil {
		return err
	}
	for {
		// The watch wakes the loop on every change; the timer only retries
		// reads that failed (quickly while nothing is served yet).
		wait := r.opts.CheckInterval
		if !r.load(ctx) {
			wait = min(wait, time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-r.readKick:
		case <-t.C:
		}
		t.Stop()
	}
}

// load reads the Secret and serves its certificate if it is usable and new.
// It reports whether a certificate is being served.
func (r *Rotator) load(ctx context.Context) bool {
	var s corev1.Secret
	if err := r.c.Get(ctx, r.secretKey(), &s); err != nil {
		if !apierrors.IsNotFound(err) {
			r.log.Error(err, "Reading certificate Secret")
		}
		return r.served.Load() != nil
	}
	cur := r.served.Load()
	if cur != nil && cur.equalData(s.Data) {
		return true
	}
	m, problems := parseMaterial(s.Data)
	leaf := m.leaf()
	now := r.now()
	if leaf == nil || now.After(leaf.NotAfter) {
		r.log.Info("Not serving the Secret's certificate: it is missing, invalid or expired; the leader will replace it", "problems", problems)
		return cur != nil
	}
	r.served.Store(m)
	servedExpiry.WithLabelValues(r.secretKey().String()).Set(float64(leaf.NotAfter.Unix()))
	r.log.Info("Serving certificate", "serial", leaf.SerialNumber.String(), "notAfter", leaf.NotAfter,
		"changed", cur == nil || !bytes.Equal(cur.certPEM, m.certPEM))
	return true
}
