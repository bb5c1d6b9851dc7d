// Command peer runs one of the bench's peers of the WebApp operator, as the
// bench starts them: `peer idiomatic` (bench/idiomatic) or `peer baseline`
// (bench/baseline). It is a binary of its own so that a peer's CPU and heap
// are its own: it links neither the bench nor its figures.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/reconcilekit/reconcilekit/bench/baseline"
	"github.com/reconcilekit/reconcilekit/bench/idiomatic"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: peer idiomatic|baseline [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "baseline":
		err = runBaseline(os.Args[2:])
	case "idiomatic":
		err = runIdiomatic(os.Args[2:])
	default:
		err = fmt.Errorf("unknown peer %q: idiomatic or baseline", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peer "+os.Args[1]+":", err)
		os.Exit(1)
	}
}

// runBaseline is the child process of the baseline operator.
func runBaseline(args []string) error {
	fs := flag.NewFlagSet("peer baseline", flag.ContinueOnError)
	addr := fs.String("metrics-bind-address", "127.0.0.1:8080", "where to serve controller-runtime's metrics")
	pprofAddr := fs.String("pprof-bind-address", "", "where to serve Go's pprof endpoints (empty: nowhere)")
	reconcilers := fs.Int("max-concurrent-reconciles", 1, "WebApps reconciled at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	return baseline.Run(ctrl.SetupSignalHandler(), cfg, baseline.RunOptions{MetricsAddr: *addr, PprofAddr: *pprofAddr, Reconcilers: *reconcilers})
}

// runIdiomatic is the child process of the idiomatic operator.
func runIdiomatic(args []string) error {
	fs := flag.NewFlagSet("peer idiomatic", flag.ContinueOnError)
	addr := fs.String("metrics-bind-address", "127.0.0.1:8080", "where to serve controller-runtime's metrics")
	namespace := fs.String("namespace", "", "the operator's namespace: the route registry lives here")
	shards := fs.Uint("registry-shards", 0, "spread the route registry over this many ConfigMaps (0: the single ConfigMap)")
	pprofAddr := fs.String("pprof-bind-address", "", "where to serve Go's pprof endpoints (empty: nowhere)")
	reconcilers := fs.Int("max-concurrent-reconciles", 1, "WebApps reconciled at once")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *namespace == "" {
		return errors.New("--namespace is required")
	}
	ctrl.SetLogger(zap.New())
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	return idiomatic.Run(ctrl.SetupSignalHandler(), cfg, idiomatic.RunOptions{
		MetricsAddr: *addr, PprofAddr: *pprofAddr, Namespace: *namespace, Shards: uint32(*shards), Reconcilers: *reconcilers,
	})
}
