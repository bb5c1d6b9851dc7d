package bench_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/reconcilekit/reconcilekit/bench"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		method, path, contentType string
		want                      bench.Key
		mutating                  bool
	}{
		{"GET", "/api/v1/namespaces/ns/services/web", "", bench.Key{Verb: "get", Resource: "services"}, false},
		{"GET", "/apis/apps/v1/deployments?watch=true&labelSelector=a%3Db", "", bench.Key{Verb: "watch", Group: "apps", Resource: "deployments"}, false},
		{"GET", "/apis/apps/v1/namespaces/ns/deployments", "", bench.Key{Verb: "list", Group: "apps", Resource: "deployments"}, false},
		{"POST", "/api/v1/namespaces/ns/configmaps", "application/json", bench.Key{Verb: "create", Resource: "configmaps"}, true},
		{"PUT", "/apis/apps.example.com/v1/namespaces/ns/webapps/a/status", "application/json",
			bench.Key{Verb: "update", Group: "apps.example.com", Resource: "webapps", Subresource: "status"}, true},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/a", "application/apply-patch+yaml", bench.Key{Verb: "apply", Group: "apps", Resource: "deployments"}, true},
		{"PATCH", "/apis/apps/v1/namespaces/ns/deployments/a", "application/merge-patch+json", bench.Key{Verb: "patch", Group: "apps", Resource: "deployments"}, true},
		{"DELETE", "/apis/apps.example.com/v1/namespaces/ns/webapps", "", bench.Key{Verb: "deletecollection", Group: "apps.example.com", Resource: "webapps"}, true},
		{"GET", "/apis", "", bench.Key{Verb: "get", Path: "/apis"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			got := bench.Classify(req)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.mutating, got.Mutating())
		})
	}
}

func TestProxyCountsAndForwards(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			w.WriteHeader(http.StatusConflict)
			return
		}
		_, _ = w.Write([]byte("upstream " + r.URL.Path))
	}))
	defer upstream.Close()
	target, err := url.Parse(upstream.URL)
	require.NoError(t, err)
	c := bench.NewCounter()
	proxy := httptest.NewServer(bench.NewProxy(target, http.DefaultTransport, c))
	defer proxy.Close()

	resp, err := http.Get(proxy.URL + "/api/v1/namespaces/ns/configmaps/a")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "upstream /api/v1/namespaces/ns/configmaps/a", string(body))

	req, err := http.NewRequest(http.MethodPut, proxy.URL+"/api/v1/namespaces/ns/configmaps/a", strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()

	got := c.Snapshot()
	get := got[bench.Key{Verb: "get", Resource: "configmaps"}]
	update := got[bench.Key{Verb: "update", Resource: "configmaps"}]
	assert.Equal(t, 1, get.N)
	assert.Zero(t, get.Failed)
	assert.Equal(t, bench.Stat{N: 1, Failed: 1, Conflicts: 1, Latency: update.Latency}, update)
	assert.Equal(t, 1, got.Mutating())
	assert.Equal(t, 1, got.Conflicts())
}

func TestCountsSub(t *testing.T) {
	get := bench.Key{Verb: "get", Resource: "services"}
	patch := bench.Key{Verb: "patch", Group: "apps", Resource: "deployments"}
	before := bench.Counts{get: {N: 2, Latency: time.Second}, patch: {N: 1}}
	after := bench.Counts{get: {N: 5, Latency: 4 * time.Second}, patch: {N: 1}}
	d := after.Sub(before)
	assert.Equal(t, bench.Counts{get: {N: 3, Latency: 3 * time.Second}}, d)
	assert.Equal(t, map[string]int{"get": 3}, d.ByVerb())
	assert.Equal(t, time.Second, d.MeanLatency(func(bench.Key) bool { return true }))
}

func TestParseBenchOutput(t *testing.T) {
	out := `goos: linux
pkg: github.com/reconcilekit/reconcilekit/conditions
BenchmarkSetNoChange-2   	  880696	      1263 ns/op	       0 B/op	       0 allocs/op
PASS
pkg: github.com/reconcilekit/reconcilekit/reconciler
BenchmarkStatusChangedNoChange-16   	  113048	     10443 ns/op	     976 B/op	      62 allocs/op
BenchmarkNoMem	  100	 5.5 ns/op
ok  	github.com/reconcilekit/reconcilekit/reconciler	1.300s
`
	assert.Equal(t, []bench.Micro{
		{Package: "github.com/reconcilekit/reconcilekit/conditions", Name: "BenchmarkSetNoChange", NsPerOp: 1263},
		{Package: "github.com/reconcilekit/reconcilekit/reconciler", Name: "BenchmarkStatusChangedNoChange", NsPerOp: 10443, BytesPerOp: 976, Allocs: 62},
		{Package: "github.com/reconcilekit/reconcilekit/reconciler", Name: "BenchmarkNoMem", NsPerOp: 5.5},
	}, bench.ParseBenchOutput(out))
}

func TestCountsJSONRoundTrip(t *testing.T) {
	in := bench.Counts{
		{Verb: "update", Group: "apps.example.com", Resource: "webapps", Subresource: "status"}: {N: 3, Conflicts: 1, Failed: 1, Latency: time.Millisecond},
		{Verb: "get", Path: "/apis"}: {N: 1},
	}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	var out bench.Counts
	require.NoError(t, json.Unmarshal(b, &out))
	assert.Equal(t, in, out)
}

// A request is in flight from the moment it is sent until its answer
// arrives, and only then counted.
func TestInFlight(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{})
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	}))
	defer upstream.Close()
	c := bench.NewCounter()
	client := &http.Client{Transport: c.Transport(http.DefaultTransport)}

	done := make(chan error, 1)
	go func() {
		resp, err := client.Post(upstream.URL+"/api/v1/namespaces/ns/configmaps", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-arrived
	assert.Equal(t, 1, c.InFlight())
	assert.Zero(t, c.Snapshot().Total(), "not counted before the answer")
	close(release)
	require.NoError(t, <-done)
	assert.Zero(t, c.InFlight())
	assert.Equal(t, 1, c.Snapshot()[bench.Key{Verb: "create", Resource: "configmaps"}].N)
}
