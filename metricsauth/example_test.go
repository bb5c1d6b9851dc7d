package metricsauth_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/metricsauth"
)

// A manager whose metrics only a ServiceAccount allowed to GET /metrics may
// scrape, over HTTPS, as kubebuilder scaffolds it with controller-runtime's
// filter. ctrl.NewManager(ctrl.GetConfigOrDie(), opts) builds the filter with
// the manager's config; here it is built the same way against a stand-in
// API server (apiServer, below) that authenticates "prometheus-token" as a
// ServiceAccount allowed GET /metrics and "other-token" as one allowed
// nothing, and each scrape shows the filter's answer.
func Example() {
	opts := ctrl.Options{
		Metrics: metricsserver.Options{
			BindAddress:    ":8443",
			SecureServing:  true,
			FilterProvider: metricsauth.FilterProvider,
		},
	}

	api := httptest.NewServer(apiServer())
	defer api.Close()
	filter, err := opts.Metrics.FilterProvider(&rest.Config{Host: api.URL}, nil)
	if err != nil {
		panic(err)
	}
	metrics, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "controller_runtime_reconcile_total ...")
	}))
	if err != nil {
		panic(err)
	}
	for _, authorization := range []string{"", "Bearer forged", "Bearer other-token", "Bearer prometheus-token"} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Authorization", authorization)
		rec := httptest.NewRecorder()
		metrics.ServeHTTP(rec, req)
		fmt.Printf("%q: %d %s\n", authorization, rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// "": 401 Unauthorized
	// "Bearer forged": 401 Unauthorized
	// "Bearer other-token": 403 Authorization denied for user system:serviceaccount:monitoring:other
	// "Bearer prometheus-token": 200 controller_runtime_reconcile_total ...
}

// apiServer answers TokenReviews and SubjectAccessReviews as an API server
// would with two ServiceAccount tokens, only the first of them bound to a
// ClusterRole allowing GET on the non-resource URL /metrics (kubebuilder's
// metrics-reader). It reads the requests in whichever encoding client-go
// sends (Protobuf) and answers in JSON.
func apiServer() http.Handler {
	users := map[string]string{
		"prometheus-token": "system:serviceaccount:monitoring:prometheus",
		"other-token":      "system:serviceaccount:monitoring:other",
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch review := obj.(type) {
		case *authnv1.TokenReview:
			name, ok := users[review.Spec.Token]
			review.Status = authnv1.TokenReviewStatus{Authenticated: ok, User: authnv1.UserInfo{Username: name}}
		case *authzv1.SubjectAccessReview:
			attrs := review.Spec.NonResourceAttributes
			review.Status.Allowed = review.Spec.User == users["prometheus-token"] &&
				attrs != nil && attrs.Path == "/metrics" && attrs.Verb == "get"
		default:
			http.Error(w, fmt.Sprintf("unexpected %T", obj), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(obj)
	})
}
