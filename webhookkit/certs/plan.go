package certs

import (
	"crypto/x509"
	"fmt"
	"time"
)

// plan computes what the Secret should hold at now, starting from cur (its
// current content; empty when there is none). rotateCA forces a new CA.
// trusted reports since when a CA has been in every injected caBundle.
//
// It returns the next content (cur's bytes reused wherever nothing changes,
// so an unchanged Secret compares equal), the time of the next change it
// foresees, and human-readable reasons for what it changed (empty when
// nothing did).
//
// Rules, in order:
//  1. Expired CAs leave the bundle.
//  2. A new CA is made when there is no signing CA, it is within RenewBefore
//     of expiry, or rotateCA is set. It is added in front of the still-valid
//     old CAs, which stay trusted until they expire.
//  3. The serving certificate is kept while it is valid for the configured
//     names, chains to the bundle, is not within RenewBefore of expiry and is
//     signed by the signing CA. Otherwise it is replaced by one signed by the
//     signing CA (never outliving it) — at once when the current one is
//     unusable, else only once the signing CA has been trusted for
//     TrustPropagation, so no apiserver sees a certificate it cannot verify.
func (r *Rotator) plan(now time.Time, cur *material, rotateCA bool, trusted func(*x509.Certificate) (time.Time, bool)) (*material, time.Time, []string, error) {
	next := *cur
	var reasons []string
	renewAt := func(notAfter time.Time) time.Time { return notAfter.Add(-r.opts.RenewBefore) }
	wake := now.Add(r.opts.Validity)
	soonest := func(t time.Time) {
		if t.Before(wake) {
			wake = t
		}
	}

	// 1. Prune expired CAs.
	bundleChanged := false
	next.cas = nil
	for _, ca := range cur.cas {
		if now.Before(ca.NotAfter) {
			next.cas = append(next.cas, ca)
		} else {
			bundleChanged = true
			reasons = append(reasons, fmt.Sprintf("removed expired CA %q from the bundle", ca.Subject.CommonName))
		}
	}
	if next.signer != nil && !now.Before(next.signer.NotAfter) {
		next.signer, next.caKey = nil, nil
	}

	// 2. Signing CA.
	if next.signer == nil || !now.Before(renewAt(next.signer.NotAfter)) || rotateCA {
		why := "no usable CA"
		switch {
		case rotateCA:
			why = "the Secret was deleted or its certificate unusable"
		case next.signer != nil:
			why = fmt.Sprintf("CA expires at %s", next.signer.NotAfter.Format(time.RFC3339))
		}
		ca, key, err := newCA(r.opts.Namespace+"."+r.opts.SecretName, now, now.Add(r.opts.Validity))
		if err != nil {
			return nil, time.Time{}, nil, err
		}
		keyPEM, err := encodeKeyPEM(key)
		if err != nil {
			return nil, time.Time{}, nil, err
		}
		next.signer, next.caKey, next.caKeyPEM = ca, key, keyPEM
		next.cas = append([]*x509.Certificate{ca}, next.cas...)
		bundleChanged = true
		reasons = append(reasons, fmt.Sprintf("issued CA %q (%s)", ca.Subject.CommonName, why))
	}
	if bundleChanged {
		next.caPEM = encodeBundle(next.cas)
	}
	soonest(renewAt(next.signer.NotAfter))
	for _, ca := range next.cas {
		soonest(ca.NotAfter)
	}

	// 3. Serving certificate.
	leaf := cur.leaf()
	usable := leaf != nil && now.Before(leaf.NotAfter) && namesMatch(leaf, r.dnsNames, r.ips) && signedBy(leaf, next.cas...)
	fresh := usable && now.Before(renewAt(leaf.NotAfter)) && signedBy(leaf, next.signer)
	since, isTrusted := trusted(next.signer)
	propagated := isTrusted && !now.Before(since.Add(r.opts.TrustPropagation))
	switch {
	case fresh:
		soonest(renewAt(leaf.NotAfter))
	case usable && !propagated:
		// Keep serving the old certificate until the new CA is trusted.
		if isTrusted {
			soonest(since.Add(r.opts.TrustPropagation))
		} else {
			soonest(now.Add(r.opts.TrustPropagation))
		}
	default:
		why := "no usable serving certificate"
		if usable {
			why = fmt.Sprintf("serving certificate expires at %s or is signed by an older CA", leaf.NotAfter.Format(time.RFC3339))
		}
		notAfter := now.Add(r.opts.Validity)
		if next.signer.NotAfter.Before(notAfter) {
			notAfter = next.signer.NotAfter
		}
		certPEM, keyPEM, err := newServingCert(next.signer, next.caKey, r.dnsNames, r.ips, now, notAfter)
		if err != nil {
			return nil, time.Time{}, nil, err
		}
		m, problems := parseMaterial(map[string][]byte{keyCert: certPEM, keyKey: keyPEM})
		if len(problems) > 0 {
			return nil, time.Time{}, nil, fmt.Errorf("parsing issued certificate: %v", problems)
		}
		next.certPEM, next.keyPEM, next.cert = certPEM, keyPEM, m.cert
		soonest(renewAt(notAfter))
		reasons = append(reasons, fmt.Sprintf("issued serving certificate %s valid until %s (%s)",
			m.cert.Leaf.SerialNumber, notAfter.Format(time.RFC3339), why))
	}
	return &next, wake, reasons, nil
}
