//go:build tools

// Package helmtool pins helm's command for `go build helm.sh/helm/v4/cmd/helm`.
package helmtool

import _ "helm.sh/helm/v4/cmd/helm"
