package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	minWait    = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// writingLoop runs on the leader only and converges the Secret and every
// caBundle.
type writingLoop struct{ r *Rotator }

// NeedLeaderElection is true: only the leader writes.
func (*writingLoop) NeedLeaderElection() bool { return true }

func (l *writingLoop) Start(ctx context.Context) error {
	r := l.r
	for _, t := range r.targets() {
		if err := r.watchNamed(ctx, t.gvr, "", t.name, func() { kick(r.writeKick) }); err != nil {
			return err
		}
	}
	backoff := minWait
	for {
		wake, err := r.reconcile(ctx)
		r.passes.Add(1)
		wait := r.opts.CheckInterval
		if err != nil {
			if ctx.Err() == nil { // a failure caused by stopping is not worth reporting
				r.log.Error(err, "Reconciling webhook certificates; retrying", "after", backoff)
			}
			wait = min(backoff, wait)
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = minWait
			wait = min(wait, max(wake.Sub(r.now()), minWait))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-r.writeKick:
		case <-t.C:
		}
		t.Stop()
	}
}

// reconcile makes one idempotent pass: plan the Secret, write it if it
// differs, inject the bundle everywhere. It returns when to look again.
func (r *Rotator) reconcile(ctx context.Context) (time.Time, error) {
	now := r.now()
	var secret corev1.Secret
	exists := true
	cur, rotateCA := &material{}, false
	if err := r.c.Get(ctx, r.secretKey(), &secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("reading Secret %s: %w", r.secretKey(), err)
		}
		exists = false
		if served := r.served.Load(); served != nil {
			// Keep serving what every replica serves now and stage a new CA.
			cur, rotateCA = served, true
		}
	} else {
		var problems []error
		cur, problems = parseMaterial(secret.Data)
		if len(problems) > 0 {
			r.log.Info("Secret content is partly unusable; repairing it", "problems", errors.Join(problems...).Error())
		}
		if served := r.served.Load(); cur.leaf() == nil && served != nil {
			// The certificate was wiped or corrupted: restore the one every
			// replica serves rather than switch them all to a certificate
			// the apiservers cannot verify yet.
			cur, rotateCA = served, true
		}
	}

	next, wake, reasons, err := r.plan(now, cur, rotateCA, r.trustedFor)
	if err != nil {
		return time.Time{}, fmt.Errorf("planning certificates for Secret %s: %w", r.secretKey(), err)
	}
	switch {
	case !exists:
		secret = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.opts.Namespace, Name: r.opts.SecretName},
			Type:       corev1.SecretTypeTLS,
			Data:       next.data(),
		}
		if err := r.c.Create(ctx, &secret); err != nil {
			return time.Time{}, fmt.Errorf("creating Secret %s: %w", r.secretKey(), err)
		}
	case !next.equalData(secret.Data):
		if secret.Type != corev1.SecretTypeTLS {
			return time.Time{}, fmt.Errorf("cannot update Secret %s: its type is %q, want %q (the type is immutable: delete the Secret)", r.secretKey(), secret.Type, corev1.SecretTypeTLS)
		}
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		for k, v := range next.data() {
			secret.Data[k] = v
		}
		// Update carries the resourceVersion read above: a concurrent writer
		// causes a conflict and a fresh pass, never a lost update.
		if err := r.c.Update(ctx, &secret); err != nil {
			return time.Time{}, fmt.Errorf("updating Secret %s: %w", r.secretKey(), err)
		}
	}
	if len(reasons) > 0 || !exists {
		switch {
		case rotateCA && !exists:
			reasons = append([]string{"recreated the deleted Secret around the certificate being served"}, reasons...)
		case rotateCA:
			reasons = append([]string{"restored the unusable Secret around the certificate being served"}, reasons...)
		case !exists:
			reasons = append([]string{"created the Secret"}, reasons...)
		}
		note := strings.Join(reasons, "; ")
		r.log.Info("Updated webhook certificates", "changes", note)
		r.recorder.Eventf(&secret, nil, corev1.EventTypeNormal, "CertificatesUpdated", "Rotate", "%s", note)
	}

	present, err := r.inject(ctx, now, next)
	r.reportTargets(&secret, present)
	if err != nil {
		return time.Time{}, err
	}
	return wake, nil
}

// trustedFor reports since when ca has been in every injected caBundle.
func (r *Rotator) trustedFor(ca *x509.Certificate) (time.Time, bool) {
	t, ok := r.trustedSince[fingerprint(ca)]
	return t, ok
}

// inject puts next's bundle into the caBundles of every target that exists,
// updating only objects where it differs, and keeps trustedSince: a CA
// counts as trusted from the moment the last existing caBundle that lacked
// it was updated. A target that does not exist is skipped (it is called by
// no apiserver, and its watch brings it back here when it is created); one
// that cannot be read or written holds up trust, since it may exist with an
// older bundle. exists says, per target this pass could read, whether it
// exists.
func (r *Rotator) inject(ctx context.Context, now time.Time, next *material) (map[targetKey]bool, error) {
	bundle := next.caPEM
	newlyAdded := map[string]bool{} // CAs some caBundle lacked before this pass
	noteOld := func(old []byte) {
		olds, _ := parseCertsPEM(old)
		have := map[string]bool{}
		for _, c := range olds {
			have[fingerprint(c)] = true
		}
		for _, c := range next.cas {
			if fp := fingerprint(c); !have[fp] {
				newlyAdded[fp] = true
			}
		}
	}

	exists := map[targetKey]bool{}
	var errs []error
	for _, t := range r.targets() {
		found, err := r.updateIf(ctx, t, func() bool {
			changed := false
			for _, dst := range t.bundles() {
				if !bytes.Equal(*dst, bundle) {
					noteOld(*dst)
					*dst, changed = bundle, true
				}
			}
			return changed
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		exists[t.targetKey] = found
	}
	err := errors.Join(errs...)

	// Record trust. A CA some caBundle lacked starts its propagation clock
	// now; one already everywhere keeps its clock (or starts it, when this
	// process has not seen it before). Nothing counts as trusted while some
	// target could not be read or written; a missing one does not count.
	inBundle := map[string]bool{}
	for _, ca := range next.cas {
		fp := fingerprint(ca)
		inBundle[fp] = true
		if newlyAdded[fp] {
			delete(r.trustedSince, fp)
		}
		if _, ok := r.trustedSince[fp]; !ok && err == nil {
			r.trustedSince[fp] = now
		}
	}
	for fp := range r.trustedSince {
		if !inBundle[fp] {
			delete(r.trustedSince, fp)
		}
	}
	return exists, err
}

// updateIf reads t by name, applies mutate and updates t if mutate reports
// a change. The read resourceVersion guards the update. It reports whether
// t exists.
func (r *Rotator) updateIf(ctx context.Context, t target, mutate func() bool) (bool, error) {
	if err := r.c.Get(ctx, client.ObjectKey{Name: t.name}, t.obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading %s to inject the CA bundle: %w", t, err)
	}
	if !mutate() {
		return true, nil
	}
	if err := r.c.Update(ctx, t.obj); err != nil {
		if apierrors.IsNotFound(err) { // deleted since the read
			return false, nil
		}
		return true, fmt.Errorf("injecting the CA bundle into %s: %w", t, err)
	}
	r.log.Info("Injected CA bundle", "kind", t.kind, "name", t.name)
	return true, nil
}
