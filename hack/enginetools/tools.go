//go:build tools

// Package enginetools records, as dependencies of this module, the private
// container engine's daemons that hack/engine.sh builds: dockerd and
// docker-proxy (github.com/moby/moby/v2), containerd, its runc shim and ctr
// (github.com/containerd/containerd/v2). dockerd imports most of containerd,
// so in one module, with one version of every shared dependency, one go build
// compiles those packages once; built apart, each binary's own module graph
// (another gRPC, another OpenTelemetry) compiled them twice. runc (cgo) and
// the docker CLI (no go.mod: its vendor.mod pins versions the proxy does not
// all serve) are built on their own.
package enginetools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/moby/moby/v2/cmd/docker-proxy"
	_ "github.com/moby/moby/v2/cmd/dockerd"
)
