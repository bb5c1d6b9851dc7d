//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// bundleNamespace is where the bundle's operator is installed: the
// namespace of the OperatorGroup a user creates for it (AllNamespaces, the
// only install mode the CSV supports; docs/deploying.md).
const bundleNamespace = "webapp-operator-bundle"

// bundleOperatorName names the bundle's operator process (its log file,
// and so its field manager webapp-operator-bundle).
const bundleOperatorName = "bundle"

// TestBundleInstall installs examples/webapp/bundle the way OLM would and
// runs the operator from it: the CRDs, the ServiceAccount, Roles and
// ClusterRoles with their bindings from the install strategy's
// (cluster)permissions, the bundle's other manifests, the webhook
// configurations and CRD conversion from the CSV's webhookdefinitions with
// a CA and serving certificate the test issues as OLM does, and then the
// operator with exactly the CSV deployment's container args and env,
// authenticated as the bundle's ServiceAccount, in its own namespace. Every
// alm-examples object (what OperatorHub users create) becomes Ready with
// its Deployment rolled out onto kwok's simulated node; then everything is
// uninstalled and nothing is left.
//
// On a kwok cluster of its own (<suite cluster>-bundle, ~10 s to create and
// delete): the suite's primary operator reconciles every WebApp in its
// cluster and owns the webhook configurations for the same CRD, so the two
// would fight over the same objects.
//
// Deviations from OLM, all forced by kwok (pods never run, pod and Service
// IPs are unreachable), so the operator runs as a host process built from
// the same source as the image:
//   - the webhook clientConfigs are https://127.0.0.1:<port><path> URLs
//     instead of the Service OLM creates (which is therefore not created),
//     and the serving certificate carries the IP 127.0.0.1 besides OLM's
//     <service>.<namespace>(.svc) names;
//   - bind addresses and ports are on 127.0.0.1 and free ports, the
//     certificate directory is where the test wrote OLM's certificate
//     (OLM mounts it at the CSV's --webhook-cert-dir), and --kubeconfig
//     carries the ServiceAccount token a pod gets mounted (hostArgs);
//   - one process, not the Deployment's replicas (leader election is on,
//     as the CSV says).
//
// OLM's own extras are left out on purpose: the system:auth-delegator and
// extension-apiserver-authentication-reader bindings it adds for webhook
// Deployments, so the operator proves it needs only the bundle's RBAC.
func TestBundleInstall(t *testing.T) {
	if harness.opts.Provider != ProviderKwok || operator.mode != modeProcess {
		t.Skipf("needs the kwok provider with host-process operators (here %s, %s)", harness.opts.Provider, operator.mode)
	}
	bi := &bundleInstall{namespace: bundleNamespace}
	step := bi.step
	f := features.New("OLM bundle: installed from examples/webapp/bundle as OLM would, on a kwok cluster of its own").
		WithLabel("area", "bundle").
		Setup(step(bi.setup)).
		Assess("the CRDs, the install strategy's RBAC and the other manifests are accepted", step(bi.installManifests)).
		Assess("the operator runs with the CSV's args and env as the bundle's ServiceAccount and leads", step(bi.startOperator)).
		Assess("the webhookdefinitions become webhook configurations (and CRD conversion) that call the operator", step(bi.installWebhooks)).
		Assess("every alm-examples object becomes Ready, its Deployment rolled out on the simulated node", step(bi.examplesReady)).
		Assess("uninstall: the examples are finalized, then nothing of the bundle is left", step(bi.uninstall)).
		Feature()
	testenv.Test(t, f)
}

// bundleInstall is the state of TestBundleInstall and
// TestKindBundleInstall, step to step.
type bundleInstall struct {
	featureSteps
	namespace string
	// onKind: the operator runs as the CSV's Deployment (TestKindBundleInstall),
	// not as a host process (proc).
	onKind bool
	// featureT is the feature's t (Setup's): cleanups registered on it run
	// when the feature ends, in reverse order.
	featureT *testing.T

	bundle   *olmBundle
	cluster  *localCluster
	admin    *rest.Config
	c        client.Client // admin, on the bundle's cluster
	workDir  string
	cert     *olmCertificate
	proc     *operatorProcess
	applied  []client.Object // what the install created, in order
	examples []*unstructured.Unstructured
}

// setup loads the bundle and creates the bundle's kwok cluster.
func (bi *bundleInstall) setup(ctx context.Context, t *testing.T) {
	bi.featureT = t
	bi.loadBundle(t)
	var err error
	bi.workDir = filepath.Join(harness.opts.RepoRoot, ".cluster", harness.opts.ClusterName+"-bundle-operator")
	if err := os.RemoveAll(bi.workDir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(bi.workDir, 0o700); err != nil {
		t.Fatal(err)
	}

	// The bundle's cluster needs no metrics-server (localCluster starts
	// one unless told otherwise): a few seconds and some 70 MB less.
	t.Setenv("KWOK_METRICS_SERVER", "0")
	bi.cluster = newLocalCluster(filepath.Join(harness.opts.RepoRoot, "hack", "cluster.sh"), harness.opts.ToolsBin)
	bi.cluster.WithName(harness.opts.ClusterName + "-bundle")
	start := time.Now()
	// Registered first, so it runs last: after the operator has stopped.
	t.Cleanup(func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if t.Failed() {
			if err := bi.cluster.ExportLogs(ctx, filepath.Join(harness.ArtifactsDir(), "bundle-cluster")); err != nil {
				t.Logf("exporting the bundle cluster's logs: %v", err)
			}
		}
		if err := bi.cluster.Destroy(ctx); err != nil {
			t.Errorf("deleting the bundle's cluster: %v", err)
		}
		t.Logf("bundle cluster %s deleted in %v", bi.cluster.name, time.Since(start).Round(100*time.Millisecond))
		if !t.Failed() {
			_ = os.RemoveAll(bi.workDir)
		}
	})
	if _, err := bi.cluster.Create(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("bundle cluster %s created in %v", bi.cluster.name, time.Since(start).Round(100*time.Millisecond))
	bi.admin = bi.cluster.KubernetesRestConfig()
	if bi.c, err = client.New(bi.admin, client.Options{Scheme: scheme.Scheme}); err != nil {
		t.Fatal(err)
	}
}

// loadBundle reads examples/webapp/bundle, or the bundle E2E_BUNDLE_DIR
// names.
func (bi *bundleInstall) loadBundle(t *testing.T) {
	t.Helper()
	bundleDir := filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "bundle")
	if dir := os.Getenv("E2E_BUNDLE_DIR"); dir != "" {
		bundleDir = dir
	}
	var err error
	if bi.bundle, err = loadBundle(bundleDir); err != nil {
		t.Fatal(err)
	}
	t.Logf("bundle %s: CSV %s, %d CRDs, %d other manifests, %d webhookdefinitions",
		bundleDir, bi.bundle.csv.Name, len(bi.bundle.crds), len(bi.bundle.others), len(bi.bundle.csv.Spec.WebhookDefinitions))
}

// operatorLogs is the bundle operator's log so far (host process only).
func (bi *bundleInstall) operatorLogs() string {
	if bi.proc == nil {
		return ""
	}
	logs, _ := bi.proc.logs()
	return logs
}

// apply server-side applies o as OLM's emulation and remembers it for the
// uninstall.
func (bi *bundleInstall) apply(ctx context.Context, t *testing.T, o client.Object) {
	t.Helper()
	o.SetManagedFields(nil)
	if err := bi.c.Patch(ctx, o, client.Apply, client.FieldOwner(olmFieldOwner), client.ForceOwnership); err != nil { //nolint:staticcheck // SSA of typed and unstructured objects alike
		t.Fatalf("%s %s is not accepted: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
	bi.applied = append(bi.applied, o)
}

func (bi *bundleInstall) installManifests(ctx context.Context, t *testing.T) {
	b := bi.bundle
	// The catalog operator creates the CRDs before the CSV is installed.
	for _, crd := range b.crds {
		bi.apply(ctx, t, crd.DeepCopy())
	}
	for _, crd := range b.crds {
		eventually(ctx, t, time.Minute, "CRD "+crd.GetName()+" Established", func(ctx context.Context) (bool, string, error) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(crdGVK)
			if err := bi.c.Get(ctx, client.ObjectKey{Name: crd.GetName()}, u); err != nil {
				return false, "", err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, "Established", nil
				}
			}
			return false, fmt.Sprint(conds), nil
		})
	}
	ns := &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: bi.namespace}}
	bi.apply(ctx, t, ns)
	for _, o := range b.rbac(bi.namespace) {
		bi.apply(ctx, t, o)
	}
	others, err := b.otherManifests(bi.namespace, func(u *unstructured.Unstructured) (bool, error) { return bi.c.IsObjectNamespaced(u) })
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range others {
		bi.apply(ctx, t, o)
	}
}

func (bi *bundleInstall) startOperator(ctx context.Context, t *testing.T) {
	b := bi.bundle
	ds, err := b.deployment()
	if err != nil {
		t.Fatal(err)
	}
	container, err := managerContainer(ds)
	if err != nil {
		t.Fatal(err)
	}
	// OLM's certificate, for the Service it would create.
	service := ds.Name + "-service"
	hosts := []string{service + "." + bi.namespace, service + "." + bi.namespace + ".svc"}
	if bi.cert, err = newOLMCertificate(hosts, []net.IP{net.IPv4(127, 0, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(bi.workDir, "serving-certs")
	if err := bi.cert.writeTo(certDir); err != nil {
		t.Fatal(err)
	}

	sa := serviceAccountOf(ds)
	kubeconfig := filepath.Join(bi.workDir, "operator.kubeconfig")
	if _, err := serviceAccountKubeconfig(ctx, bi.admin, bi.namespace, sa, kubeconfig); err != nil {
		t.Fatal(err)
	}
	h := hostProcess{certDir: certDir, kubeconfig: kubeconfig}
	for _, p := range []*int{&h.webhookPort, &h.probePort, &h.metricsPort} {
		if *p, err = freePort(); err != nil {
			t.Fatal(err)
		}
	}
	args, changes, err := hostArgs(container.Args, h)
	if err != nil {
		t.Fatal(err)
	}
	env, err := hostEnv(container, bi.namespace, ds.Name+"-host")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("CSV container %s: command %v args %v env %d entries; as a host process: %v (changed for loopback: %v), env %v",
		container.Name, container.Command, container.Args, len(container.Env), args, changes, env)
	// The image's command is the operator binary (examples/webapp/Dockerfile:
	// ENTRYPOINT /webapp-operator); the suite built the same source.
	if len(container.Command) > 1 {
		t.Fatalf("container command %v: only the binary itself is supported", container.Command)
	}
	bi.proc = &operatorProcess{
		name: bundleOperatorName, binary: operator.binary, kubeconfig: kubeconfig, namespace: bi.namespace,
		argv: args, env: env,
		webhookPort: h.webhookPort, probePort: h.probePort, metricsPort: h.metricsPort,
		logPath: filepath.Join(bi.workDir, "webapp-operator-"+bundleOperatorName+".log"),
	}
	// On the feature's t (each assessment has its own): the operator runs
	// until the feature ends.
	ft := bi.featureT
	ft.Cleanup(func() {
		if err := bi.proc.stop(); err != nil {
			ft.Error(err)
		}
		if ft.Failed() {
			dir := filepath.Join(harness.ArtifactsDir(), "operator")
			if data, err := os.ReadFile(bi.proc.logPath); err == nil && os.MkdirAll(dir, 0o755) == nil {
				_ = os.WriteFile(filepath.Join(dir, filepath.Base(bi.proc.logPath)), data, 0o644)
				ft.Logf("the bundle operator's log is in %s", dir)
			}
		}
	})
	if err := bi.proc.start(ctx); err != nil {
		t.Fatal(err)
	}
	logs, _ := bi.proc.logs()
	// The manager logs its namespace: POD_NAMESPACE, from the CSV's
	// Downward API env.
	if !strings.Contains(logs, `"namespace":"`+bi.namespace+`"`) {
		t.Errorf("the operator does not run in %s (POD_NAMESPACE from the CSV's env); log:\n%s", bi.namespace, tail(bi.proc.logPath, 20))
	}
	eventually(ctx, t, time.Minute, "the bundle's operator leads (Lease in "+bi.namespace+")", func(ctx context.Context) (bool, string, error) {
		var l coordinationv1.Lease
		if err := bi.c.Get(ctx, client.ObjectKey{Namespace: bi.namespace, Name: leaseName}, &l); err != nil {
			return false, "", err
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		logs, _ := bi.proc.logs()
		return holder != "" && strings.Contains(logs, controllersStarted), "Lease holder " + holder + lastForbidden(logs), nil
	})
}

func (bi *bundleInstall) installWebhooks(ctx context.Context, t *testing.T) {
	// OLM points every webhook at its Service; kwok cannot route to a pod,
	// so the apiserver calls the host process directly.
	endpoint := func(d v1alpha1.WebhookDescription) *string {
		path := "/"
		if d.WebhookPath != nil {
			path = *d.WebhookPath
		}
		u := fmt.Sprintf("https://127.0.0.1:%d%s", bi.proc.webhookPort, path)
		return &u
	}
	bi.wireWebhooks(ctx, t, endpoint)
}

// wireWebhooks installs the webhook configurations and the CRDs'
// conversion from the bundle's webhookdefinitions, calling endpoint (nil:
// OLM's Service), and checks that admission goes through them.
func (bi *bundleInstall) wireWebhooks(ctx context.Context, t *testing.T, endpoint webhookEndpoint) {
	configs, err := bi.bundle.webhookConfigurations(bi.namespace, bi.cert.caPEM, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range configs {
		bi.apply(ctx, t, o)
	}
	converted, err := bi.bundle.setConversion(ctx, bi.c, bi.namespace, bi.cert.caPEM, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d webhook configurations; conversion webhook on %v", len(configs), converted)
	bi.checkAdmission(ctx, t)
}

// checkAdmission: admission goes through the bundle's webhooks.
func (bi *bundleInstall) checkAdmission(ctx context.Context, t *testing.T) {
	b := bi.bundle
	// Admission goes through the bundle's webhooks: the mutating one
	// defaults an empty WebApp (a server-side dry run; the schema has no
	// defaults for these fields), the validating one rejects what only it
	// checks, naming itself.
	ns := "default"
	eventually(ctx, t, time.Minute, "the mutating webhook defaults a WebApp", func(ctx context.Context) (bool, string, error) {
		u := webAppObject(ns, "webhook-probe", map[string]any{"image": "registry.example.com/probe:v1"})
		if err := bi.c.Create(ctx, u, client.DryRunAll); err != nil {
			return false, "", err
		}
		cpu, _, _ := unstructured.NestedString(u.Object, "spec", "resources", "cpu")
		replicas, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		return cpu != "" && replicas == 1, fmt.Sprintf("spec %v", u.Object["spec"]), nil
	})
	var validating []string
	for _, d := range b.csv.Spec.WebhookDefinitions {
		if d.Type == v1alpha1.ValidatingAdmissionWebhook {
			validating = append(validating, d.GenerateName)
		}
	}
	if len(validating) > 0 {
		u := webAppObject(ns, "too-small", map[string]any{"image": "registry.example.com/probe:v1", "resources": map[string]any{"memory": "1Mi"}})
		err := bi.c.Create(ctx, u, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied the request", validating[0])) {
			t.Errorf("a WebApp with 1Mi of memory: %v, want the validating webhook %s to deny it", err, validating[0])
		}
	}
}

// webAppObject is an unstructured WebApp of the bundle's first owned
// version, as a user would write it.
func webAppObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("apps.example.com/v1")
	u.SetKind("WebApp")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func (bi *bundleInstall) examplesReady(ctx context.Context, t *testing.T) {
	var examples []map[string]any
	if err := json.Unmarshal([]byte(bi.bundle.csv.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	if len(examples) == 0 {
		t.Fatal("the CSV has no alm-examples")
	}
	for i, e := range examples {
		u := &unstructured.Unstructured{Object: e}
		// Each in a namespace of its own, as a user would create it.
		ns := fmt.Sprintf("bundle-example-%d", i)
		if err := bi.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		u.SetNamespace(ns)
		if err := bi.c.Create(ctx, u); err != nil {
			t.Fatalf("alm-examples[%d] %s %s: %v", i, u.GetKind(), u.GetName(), err)
		}
		bi.examples = append(bi.examples, u)
	}
	for _, u := range bi.examples {
		what := fmt.Sprintf("%s %s/%s (%s)", u.GetKind(), u.GetNamespace(), u.GetName(), u.GetAPIVersion())
		want, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found {
			want = 1 // the webhook's default
		}
		var got *unstructured.Unstructured
		eventually(ctx, t, convergeTimeout, what+" Ready and Available", func(ctx context.Context) (bool, string, error) {
			got = &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			if err := bi.c.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
				return false, "", err
			}
			var w struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
				Status   struct {
					ObservedGeneration int64              `json:"observedGeneration"`
					Conditions         []metav1.Condition `json:"conditions"`
				} `json:"status"`
			}
			data, _ := json.Marshal(got.Object)
			if err := json.Unmarshal(data, &w); err != nil {
				return false, "", err
			}
			ok := w.Status.ObservedGeneration == w.Metadata.Generation &&
				meta.IsStatusConditionTrue(w.Status.Conditions, conditionReady) &&
				meta.IsStatusConditionTrue(w.Status.Conditions, "Available")
			return ok, fmt.Sprintf("generation %d observed %d conditions %v%s", w.Metadata.Generation, w.Status.ObservedGeneration, w.Status.Conditions, lastForbidden(bi.operatorLogs())), nil
		})
		// The status is the bundle operator's writing: its process name
		// is its field manager (on kind, the image's /webapp-operator;
		// the suite's operator is scaled to zero meanwhile).
		manager := "webapp-operator-" + bundleOperatorName + "/status"
		if bi.onKind {
			manager = "webapp-operator/status"
		}
		if ms := managers(got); !slices.Contains(ms, manager) {
			t.Errorf("%s: status managers %v, want %s", what, ms, manager)
		}
		var d appsv1.Deployment
		eventually(ctx, t, convergeTimeout, fmt.Sprintf("%s: Deployment rolled out with %d replicas", what, want), func(ctx context.Context) (bool, string, error) {
			if err := bi.c.Get(ctx, client.ObjectKeyFromObject(u), &d); err != nil {
				return false, "", err
			}
			return deploymentRolledOut(&d, int32(want)), describeDeployment(&d), nil
		})
		if ref := metav1.GetControllerOf(&d); ref == nil || ref.UID != got.GetUID() {
			t.Errorf("%s: Deployment's controller %+v, want the example (uid %s)", what, ref, got.GetUID())
		}
		var pods corev1.PodList
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		if err := bi.c.List(ctx, &pods, client.InNamespace(u.GetNamespace()), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, p := range pods.Items {
			if bi.onKind {
				// Really running the web image, on the kind node.
				requirePodRunning(t, &p, d.Spec.Template.Spec.Containers[0].Image)
			} else {
				var node corev1.Node
				if err := bi.c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
					t.Errorf("pod %s: node %q: %v", p.Name, p.Spec.NodeName, err)
					continue
				}
				if _, kwok := node.Annotations["kwok.x-k8s.io/node"]; !kwok {
					t.Errorf("pod %s runs on %s, not a kwok node", p.Name, node.Name)
				}
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready != int(want) {
			t.Errorf("%s: %d Ready pods on kwok nodes, want %d", what, ready, want)
		}
		// Every served version reads the example back (through the
		// conversion webhook, when the CRD has one).
		for _, v := range servedVersions(bi.bundle, u.GroupVersionKind().GroupKind()) {
			o := &unstructured.Unstructured{}
			o.SetGroupVersionKind(u.GroupVersionKind().GroupKind().WithVersion(v))
			if err := bi.c.Get(ctx, client.ObjectKeyFromObject(u), o); err != nil {
				t.Errorf("%s read as %s: %v", what, v, err)
			}
		}
	}
}

// servedVersions lists the versions the bundle's CRD for gk serves.
func servedVersions(b *olmBundle, gk schema.GroupKind) []string {
	var out []string
	for _, crd := range b.crds {
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		if group != gk.Group || kind != gk.Kind {
			continue
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			if m, ok := v.(map[string]any); ok && m["served"] == true {
				out = append(out, fmt.Sprint(m["name"]))
			}
		}
	}
	return out
}

// uninstall does what deleting the Subscription and CSV does (OLM garbage
// collects everything it created for the CSV), after the user deleted
// their WebApps, and then what docs/deploying.md says to remove the CRDs.
func (bi *bundleInstall) uninstall(ctx context.Context, t *testing.T) {
	// The examples first, while the operator runs: it removes its
	// finalizer, then the garbage collector removes the Deployments.
	for _, u := range bi.examples {
		if err := bi.c.Delete(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range bi.examples {
		eventually(ctx, t, convergeTimeout, fmt.Sprintf("%s %s/%s deleted (finalized by the bundle's operator)", u.GetKind(), u.GetNamespace(), u.GetName()), func(ctx context.Context) (bool, string, error) {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			err := bi.c.Get(ctx, client.ObjectKeyFromObject(u), got)
			if apierrors.IsNotFound(err) {
				return true, "gone", nil
			}
			return false, fmt.Sprintf("finalizers %v", got.GetFinalizers()), err
		})
	}
	if bi.proc != nil {
		if err := bi.proc.stop(); err != nil {
			t.Fatal(err)
		}
	}
	for i := len(bi.applied) - 1; i >= 0; i-- {
		o := bi.applied[i]
		if err := bi.c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s: %v", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	owned := labels.SelectorFromSet(bi.bundle.ownerLabels(bi.namespace))
	eventually(ctx, t, convergeTimeout, "nothing of the bundle is left", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, o := range bi.applied {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
			err := bi.c.Get(ctx, client.ObjectKeyFromObject(o), u)
			if err == nil {
				left = append(left, u.GetKind()+" "+u.GetName())
			} else if !apierrors.IsNotFound(err) {
				return false, "", err
			}
		}
		// And nothing else carries OLM's owner labels for the CSV.
		for _, gvk := range []schema.GroupVersionKind{
			{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfigurationList"},
			{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfigurationList"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleList"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBindingList"},
		} {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk)
			if err := bi.c.List(ctx, l, client.MatchingLabelsSelector{Selector: owned}); err != nil {
				return false, "", err
			}
			for _, i := range l.Items {
				left = append(left, i.GetKind()+" "+i.GetName())
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left), nil
	})
}

// lastForbidden quotes the last log line that reports a Forbidden answer:
// the likeliest reason an operator with the bundle's RBAC does not start.
func lastForbidden(logs string) string {
	lines := strings.Split(strings.TrimSpace(logs), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], "forbidden") {
			return "; last Forbidden in its log: " + lines[i]
		}
	}
	return ""
}

// TestKindBundleInstall is TestBundleInstall for real (`make test-kind`):
// the CSV's Deployment runs as a Deployment, its pods started by
// containerd on the kind node, with what OLM adds to it: the Service
// <deployment>-service (443 to the webhook port), the Secret
// <service>-cert with a serving certificate for that Service, mounted where
// OLM mounts it (the CSV's --webhook-cert-dir; --webhook-cert-mode=external,
// so the operator serves OLM's certificate and its own Rotator stays off),
// and the webhook configurations and CRD conversion pointing at that
// Service with the CA in caBundle. Every alm-examples object becomes Ready
// with its pods Running the web image, and the uninstall leaves nothing.
//
// The one deviation: the image is the one the suite built from this
// checkout and loaded into kind (E2E_OPERATOR_IMAGE, default
// reconcilekit/webapp-operator:dev), not the CSV's, which no registry
// serves here.
//
// It shares the suite's cluster, whose operator (config/default) would
// reconcile the same WebApps and, with its Rotator, rewrite the CRD's
// conversion caBundle: the feature scales it to zero and removes its
// webhook configurations first, and restores both afterwards (re-applying
// config/default, which also brings back the CRD and metrics-reader role
// the uninstall removed), also after a failure.
func TestKindBundleInstall(t *testing.T) {
	requireKind(t)
	bi := &bundleInstall{namespace: bundleNamespace, onKind: true}
	step := bi.step
	f := features.New("kind: the OLM bundle's Deployment, with OLM's Service, certificate and webhooks").
		WithLabel("area", "kind").
		Setup(step(bi.kindSetup)).
		Assess("the CRDs, the install strategy's RBAC and the other manifests are accepted", step(bi.installManifests)).
		Assess("the CSV's Deployment rolls out with OLM's certificate; webhooks through OLM's Service admit", step(bi.deployOnKind)).
		Assess("every alm-examples object becomes Ready with its pods Running", step(bi.examplesReady)).
		Assess("uninstall: the examples are finalized, then nothing of the bundle is left", step(bi.uninstall)).
		Feature()
	testenv.Test(t, f)
}

// kindSetup loads the bundle and pauses the suite's operator
// (pauseSuiteOperator), which is back when the feature ends.
func (bi *bundleInstall) kindSetup(ctx context.Context, t *testing.T) {
	bi.featureT = t
	bi.loadBundle(t)
	bi.admin = bi.cfg.Client().RESTConfig()
	var err error
	if bi.c, err = client.New(bi.admin, client.Options{Scheme: scheme.Scheme}); err != nil {
		t.Fatal(err)
	}
	pauseSuiteOperator(ctx, t, bi.cfg)
}

// deployOnKind creates what OLM creates for the CSV's Deployment and its
// webhooks, and waits for the rollout.
func (bi *bundleInstall) deployOnKind(ctx context.Context, t *testing.T) {
	b := bi.bundle
	ds, err := b.deployment()
	if err != nil {
		t.Fatal(err)
	}
	container, err := managerContainer(ds)
	if err != nil {
		t.Fatal(err)
	}
	service := ds.Name + "-service"
	if bi.cert, err = newOLMCertificate([]string{service + "." + bi.namespace, service + "." + bi.namespace + ".svc"}, nil); err != nil {
		t.Fatal(err)
	}
	for _, o := range b.olmDeployment(ds, bi.namespace, bi.cert) {
		if d, ok := o.(*appsv1.Deployment); ok {
			for i := range d.Spec.Template.Spec.Containers {
				if c := &d.Spec.Template.Spec.Containers[i]; c.Name == container.Name {
					t.Logf("container %s: image %s instead of the CSV's %s (kind cannot pull it); args %v", c.Name, operator.image, c.Image, c.Args)
					c.Image = operator.image
				}
			}
		}
		bi.apply(ctx, t, o)
	}
	var d appsv1.Deployment
	eventually(ctx, t, 3*time.Minute, "the CSV's Deployment rolled out", func(ctx context.Context) (bool, string, error) {
		if err := bi.c.Get(ctx, client.ObjectKey{Namespace: bi.namespace, Name: ds.Name}, &d); err != nil {
			return false, "", err
		}
		want := int32(1)
		if ds.Spec.Replicas != nil {
			want = *ds.Spec.Replicas
		}
		return deploymentRolledOut(&d, want), describeDeployment(&d), nil
	})
	pods := listPods(ctx, t, bi.cfg, bi.namespace, labels.SelectorFromSet(ds.Spec.Selector.MatchLabels).String())
	for _, p := range pods {
		requirePodRunning(t, &p, operator.image)
	}
	eventually(ctx, t, time.Minute, "one of the CSV Deployment's pods leads (Lease in "+bi.namespace+")", func(ctx context.Context) (bool, string, error) {
		var l coordinationv1.Lease
		if err := bi.c.Get(ctx, client.ObjectKey{Namespace: bi.namespace, Name: leaseName}, &l); err != nil {
			return false, "", err
		}
		holder := ptrString(l.Spec.HolderIdentity)
		return slices.ContainsFunc(pods, func(p corev1.Pod) bool { return holdsLease(holder, p.Name) }), "holder " + holder, nil
	})

	// OLM's own: every webhook through the Service, with its CA.
	bi.wireWebhooks(ctx, t, func(v1alpha1.WebhookDescription) *string { return nil })
}
