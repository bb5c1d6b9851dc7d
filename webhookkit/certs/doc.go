// Package certs provides the serving certificates of admission and conversion
// webhooks, in one of two modes, and a readiness check for both.
//
// # The problem it prevents
//
// The apiserver only calls a webhook over TLS, verifying the server against
// the caBundle of the webhook configuration. Certificates created once by a
// script expire and silently take every create/update of the type down with
// them; rotating naively (new CA and new certificate at once) fails every
// request between the moment a replica serves the new certificate and the
// moment each apiserver sees the new caBundle; and re-applying manifests
// (kubectl apply, helm upgrade) wipes injected caBundles.
//
// # Self-managed mode: [Rotator]
//
// The elected leader keeps a CA and a serving certificate for
// <service>.<namespace>.svc(.cluster.local) in a kubernetes.io/tls Secret
// (plus ca.crt and ca.key), injects the CA bundle into every webhook entry
// of the named Mutating/ValidatingWebhookConfigurations and into the
// conversion webhook of named CRDs, and rotates before expiry in two steps:
// the new CA joins the bundle first, the serving certificate switches after
// Options.TrustPropagation, and the old CA leaves the bundle only when it
// expires. Every replica serves the Secret's current certificate from
// memory, with no restart. A deleted Secret is recreated. Passes that find
// everything correct write nothing.
//
// # External mode: cert-manager or any other issuer
//
// Mount the issuer's Secret at the webhook server's CertDir and let the
// issuer's CA injector fill the caBundles. controller-runtime's webhook
// server already watches tls.crt/tls.key with its certwatcher and serves a
// renewed certificate without a restart, so this package adds nothing but
// [ReadyCheck]; there is deliberately no second file watcher.
//
// In both modes [ReadyCheck] keeps the manager unready until a currently
// valid certificate is actually being served: the webhook server's own
// StartedChecker, which performs a TLS handshake but accepts an expired
// certificate, plus the served certificate's validity period.
package certs
