package certs

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// targetKey names an object whose caBundle the Rotator keeps.
type targetKey struct{ apiVersion, kind, name string }

func (k targetKey) String() string { return fmt.Sprintf("%s %q", k.kind, k.name) }

// ref is a reference to the target for an Event's related object: Events
// with the same regarding object, reason and related object form one
// series, so without it a second missing target would only raise the
// first one's count.
func (k targetKey) ref() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: k.apiVersion, Kind: k.kind},
		ObjectMeta: metav1.ObjectMeta{Name: k.name},
	}
}

// target is one injection target: an empty object to read it into and the
// caBundle fields of what was read (none for a CRD without webhook
// conversion).
type target struct {
	targetKey
	gvr     schema.GroupVersionResource
	obj     client.Object
	bundles func() []*[]byte
}

// targets lists the configured injection targets, each with a fresh object.
func (r *Rotator) targets() []target {
	var ts []target
	for _, n := range r.opts.MutatingWebhookConfigurations {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		ts = append(ts, target{targetKey{"admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", n}, mutatingGVR, cfg, func() []*[]byte {
			var bs []*[]byte
			for i := range cfg.Webhooks {
				bs = append(bs, &cfg.Webhooks[i].ClientConfig.CABundle)
			}
			return bs
		}})
	}
	for _, n := range r.opts.ValidatingWebhookConfigurations {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		ts = append(ts, target{targetKey{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", n}, validatingGVR, cfg, func() []*[]byte {
			var bs []*[]byte
			for i := range cfg.Webhooks {
				bs = append(bs, &cfg.Webhooks[i].ClientConfig.CABundle)
			}
			return bs
		}})
	}
	for _, n := range r.opts.ConversionCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		ts = append(ts, target{targetKey{"apiextensions.k8s.io/v1", "CustomResourceDefinition", n}, crdGVR, crd, func() []*[]byte {
			conv := crd.Spec.Conversion
			if conv == nil || conv.Strategy != apiextensionsv1.WebhookConverter || conv.Webhook == nil || conv.Webhook.ClientConfig == nil {
				return nil
			}
			return []*[]byte{&conv.Webhook.ClientConfig.CABundle}
		}})
	}
	return ts
}

// reportTargets publishes which targets exist (true) or are missing (false),
// as far as this pass could tell: the gauge for each, and a log line and an
// Event on the Secret for each that went missing or came back since the
// previous pass.
func (r *Rotator) reportTargets(secret *corev1.Secret, exists map[targetKey]bool) {
	for k, ok := range exists {
		v := 0.0
		if !ok {
			v = 1
		}
		missingTarget.WithLabelValues(r.secretKey().String(), k.kind, k.name).Set(v)
		switch wasMissing := r.missing[k]; {
		case !ok && !wasMissing:
			r.log.Info("CA injection target does not exist; rotating without it, it gets the CA bundle when it is created", "kind", k.kind, "name", k.name)
			r.recorder.Eventf(secret, k.ref(), corev1.EventTypeWarning, "InjectionTargetMissing", "Inject",
				"%s does not exist: certificates rotate without it, and it gets the CA bundle when it is created", k)
		case ok && wasMissing:
			r.log.Info("CA injection target exists again", "kind", k.kind, "name", k.name)
			r.recorder.Eventf(secret, k.ref(), corev1.EventTypeNormal, "InjectionTargetFound", "Inject",
				"%s exists again and has the CA bundle", k)
		}
		r.missing[k] = !ok
	}
}
