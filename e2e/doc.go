//go:build e2e

// Package e2e holds the end-to-end suite: features that run against a whole
// Kubernetes control plane (apiserver, controller manager with its garbage
// collector and endpoint controllers, scheduler) instead of envtest's bare
// apiserver, so behaviour that needs those controllers is tested for real.
//
// The problem it prevents: an e2e suite that quietly runs against whatever
// cluster ~/.kube/config points at, downloads tool versions of its own, or
// leaves a control plane running after a failed run. Here the cluster is
// chosen explicitly, created from the project's own pinned binaries, torn down
// on every exit path the process survives, and its logs are kept when
// something failed.
//
// Every file carries the build tag e2e, so `go test ./...` never compiles it,
// and e2e/ is a Go module of its own (e2e/go.mod, built against this
// checkout's library), so e2e-framework never reaches the library's go.mod.
// Run it with `make test-e2e`, or directly, in e2e/:
//
//	TOOLS_BIN=$(../hack/tools.sh | tail -n1) go test -tags e2e ./... -v -timeout 30m
//
// # Cluster providers
//
// E2E_PROVIDER picks the cluster ([Provider]):
//
//   - kwok (default): a local cluster started by hack/cluster.sh from the
//     binaries in TOOLS_BIN (when unset, hack/tools.sh is run for them):
//     real etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
//     plus one node simulated by kwok that makes pods Ready without running
//     them. Pod and Service IPs are fake: talk only to the apiserver.
//   - kind: a real one-node kind cluster. Without KIND_BINARY it is created by
//     hack/kind.sh (`make test-kind`): a node image assembled offline, on the
//     private dockerd of hack/engine.sh, with the operator and web images of
//     hack/image.sh loaded. With KIND_BINARY (a laptop with Docker and
//     registry access) e2e-framework's kind support creates it from kind's
//     public node image (KIND_NODE_IMAGE and KIND_CONFIG choose another
//     image and a cluster configuration); kind is never installed on the
//     fly.
//   - existing: the cluster E2E_KUBECONFIG points at; it is not deleted.
//
// The kwok and kind clusters are named E2E_CLUSTER_NAME (default
// reconcilekit-e2e, distinct from hack/cluster.sh's own default, so a
// development cluster is never touched) and are deleted when the suite ends,
// also when setup failed or the run was interrupted with SIGINT/SIGTERM.
// A process killed outright (go test -timeout, SIGKILL) cannot clean up; the
// next run starts by deleting the stale cluster, or run
// `CLUSTER_NAME=reconcilekit-e2e hack/cluster.sh down`.
//
// With E2E_AUDIT=1 (the default for E2E_CHAOS=long, `make chaos`) the kwok
// cluster's API server keeps an audit log by testdata/chaos-audit-policy.yaml
// (hack/cluster.sh CLUSTER_AUDIT_POLICY), from which the chaos suite's
// sharding scenarios judge the replicas (chaos_audit.go); without it they
// say they did not. E2E_AUDIT=0 turns it off.
//
// # The operator under test
//
// After the cluster, TestMain sets up the WebApp example operator
// (examples/webapp) as a [Stage], and the features exercise it: the CRD's
// documentation and columns, admission (schema, webhooks, defaults,
// warnings), a WebApp's life (rollout, scale subresource, self-healing,
// deletion with its garbage, namespace deletion), its database dependency,
// least privilege, Pod Security "restricted", leader election fail-over and
// a restart. E2E_OPERATOR picks how the operator runs:
//
//   - process (default for kwok and existing): as `make demo` does.
//     `go build` builds it once; `kubectl apply --server-side -k
//     examples/webapp/config/local` installs the CRD, the generated RBAC and
//     webhook configurations that call https://127.0.0.1:9443; a
//     TokenRequest mints a token for the ServiceAccount
//     webapp-system/webapp-controller-manager, and the operator runs as a
//     host process with a kubeconfig holding only the server, its CA and
//     that token (never the suite's admin credentials), every port on
//     127.0.0.1. Features start more instances (other ports, webhooks off),
//     stop, restart and SIGKILL them, and put the primary back afterwards.
//     Each instance logs to its own file,
//     .cluster/<cluster name>-operator/webapp-operator-<instance>.log (tail
//     it while the suite runs); the logs are copied to <artifacts>/operator
//     when something failed, and the directory is removed at the end. Port 9443 must be free: stop
//     a `make demo` operator first (`make cluster-down`), or set
//     E2E_WEBHOOK_PORT to another free port (the suite rewrites the
//     installed webhook URLs), which also lets two suites run at once.
//   - deployment (default for kind): as `make deploy` does, the image in
//     the cluster. The features that control operator processes (leader
//     election, restart) skip; TestKindOperatorFailover deletes the leader's
//     pod instead.
//
// On E2E_PROVIDER=existing what the stage installed stays installed, like
// the cluster (`kubectl delete -k examples/webapp/config/local`, or `make
// undeploy`, removes it).
//
// # Running on kind
//
// Here, with nothing but Go (the engine, node image and images are built
// offline, cached, and stopped again afterwards):
//
//	make test-kind
//
// On a laptop with Docker and kind installed:
//
//	cd e2e && KIND_BINARY=$(command -v kind) E2E_PROVIDER=kind go test -tags e2e ./... -v -timeout 30m
//
// The suite then does what a developer would: the web image its WebApps and
// Jobs run, under every name they use,
//
//	docker build -t reconcilekit/web:dev -t registry.example.com/web:v1.0.0 ... hack/web
//	kind load docker-image reconcilekit/web:dev --name reconcilekit-e2e         # and each other name
//
// and the operator stage
//
//	make docker-build                                   # reconcilekit/webapp-operator:dev
//	kind load docker-image reconcilekit/webapp-operator:dev --name reconcilekit-e2e
//	make deploy                                         # kubectl apply --server-side -k examples/webapp/config/default
//
// and waits for the rollout and for the webhooks to admit. DOCKER_BUILD_FLAGS
// adds flags to both builds (`make test-kind-docker` runs this path on the
// private engine, with "--network host": it has no default bridge). Set
// E2E_OPERATOR_IMAGE to an image that already exists to skip the build; it
// is loaded and deployed instead, through a kustomization under
// .cluster/e2e-deploy that only replaces the image. The apiserver reaches
// the webhooks through their Service, with the certificate the operator
// issues for it.
//
// # What only a real node shows
//
// kind_test.go runs only on E2E_PROVIDER=kind with the operator deployed
// (E2E_OPERATOR=deployment) and skips elsewhere: on kwok no container runs.
// The host still talks only to the apiserver; requests inside the cluster
// come from Jobs running the web image (hack/web, built by
// hack/image.sh) as a client, `web -get URL`, which retries until its
// -deadline and exits 0 only on the expected status (and certificate
// fingerprint, with -cert-sha256). The features:
//
//   - TestKindPodsRunAndServiceRoutes: a WebApp's pods run the image
//     (Running, containers started by the runtime, Ready, no restarts) and a
//     Job gets 200 from http://<webapp>.<namespace>.svc/, answered by one of
//     its pods (the server replies with its pod's name).
//   - TestKindOperatorFailover: config/default's two replicas run with
//     --leader-elect; the leader's pod is deleted, the Lease moves to another
//     pod, a WebApp created afterwards becomes Ready, the Deployment is back
//     to two Ready pods.
//   - TestKindWebhookCertificateReissued: the webhook Secret is deleted; the
//     leader re-issues the certificate under a new CA that both caBundles
//     trust, the webhook Service serves it (by SHA-256, from a Job), and
//     server-side dry-run creates of WebApps every 100ms never fail meanwhile.
//   - TestKindSecureMetrics: config/prometheus' metrics Service; a
//     ServiceAccount bound to webapp-metrics-reader scrapes reconcilekit_
//     metrics (200), one that is not gets 403.
//
// kind_helm_test.go's TestKindHelmInstall installs charts/webapp-operator
// with the helm binary of TOOLS_BIN (the suite's operator paused, as
// TestKindBundleInstall pauses it, by pauseSuiteOperator): the operator
// rolls out and admits, the sample WebApp is Ready with its pods Running,
// `helm upgrade` to the next chart version rolls the operator without
// restarting the WebApp's pods, and `helm uninstall` leaves nothing of the
// release but the CRD.
//
// Namespace deletion with a WebApp in it is TestWebAppLifecycle's, which on
// kind deletes real pods.
//
// # Timing
//
// On the kwok cluster the whole suite takes about two minutes on two cores:
// the node makes pods Ready at once, so waits end within a second or two.
// The exceptions are real controller-manager behaviour: a WebApp deleted
// within 30s of the CRD's installation is garbage-collected at the garbage
// collector's next discovery sync, a namespace deletion takes the namespace
// controller's retries, and a SIGKILLed leader is replaced once its Lease
// (15s) expires. Every wait has a deadline and none asserts a duration.
// E2E_TRACE=1 logs each state a wait goes through, with its time.
//
// # Artifacts
//
// When a test or the setup failed, [Harness] writes to E2E_ARTIFACTS (default
// <repo>/.artifacts/e2e/<UTC time>-<cluster name>): `kubectl cluster-info
// dump` output (cluster-info/), every listable object but Secrets
// (resources.yaml), the provider's component logs (logs/), the operator's
// logs (operator/), and for each failed feature the objects of its namespace
// (namespaces/<name>.yaml), taken before it is deleted. E2E_KEEP_ARTIFACTS=1
// exports the same after a passing run too (but for the namespaces, which a
// passing feature deletes), to read the logs of a run that passed: a chaos
// measurement's kube-controller-manager, kube-scheduler, kwok and operator
// logs, say.
//
// # Writing features
//
// main_test.go builds the environment in TestMain and keeps it in the package
// variables testenv, harness and operator (the WebApp operator; its types
// are in klient's scheme). A feature gets a fresh namespace, created
// before it and deleted after it; read it with [Namespace]. Talk to the
// cluster with cfg.Client() (e2e-framework's klient) or, for manifests and
// debugging, with harness.Kubectl or harness.MustKubectl ([Harness.Kubectl]),
// which run the pinned kubectl against the suite's kubeconfig only. Wait with
// wait.For from klient/wait (or the eventually helper, which reports the last
// state it saw) and a deadline, never with sleeps. A feature that stops,
// kills or outvotes the primary operator calls operator.restorePrimary in its
// Teardown, so the next feature finds it leading and admitting:
//
//	func TestMyOperator(t *testing.T) {
//		f := features.New("my operator").
//			Assess("reconciles", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
//				ns := Namespace(ctx, t)
//				harness.MustKubectl(ctx, t, "apply", "-n", ns, "-f", "testdata/webapp.yaml")
//				// wait.For(conditions.New(cfg.Client().Resources()).ResourceMatch(...), wait.WithTimeout(time.Minute))
//				return ctx
//			}).
//			Feature()
//		testenv.Test(t, f)
//	}
package e2e
