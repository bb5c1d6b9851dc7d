// Command cache-operator runs the Cache controller.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/metricsauth"

	cachev1alpha1 "github.com/reconcilekit/reconcilekit/docs/getting-started/api/v1alpha1"
	"github.com/reconcilekit/reconcilekit/docs/getting-started/internal/controller"
)

// Leader election takes a Lease in the operator's namespace, and only there;
// client-go's leader elector also records a core/v1 Event there when this
// replica becomes the leader.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete,namespace=cache-system
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch,namespace=cache-system

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cache-operator:", err)
		os.Exit(1)
	}
}

func run() error {
	var metricsAddr, probeAddr, namespace string
	var leaderElect bool
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", `HTTPS metrics address, for authenticated and authorized scrapers; "0" disables it.`)
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader, so that only one replica reconciles.")
	flag.StringVar(&namespace, "namespace", "cache-system", "The operator's namespace, which holds the leader election Lease.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse() // also reads --kubeconfig, which controller-runtime registers
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress:    metricsAddr,
			SecureServing:  true,
			FilterProvider: metricsauth.FilterProvider,
		},
		HealthProbeBindAddress:        probeAddr,
		LeaderElection:                leaderElect,
		LeaderElectionID:              "cache-operator.cache.example.com",
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := controller.Setup(mgr); err != nil {
		return fmt.Errorf("setting up the Cache controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
