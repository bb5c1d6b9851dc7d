//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// faultProxy is a reverse proxy on 127.0.0.1 between an operator and the
// apiserver that breaks a chosen share of the requests the way a real
// network and a loaded apiserver do: delays, connection resets, 429 with
// Retry-After, 500 and 503, and for watches a dropped stream or 410 Gone
// (the resource version is too old). It terminates TLS with a certificate
// of its own (the operator's kubeconfig trusts it) and forwards to the
// apiserver over TLS with the apiserver's CA; the operator's bearer token
// passes through untouched, so the operator keeps its own identity.
//
// The proxy serves HTTP/1.1 only, so a connection can be hijacked and reset;
// client-go falls back from HTTP/2 without complaint.
type faultProxy struct {
	upstream *url.URL
	rp       *httputil.ReverseProxy
	server   *http.Server
	listener net.Listener
	caPEM    []byte
	// rate is the share of requests (0..1) that get a fault while enabled.
	rate    float64
	enabled atomic.Bool
	// requests counts every request the proxy received.
	requests atomic.Int64

	// partitioned holds every new request while set (partition).
	partitioned atomic.Bool
	// droppedPassRequests counts the requests of reconcile passes (not of
	// the Lease rounds or the informers) held by a partition until their
	// client gave up.
	droppedPassRequests atomic.Int64
	// recorder, when set, is told each write the apiserver accepted
	// through this proxy (recordWrite), as replica's (under mu).
	recorder *writeRecorder

	mu      sync.Mutex
	rng     *mrand.Rand
	counts  map[string]int
	watches map[*struct{}]context.CancelFunc // the open watch streams
	healed  chan struct{}                    // closed by heal
	replica string
}

// The faults the proxy injects.
const (
	faultDelay     = "delay"
	faultReset     = "reset"
	fault429       = "429"
	fault500       = "500"
	fault503       = "503"
	faultWatchDrop = "watch dropped"
	fault410       = "410 Gone"
)

// startFaultProxy listens on a free 127.0.0.1 port in front of the
// apiserver admin describes (its host and CA; never its credentials).
func startFaultProxy(admin *rest.Config, seed uint64, rate float64) (*faultProxy, error) {
	upstream, err := url.Parse(admin.Host)
	if err != nil {
		return nil, fmt.Errorf("apiserver URL %q: %w", admin.Host, err)
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			return nil, fmt.Errorf("the apiserver's CA: %w", err)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, errors.New("the suite kubeconfig carries no apiserver CA data")
	}
	cert, caPEM, err := selfSignedLoopbackCert()
	if err != nil {
		return nil, err
	}
	p := &faultProxy{upstream: upstream, caPEM: caPEM, rate: rate,
		rng: mrand.New(mrand.NewPCG(seed, 0x9e0)), counts: map[string]int{},
		watches: map[*struct{}]context.CancelFunc{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			if p.recorder != nil && isWrite(r.Out.Method) {
				// recordWrite reads the answer: JSON, not protobuf or gzip.
				r.Out.Header.Set("Accept", "application/json")
				r.Out.Header.Del("Accept-Encoding")
			}
		},
		ModifyResponse: p.recordWrite,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
		},
		FlushInterval: -1, // watches stream
		// Aborted streams are the point; do not log each one.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	p.listener, err = tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		return nil, fmt.Errorf("fault proxy: %w", err)
	}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.server.Serve(p.listener) }() // ends with Close
	return p, nil
}

// enable starts injecting faults, and cuts every watch open now: the
// operator opened its watches at startup and would otherwise keep them
// through a short run, so none would meet a fault.
func (p *faultProxy) enable() {
	p.enabled.Store(true)
	p.cutWatches()
}

// cutWatches drops every open watch stream mid-stream.
func (p *faultProxy) cutWatches() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cancel := range p.watches {
		cancel()
		p.counts[faultWatchDrop]++
	}
}

// URL is where clients reach the proxy.
func (p *faultProxy) URL() string { return "https://" + p.listener.Addr().String() }

// Close stops the proxy and drops every connection through it.
func (p *faultProxy) Close() error { return p.server.Close() }

// summary is "N faults: k1 x, k2 y, ..." for the report.
func (p *faultProxy) summary() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	total := 0
	var parts []string
	for k, n := range p.counts {
		total += n
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	return total, "proxy faults: " + strings.Join(parts, ", ")
}

// pick draws the fault for one request, or "" for none.
func (p *faultProxy) pick(watch bool) (fault string, delay time.Duration) {
	if !p.enabled.Load() {
		return "", 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Watches are few and long-lived, so each one is faulted more often:
	// otherwise a short run would hardly break any.
	rate := p.rate
	if watch {
		rate = max(rate, 0.5)
	}
	if p.rng.Float64() >= rate {
		return "", 0
	}
	kinds := []string{faultDelay, faultReset, fault429, fault500, fault503}
	if watch {
		kinds = append(kinds, faultWatchDrop, faultWatchDrop, fault410)
	}
	fault = kinds[p.rng.IntN(len(kinds))]
	p.counts[fault]++
	switch fault {
	case faultDelay:
		delay = time.Duration(100+p.rng.IntN(1400)) * time.Millisecond
	case faultWatchDrop:
		delay = time.Duration(200+p.rng.IntN(3000)) * time.Millisecond
	}
	return fault, delay
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	if !p.awaitHeal(r) {
		return
	}
	if p.recorder != nil {
		r = r.WithContext(context.WithValue(r.Context(), sentKey{}, time.Now()))
	}
	watch := r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"
	fault, delay := p.pick(watch)
	if fault == "" && watch {
		p.serveWatch(w, r)
		return
	}
	switch fault {
	case "":
		p.rp.ServeHTTP(w, r)
	case faultDelay:
		select {
		case <-time.After(delay): // the fault itself: a slow apiserver
		case <-r.Context().Done():
			return
		}
		p.rp.ServeHTTP(w, r)
	case faultReset:
		resetConnection(w)
	case fault429:
		w.Header().Set("Retry-After", "1")
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "chaos proxy: too many requests, please try again later")
	case fault500:
		writeStatus(w, http.StatusInternalServerError, "InternalError", "chaos proxy: an error on the server prevented the request from succeeding")
	case fault503:
		writeStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "chaos proxy: the server is currently unable to handle the request")
	case fault410:
		writeStatus(w, http.StatusGone, "Expired", "chaos proxy: too old resource version")
	case faultWatchDrop:
		// The stream runs for a while, then its connection is cut
		// mid-stream (ReverseProxy aborts the handler when its upstream
		// context ends while copying).
		ctx, cancel := context.WithTimeout(r.Context(), delay)
		defer cancel()
		p.rp.ServeHTTP(w, r.WithContext(ctx))
		panic(http.ErrAbortHandler) // the client sees the connection die, not a clean end
	}
}

// serveWatch proxies a watch that enable can cut.
func (p *faultProxy) serveWatch(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	key := &struct{}{}
	p.mu.Lock()
	p.watches[key] = cancel
	p.mu.Unlock()
	p.rp.ServeHTTP(w, r.WithContext(ctx))
	p.mu.Lock()
	delete(p.watches, key)
	p.mu.Unlock()
	if ctx.Err() != nil && r.Context().Err() == nil {
		panic(http.ErrAbortHandler) // cut by enable: the connection dies
	}
}

// resetConnection closes the client's connection with an RST.
func resetConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*tls.Conn); ok {
		if nc, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = nc.SetLinger(0) // RST instead of FIN
		}
	}
	_ = conn.Close()
}

// writeStatus answers with a metav1.Status as the apiserver would.
func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, message, reason, code)
}

// writeKubeconfig writes, next to base, a copy of the kubeconfig base with
// its server replaced by the proxy and its CA by the proxy's certificate.
func (p *faultProxy) writeKubeconfig(base, path string) error {
	kc, err := clientcmd.LoadFromFile(base)
	if err != nil {
		return fmt.Errorf("reading %s: %w", base, err)
	}
	for _, c := range kc.Clusters {
		c.Server = p.URL()
		c.CertificateAuthorityData = p.caPEM
		c.CertificateAuthority = ""
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// selfSignedLoopbackCert returns a certificate for 127.0.0.1 that is its
// own CA, and its PEM for a kubeconfig.
func selfSignedLoopbackCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "reconcilekit chaos proxy"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("proxy certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, certPEM, nil
}

// partition starts holding every new request, as a partition between the
// operator and the apiserver would, while the watch streams open now keep
// flowing (the apiserver-to-operator half of an asymmetric partition): the
// operator keeps hearing of changes and starting passes whose writes cannot
// get through. A held request whose client gives up is never forwarded
// (droppedPassRequests counts the passes' among them); one whose client still
// waits at heal goes through then, as a write a partition delayed would
// reach the apiserver late.
func (p *faultProxy) partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.healed = make(chan struct{})
	p.partitioned.Store(true)
}

// heal forwards the held requests and every new one again.
func (p *faultProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.partitioned.Swap(false) {
		close(p.healed)
	}
}

// awaitHeal holds r while the proxy is partitioned; false if its client
// gave up meanwhile (it is then dropped, never forwarded).
func (p *faultProxy) awaitHeal(r *http.Request) bool {
	if !p.partitioned.Load() {
		return true
	}
	// Read the body first: net/http notices a client that hung up (and
	// cancels r's context) only once the body is read.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	select {
	case <-healed:
		return r.Context().Err() == nil
	case <-r.Context().Done():
		p.mu.Lock()
		p.counts["requests held by the partition until their client gave up"]++
		p.mu.Unlock()
		if passRequest(r) {
			p.droppedPassRequests.Add(1)
		}
		return false
	}
}

// passRequest reports whether r is a reconcile pass's: a write or a read
// of one named object, not a Lease's, an informer's list or watch.
func passRequest(r *http.Request) bool {
	if strings.Contains(r.URL.Path, "/leases") || r.URL.Query().Get("watch") != "" {
		return false
	}
	if isWrite(r.Method) {
		return true
	}
	// .../namespaces/<ns>/<resource>/<name>[/<subresource>]
	_, rest, ok := strings.Cut(r.URL.Path, "/namespaces/")
	return ok && strings.Count(strings.Trim(rest, "/"), "/") >= 2
}
