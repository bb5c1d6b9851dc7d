// Command coredns is the kind node's CoreDNS with only the plugins its
// Corefile uses (kubeadm's, less forward and loop: hack/kind.sh), instead of
// the upstream binary's seventy: the cloud DNS backends (AWS, Azure, Google),
// etcd, dnstap, geoip and tracing it would otherwise compile, which made it
// the slowest binary of a cold kind build.
package main

import (
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/whoami"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
