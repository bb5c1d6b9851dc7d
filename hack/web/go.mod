// The web server the kind cluster's WebApps and the e2e suite's Jobs run
// (Dockerfile; hack/image.sh builds the same binary FROM scratch). Standard
// library only.
module github.com/reconcilekit/reconcilekit/hack/web

go 1.26.0
