// Package metricsauth protects an operator's metrics endpoint the way
// kubebuilder's scaffold does: a scrape passes only with a bearer token the
// API server authenticates (a TokenReview) whose user may GET the path (a
// SubjectAccessReview), such as a Prometheus ServiceAccount bound to a
// ClusterRole allowing nonResourceURLs ["/metrics"].
//
// [FilterProvider] is a drop-in for controller-runtime's
// filters.WithAuthenticationAndAuthorization in
// metricsserver.Options.FilterProvider, with the same answers (401 without
// an authenticated token, 403 when not allowed, 500 when the API server
// cannot be asked) and the same cache lifetimes. It exists because that
// filter's delegating authenticator and authorizer come from k8s.io/apiserver,
// whose webhook plugins link CEL, gRPC, OpenTelemetry and the OpenAPI
// validators: in the WebApp operator they were 250 of its 1,110 packages,
// 28 MiB of its 81 MiB binary and 1.6 MiB of heap allocated before main
// (GODEBUG=inittrace=1), about a quarter of the idle operator's heap. This
// package asks the same two questions with client-go's typed clients.
package metricsauth
