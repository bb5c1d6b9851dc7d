package bench_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/reconcilekit/reconcilekit/bench"
)

// A Counter's Transport counts requests by verb and resource as the
// apiserver's metrics do; NewProxy does the same for a whole process.
func ExampleCounter_Transport() {
	apiserver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer apiserver.Close()

	c := bench.NewCounter()
	client := &http.Client{Transport: c.Transport(http.DefaultTransport)}
	for _, path := range []string{"/api/v1/namespaces/ns/services/web", "/apis/apps/v1/deployments?watch=true"} {
		resp, err := client.Get(apiserver.URL + path)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodPatch, apiserver.URL+"/apis/apps/v1/namespaces/ns/deployments/web", nil)
	req.Header.Set("Content-Type", "application/apply-patch+yaml")
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
	}

	counts := c.Snapshot()
	for _, k := range counts.Keys() {
		fmt.Println(k, counts[k].N)
	}
	fmt.Println("mutating:", counts.Mutating())
	// Output:
	// apply deployments.apps 1
	// watch deployments.apps 1
	// get services 1
	// mutating: 1
}
