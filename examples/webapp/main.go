// Command webapp-operator runs the WebApp operator: the WebApp controller
// and its admission webhooks, built with reconcilekit.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/reconcilekit/reconcilekit/metricsauth"
	"github.com/reconcilekit/reconcilekit/sharding"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/controller"
	"github.com/reconcilekit/reconcilekit/examples/webapp/internal/storageversion"
	webappwebhook "github.com/reconcilekit/reconcilekit/examples/webapp/internal/webhook"
)

// Leader election: one Lease (LeaderElectionID below), in the operator's
// namespace only, and the core/v1 Event client-go's leader elector records
// on a new leader. client-go's Lease lock only gets, creates and updates
// the Lease (a release is an update), never lists, watches, patches or
// deletes it. get and update are limited to the Lease by name; create
// cannot be (the apiserver authorizes a POST before the new object's name
// is known).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;update,resourceNames=webapp-operator.apps.example.com,namespace=webapp-system
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=create,namespace=webapp-system
// +kubebuilder:rbac:groups=core,resources=events,verbs=create;patch,namespace=webapp-system

// Sharding (--sharding): each replica's Lease, webapp-operator-<pod name>,
// in the operator's namespace. The Member lists the group's Leases (by
// label), creates, renews (update) and deletes its own, and deletes one it
// saw expire; the names are the pods', so not limited by name.

// webappCRD is the WebApp CRD: its conversion webhook's caBundle (certs.go)
// and its storage version migration.
const webappCRD = "webapps.apps.example.com"

// Storage version migration (internal/storageversion): it watches the
// WebApp CRD and reads it (get, list and watch, by name: its informer asks
// for the one CRD by metadata.name; certs.go adds update for the Rotator),
// patches every WebApp unchanged (list and patch, granted for the
// controller) and finally patches the CRD's status.storedVersions, limited
// by name to this one CRD.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch,resourceNames=webapps.apps.example.com
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions/status,verbs=patch,resourceNames=webapps.apps.example.com

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "webapp-operator:", err)
		os.Exit(1)
	}
}

type flags struct {
	metricsAddr, probeAddr string
	pprofAddr              string
	reconcilers            int
	secureMetrics          bool
	leaderElect            bool
	namespace              string
	webhookPort            int
	webhookHost            string
	enableWebhooks         bool
	migrateStorage         bool
	sharding               bool
	shardIdentity          string
	certs                  certFlags
}

func parseFlags() (flags, zap.Options) {
	var f flags
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443",
		"Address of the metrics endpoint; \"0\" disables it. Served over HTTPS with authentication and authorization unless --metrics-secure=false.")
	flag.BoolVar(&f.secureMetrics, "metrics-secure", true, "Serve metrics over HTTPS, for authenticated and authorized clients only.")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	flag.IntVar(&f.reconcilers, "max-concurrent-reconciles", 1,
		"WebApps reconciled at once. Passes of one WebApp never overlap; raise it when many WebApps change together (a rollout of a new image to all).")
	flag.StringVar(&f.pprofAddr, "pprof-bind-address", "",
		"Address of Go's /debug/pprof endpoints, for profiling (plain HTTP, unauthenticated: bind it to 127.0.0.1); empty disables them.")
	flag.BoolVar(&f.leaderElect, "leader-elect", false, "Elect a leader (a Lease), so only one of several replicas reconciles.")
	flag.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "webapp-system"),
		"The operator's namespace: leader election Lease, webhook certificate Secret and route registry live here.")
	flag.IntVar(&f.webhookPort, "webhook-port", 9443, "Port of the admission webhook server.")
	flag.StringVar(&f.webhookHost, "webhook-host", "", "Address the webhook server binds to (default: all).")
	flag.BoolVar(&f.enableWebhooks, "enable-webhooks", true,
		"Serve the admission webhooks and the CRD's conversion webhook. Without them, reading a WebApp as apps.example.com/v1 fails unless another process serves /convert.")
	flag.BoolVar(&f.migrateStorage, "migrate-storage", true,
		"While leader, whenever the WebApp CRD's status.storedVersions lists a version other than its storage version (at start, and when the CRD is upgraded): rewrite the WebApps in the storage version, then trim storedVersions to it.")
	flag.BoolVar(&f.sharding, "sharding", false,
		"Experimental: share the WebApps among the replicas (docs/sharding.md). Each reconciles the WebApps of the hash ranges it owns, announced by a Lease per replica in --namespace; the WebApp controller runs on every replica, without leader election (the certificates and the storage version migration still follow --leader-elect).")
	flag.StringVar(&f.shardIdentity, "shard-identity", os.Getenv("POD_NAME"),
		"With --sharding: this replica's name, unique among the running replicas (default: $POD_NAME).")
	f.certs.bind(flag.CommandLine)
	opts := zap.Options{Development: false}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	return f, opts
}

func run() error {
	f, zapOpts := parseFlags()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if f.reconcilers < 1 {
		return fmt.Errorf("--max-concurrent-reconciles=%d: must be at least 1", f.reconcilers)
	}
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	// Both served versions: the controller reconciles v2 (the storage
	// version and conversion hub); v1 is in the scheme for the conversion
	// webhook, which converts between the two.
	if err := webappv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := webappv2.AddToScheme(scheme); err != nil {
		return err
	}
	// The storage version migration reads and patches the WebApp CRD.
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}

	// HTTP/2 is disabled on the webhook and metrics servers: it is not
	// needed and has had denial-of-service advisories (as kubebuilder's
	// scaffold does).
	disableHTTP2 := func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
	metricsOpts := metricsserver.Options{
		BindAddress:   f.metricsAddr,
		SecureServing: f.secureMetrics,
		TLSOpts:       []func(*tls.Config){disableHTTP2},
	}
	if f.secureMetrics {
		// TokenReview and SubjectAccessReview: only clients allowed to
		// GET /metrics (the metrics-reader ClusterRole) may scrape.
		metricsOpts.FilterProvider = metricsauth.FilterProvider
	}
	certOpts, err := f.certs.tlsOpts(f.namespace)
	if err != nil {
		return err
	}
	webhookServer := webhook.NewServer(webhook.Options{
		Host: f.webhookHost, Port: f.webhookPort, CertDir: f.certs.dir,
		TLSOpts: append([]func(*tls.Config){disableHTTP2}, certOpts...),
	})
	cfg := ctrl.GetConfigOrDie()
	// Memory: cache only what the operator manages (by label; the route
	// registry only in its namespace), without managedFields; sharded,
	// only the WebApps of this replica's ranges and what they own. The
	// Member exists before the manager, whose cache it selects, and reads
	// and writes its Lease with a client of its own: uncached, as it must.
	cacheOpts := controller.CacheOptions(f.namespace)
	var member *sharding.Member
	if f.sharding {
		// Every request names the replica (shardUserAgent), for the API
		// server's audit log.
		cfg.UserAgent = shardUserAgent(f.shardIdentity)
		leases, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("--sharding: %w", err)
		}
		if member, err = sharding.New(sharding.Options{
			Group: shardGroup, Identity: f.shardIdentity, Namespace: f.namespace,
			APIReader: leases, Client: leases, Logger: ctrl.Log.WithName("sharding"),
		}); err != nil {
			return fmt.Errorf("--sharding: %w", err)
		}
		if cacheOpts, err = controller.SelectCache(cacheOpts, member, scheme); err != nil {
			return fmt.Errorf("--sharding: %w", err)
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOpts,
		WebhookServer:           webhookServer,
		HealthProbeBindAddress:  f.probeAddr,
		PprofBindAddress:        f.pprofAddr,
		Controller:              config.Controller{MaxConcurrentReconciles: f.reconcilers},
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        "webapp-operator.apps.example.com",
		LeaderElectionNamespace: f.namespace,
		// The new leader starts at once when the old one stops cleanly.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       new(30 * time.Second),
		Cache:                         cacheOpts,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}

	// The controller is set up once this replica leads, not before the
	// manager starts. Its WebApp informer lists v2, which needs the
	// conversion webhook while WebApps stored as v1 remain (right after
	// the upgrade to v2), and that webhook needs this process's serving
	// certificate (the Rotator's serving loop) and, after the new CRD was
	// applied, the caBundle the Rotator's leader injects. An informer
	// created before Start holds the manager in its cache sync, before
	// either of them runs: the operator would never start.
	//
	// Sharded, it is set up on every replica, leader or not: each
	// reconciles the WebApps of its ranges.
	if member != nil {
		if err := mgr.Add(member); err != nil {
			return err
		}
	}
	setup := func(ctx context.Context) error {
		if _, err := controller.Setup(mgr, f.namespace, member); err != nil {
			return fmt.Errorf("setting up the WebApp controller: %w", err)
		}
		return nil
	}
	var setupRunnable manager.Runnable = manager.RunnableFunc(setup)
	if member != nil {
		setupRunnable = everyReplica(setup)
	}
	if err := mgr.Add(setupRunnable); err != nil {
		return err
	}
	if f.enableWebhooks {
		if err := webappwebhook.Setup(mgr); err != nil {
			return fmt.Errorf("setting up the WebApp webhooks: %w", err)
		}
		if err := f.certs.setup(mgr); err != nil {
			return fmt.Errorf("setting up webhook certificates: %w", err)
		}
	}
	if f.migrateStorage {
		m := &storageversion.Migrator{
			Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), CRD: webappCRD,
			Log: ctrl.Log.WithName("storage-version-migration"),
		}
		if err := m.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the storage version migration: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}

	log.Info("starting manager", "namespace", f.namespace, "leaderElection", f.leaderElect, "webhooks", f.enableWebhooks,
		"sharding", f.sharding)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// shardGroup names the sharded replicas' group: their Leases are
// shardGroup-<pod name>, labelled sharding.reconcilekit.io/group=shardGroup.
const shardGroup = "webapp-operator"

// shardUserAgent is a sharded replica's user agent: client-go's default
// (binary name, version, platform) followed by "shard/<identity>". Every
// replica of a group authenticates as the same ServiceAccount, so the user
// agent is what tells them apart in the API server's audit log: which
// replica read or wrote an object, and when, against the Leases that gave
// it the object's range (the chaos suite judges its sharding scenarios so).
func shardUserAgent(identity string) string {
	return rest.DefaultKubernetesUserAgent() + " shard/" + identity
}

// everyReplica is a runnable the manager starts on every replica, leader
// or not.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
