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
// Every file carries the build tag e2e, so `go test ./...` never compiles it.
// Run it with `make test-e2e`, or directly:
//
//	TOOLS_BIN=$(hack/tools.sh | tail -n1) go test -tags e2e ./e2e/... -v -timeout 20m
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
//   - kind: a kind cluster, for hosts with a container engine. The kind binary
//     comes from KIND_BINARY or PATH; it is never installed on the fly.
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
// # Artifacts
//
// When a test or the setup failed, [Harness] writes to E2E_ARTIFACTS (default
// <repo>/.artifacts/e2e/<UTC time>): `kubectl cluster-info dump` output
// (cluster-info/), every listable object but Secrets (resources.yaml), the
// provider's component logs (logs/), and for each failed feature the objects
// of its namespace (namespaces/<name>.yaml), taken before it is deleted.
//
// # Writing features
//
// main_test.go builds the environment in TestMain and keeps it in the package
// variables testenv and harness. A feature gets a fresh namespace, created
// before it and deleted after it; read it with [Namespace]. Talk to the
// cluster with cfg.Client() (e2e-framework's klient) or, for manifests and
// debugging, with harness.Kubectl or harness.MustKubectl ([Harness.Kubectl]),
// which run the pinned kubectl against the suite's kubeconfig only. Wait with wait.For from klient/wait and a deadline,
// never with sleeps:
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
