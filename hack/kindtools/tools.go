//go:build tools

// Package kindtools records, as dependencies of this module, the Kubernetes
// node binaries that hack/kind.sh builds into the kind node image: kubelet,
// kubeadm and kube-proxy (CoreDNS is ./coredns, with the plugins it needs,
// built in this module so it shares their compiled Kubernetes packages).
// The control plane's binaries are built from hack/tools; this module is
// kept apart so that adding the node's commands does not change
// hack/tools/go.sum, which keys the control plane's cache.
package kindtools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
