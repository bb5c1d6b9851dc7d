package bench

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// Key identifies one kind of API request as the apiserver's
// apiserver_request_total metric does: verb, group, resource, subresource.
// Verbs are the kit's (reconcilertest) names: get, list, watch, create,
// update, patch, apply (a server-side apply patch), delete,
// deletecollection. Non-resource requests (discovery, /version) have an
// empty Resource and the path in Path.
type Key struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Path        string
}

// Mutating reports whether the request changes state on the server.
func (k Key) Mutating() bool {
	switch k.Verb {
	case "get", "list", "watch", "":
		return false
	}
	return k.Resource != ""
}

// Target renders the resource as kubectl does ("deployments.apps/status").
func (k Key) Target() string {
	if k.Resource == "" {
		return k.Path
	}
	s := k.Resource
	if k.Group != "" {
		s += "." + k.Group
	}
	if k.Subresource != "" {
		s += "/" + k.Subresource
	}
	return s
}

func (k Key) String() string { return k.Verb + " " + k.Target() }

// MarshalText encodes k as "verb|group|resource|subresource|path", so
// that Counts can be saved as JSON and rendered again (bench -render).
func (k Key) MarshalText() ([]byte, error) {
	return []byte(strings.Join([]string{k.Verb, k.Group, k.Resource, k.Subresource, k.Path}, "|")), nil
}

// UnmarshalText decodes what MarshalText encoded.
func (k *Key) UnmarshalText(b []byte) error {
	f := strings.Split(string(b), "|")
	if len(f) != 5 {
		return fmt.Errorf("request key %q: want 5 fields separated by |", b)
	}
	*k = Key{Verb: f[0], Group: f[1], Resource: f[2], Subresource: f[3], Path: f[4]}
	return nil
}

// Stat is what a Counter knows about one Key.
type Stat struct {
	// N is the number of requests sent.
	N int
	// Failed counts the requests answered with a status of 400 or more (or
	// not answered); Conflicts the 409s among them.
	Failed, Conflicts int
	// Latency is the summed time to the response headers of the requests
	// that are not watches.
	Latency time.Duration
}

// Counts is a snapshot of a Counter.
type Counts map[Key]Stat

// Sub returns c minus before, dropping keys whose count did not change.
func (c Counts) Sub(before Counts) Counts {
	out := Counts{}
	for k, s := range c {
		b := before[k]
		d := Stat{N: s.N - b.N, Failed: s.Failed - b.Failed, Conflicts: s.Conflicts - b.Conflicts, Latency: s.Latency - b.Latency}
		if d.N != 0 {
			out[k] = d
		}
	}
	return out
}

// Without returns c without the requests for resource (of any group):
// a sharded replica's Lease renewals, which never stop, are not work.
func (c Counts) Without(resource string) Counts {
	out := Counts{}
	for k, s := range c {
		if k.Resource != resource {
			out[k] = s
		}
	}
	return out
}

// ByVerb sums the counts of resource requests by verb.
func (c Counts) ByVerb() map[string]int {
	out := map[string]int{}
	for k, s := range c {
		if k.Resource != "" {
			out[k.Verb] += s.N
		}
	}
	return out
}

// Mutating sums the mutating requests.
func (c Counts) Mutating() int {
	n := 0
	for k, s := range c {
		if k.Mutating() {
			n += s.N
		}
	}
	return n
}

// Conflicts sums the 409 answers.
func (c Counts) Conflicts() int {
	n := 0
	for _, s := range c {
		n += s.Conflicts
	}
	return n
}

// Total sums every request.
func (c Counts) Total() int {
	n := 0
	for _, s := range c {
		n += s.N
	}
	return n
}

// MeanLatency is the mean time to response headers of the requests of the
// keys match selects, or 0 when there are none.
func (c Counts) MeanLatency(match func(Key) bool) time.Duration {
	var sum time.Duration
	n := 0
	for k, s := range c {
		if match(k) && k.Verb != "watch" {
			sum += s.Latency
			n += s.N
		}
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// Keys returns the keys sorted by target, then verb.
func (c Counts) Keys() []Key {
	keys := slices.Collect(maps.Keys(c))
	slices.SortFunc(keys, func(a, b Key) int {
		if t := strings.Compare(a.Target(), b.Target()); t != 0 {
			return t
		}
		return strings.Compare(a.Verb, b.Verb)
	})
	return keys
}

// Counter counts the HTTP requests of one client on the wire, classified
// with the apiserver's own RequestInfoFactory, so its keys line up with
// apiserver_request_total. Requests served from an informer cache never
// reach it: it counts API traffic, not client calls. Safe for concurrent
// use.
type Counter struct {
	mu       sync.Mutex
	counts   Counts
	inFlight int
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter { return &Counter{counts: Counts{}} }

// Snapshot copies the current counts.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// InFlight is the number of requests sent and not yet answered. A request
// is counted when its answer arrives, after the apiserver has counted it in
// apiserver_request_total, so a window must not end while one is in flight.
func (c *Counter) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight
}

func (c *Counter) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight++
}

func (c *Counter) record(k Key, code int, latency time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight--
	s := c.counts[k]
	s.N++
	if code == 0 || code >= 400 {
		s.Failed++
	}
	if code == http.StatusConflict {
		s.Conflicts++
	}
	if k.Verb != "watch" {
		s.Latency += latency
	}
	c.counts[k] = s
}

var requestInfo = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// Classify returns the Key of req.
func Classify(req *http.Request) Key {
	info, err := requestInfo.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest {
		return Key{Verb: strings.ToLower(req.Method), Path: req.URL.Path}
	}
	verb := info.Verb
	if verb == "patch" && req.Header.Get("Content-Type") == string(types.ApplyPatchType) {
		verb = "apply"
	}
	return Key{Verb: verb, Group: info.APIGroup, Resource: info.Resource, Subresource: info.Subresource}
}

// Transport wraps next so that every request through it is counted in c.
func (c *Counter) Transport(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		k := Classify(req)
		start := time.Now()
		c.start()
		resp, err := next.RoundTrip(req)
		code := 0
		if err == nil {
			code = resp.StatusCode
		}
		c.record(k, code, time.Since(start))
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// NewProxy returns a reverse proxy to the apiserver at target that sends
// every request with transport (which carries the credentials) and counts
// it in c. A process whose kubeconfig points at the proxy, over plain HTTP
// on loopback, is thereby counted on the wire without any change to its
// code. Watches are streamed through unbuffered.
func NewProxy(target *url.URL, transport http.RoundTripper, c *Counter) http.Handler {
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     c.Transport(transport),
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, fmt.Sprintf("bench proxy: %v", err), http.StatusBadGateway)
		},
	}
}
