package certs

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// targetKey names an object whose caBundle the Rotator keeps.
type targetKey struct{ kind, name string }

func (k targetKey) String() string { return fmt.Sprintf("%s %q", k.kind, k.name) }

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
		ts = append(ts, target{targetKey{"MutatingWebhookConfiguration", n}, mutatingGVR, cfg, func() []*[]byte {
			var bs []*[]byte
			for i := range cfg.Webhooks {
				bs = append(bs, &cfg.Webhooks[i].ClientConfig.CABundle)
			}
			return bs
		}})
	}
	for _, n := range r.opts.ValidatingWebhookConfigurations {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		ts = append(ts, target{targetKey{"ValidatingWebhookConfiguration", n}, validatingGVR, cfg, func() []*[]byte {
			var bs []*[]byte
			for i := range cfg.Webhooks {
				bs = append(bs, &cfg.Webhooks[i].ClientConfig.CABundle)
			}
			return bs
		}})
	}
	for _, n := range r.opts.ConversionCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		ts = append(ts, target{targetKey{"CustomResourceDefinition", n}, crdGVR, crd, func() []*[]byte {
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
			r.recorder.Eventf(secret, nil, corev1.EventTypeWarning, "InjectionTargetMissing", "Inject",
				"%s does not exist: certificates rotate without it, and it gets the CA bundle when it is created", k)
		case ok && wasMissing:
			r.log.Info("CA injection target exists again", "kind", k.kind, "name", k.name)
			r.recorder.Eventf(secret, nil, corev1.EventTypeNormal, "InjectionTargetFound", "Inject",
				"%s exists again and has the CA bundle", k)
		}
		r.missing[k] = !ok
	}
}
