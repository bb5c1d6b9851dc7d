//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// The Helm release TestKindHelmInstall installs. Its name is the chart's
// name prefix ("helm-e2e-"), so every object of the chart but the CRD
// (ClusterRoles and their bindings, webhook configurations, the
// namespaced ones) has a name of its own, never the suite's "webapp-"
// ones; the chart passes the names to the operator by flags.
const (
	helmRelease   = "helm-e2e"
	helmNamespace = "webapp-helm-e2e"
	helmPrefix    = helmRelease + "-"
	helmChartDir  = "charts/webapp-operator"
	// helmTimeout is helm's --timeout for install, upgrade and uninstall
	// with --wait.
	helmTimeout = "5m"
	// helmUpgradeAnnotation is the pod annotation the next chart version
	// adds (in its values.yaml), so that the upgrade changes the
	// operator's pod template and the operator rolls.
	helmUpgradeAnnotation = "e2e.reconcilekit.io/chart-version"
)

// Helm's ownership metadata (what `helm install` checks on an object that
// already exists, and sets on the ones it creates) and the resource policy
// the chart puts on the CRD.
const (
	helmManagedBy        = "app.kubernetes.io/managed-by"
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
	helmResourcePolicy   = "helm.sh/resource-policy"
	helmChartLabel       = "helm.sh/chart"
)

// TestKindHelmInstall installs the Helm chart (charts/webapp-operator) on
// the kind cluster with the helm binary `make tools` builds, as
// docs/deploying.md tells a user to, and proves what only a real node
// shows: `helm install --wait` rolls the operator out from the suite's
// image into a namespace of its own (Pod Security "restricted", as `make
// helm-install` creates it), a replica leads, the chart's webhooks admit
// (defaulting and denying through the chart's Service), the sample WebApp
// (config/samples' v1 one, stored as v2 through the chart's conversion
// webhook) becomes Ready with its pods Running. `helm upgrade --wait` to
// the next chart version (the chart copied, its version's patch number
// bumped and a pod annotation added to its values, so the operator's pod
// template changes) rolls the operator: the new pods lead and reconcile
// the WebApp (its Service, deleted, is recreated), which stays Ready with
// the same pods, none restarted, and the same Deployment generation. After
// the WebApp is deleted (finalized by the chart's operator), `helm
// uninstall --wait` leaves nothing of the release but the CRD, which the
// chart keeps (helm.sh/resource-policy: keep): every object `helm template`
// renders is gone, and no object in the cluster carries the release's
// label or annotation.
//
// It shares the suite's cluster, whose operator would reconcile the same
// WebApps: pauseSuiteOperator scales it to zero and removes its webhook
// configurations first, and brings it back afterwards, pass or fail.
//
// Decisions:
//   - The CRD: the only object of the chart the suite already has (every
//     other name has the release's prefix). The release adopts it as
//     docs/deploying.md says for a CRD installed otherwise (Helm's
//     managed-by label and release annotations), and installs with
//     --force-conflicts: `kubectl apply --server-side` of config/default
//     owns the CRD's conversion webhook Service, which the release points
//     at its own. Afterwards the CRD's labels and annotations are put back
//     as they were and Helm's field manager is dropped from it, then
//     config/default is re-applied (pauseSuiteOperator), taking the
//     conversion back, so later features find the suite's CRD.
//   - The operator's runtime objects: in its namespace it creates its
//     webhook certificate Secret (self-managed certificates), its
//     leader-election Lease and the route registry's ConfigMaps. They are
//     not the chart's (the operator writes them while it runs; the chart
//     does not create its namespace either), so `helm uninstall` leaves
//     them, and docs/deploying.md says to delete the namespace afterwards.
//     The test checks that they are all that is left there, none with
//     Helm's metadata, and deletes the namespace.
func TestKindHelmInstall(t *testing.T) {
	requireKind(t)
	hi := &helmInstall{}
	step := hi.step
	f := features.New("kind: the Helm chart installed, upgraded to its next version and uninstalled with helm").
		WithLabel("area", "kind").
		Setup(step(hi.setup)).
		Assess("helm install: the operator rolls out from the suite's image, leads, and the chart's webhooks admit", step(hi.install)).
		Assess("the sample WebApp becomes Ready with its pods Running", step(hi.sampleReady)).
		Assess("helm upgrade to the next chart version: the operator rolls, the WebApp stays Ready, no pod restarts", step(hi.upgrade)).
		Assess("helm uninstall: the WebApp finalized, nothing of the release is left but the CRD", step(hi.uninstall)).
		Feature()
	testenv.Test(t, f)
}

// helmInstall is TestKindHelmInstall's state, step to step.
type helmInstall struct {
	featureSteps
	c client.Client

	helm     string   // the helm binary
	helmEnv  []string // its environment: the suite's kubeconfig, state in a temp dir
	tmp      string
	values   []string // --set flags, the same for install, upgrade and template
	chart    string   // the chart the release runs: charts/webapp-operator, then the next version's copy
	version  string   // its version
	replicas int32    // the operator's, from the chart's values

	app             types.NamespacedName // the sample WebApp
	appImage        string
	appPods         map[types.UID]int32 // pod UID: restarts, before the upgrade
	appDeploy       *appsv1.Deployment  // the WebApp's Deployment before the upgrade
	operatorPodUIDs map[types.UID]bool  // the operator's pods before the upgrade
}

// setup finds helm, pauses the suite's operator, creates the release's
// namespace and lets the release adopt the CRD. Its cleanups (on the
// feature's t, last registered first run) undo all of it, pass or fail.
func (hi *helmInstall) setup(ctx context.Context, t *testing.T) {
	// First: removed after every other cleanup has run.
	hi.tmp = t.TempDir()
	hi.c = hi.cfg.Client().Resources().GetControllerRuntimeClient()
	hi.findHelm(t)

	name, tag, digest := splitImage(operator.image)
	if digest != "" {
		t.Fatalf("the chart's image values take a repository and a tag; E2E_OPERATOR_IMAGE %s has a digest", operator.image)
	}
	hi.values = []string{"--set", "image.repository=" + name, "--set-string", "image.tag=" + tag}
	hi.chart = filepath.Join(harness.opts.RepoRoot, helmChartDir)
	var err error
	if hi.version, err = chartVersion(hi.chart); err != nil {
		t.Fatal(err)
	}
	if hi.replicas, err = chartReplicas(hi.chart); err != nil {
		t.Fatal(err)
	}

	pauseSuiteOperator(ctx, t, hi.cfg)

	// The CRD's labels and annotations as the suite installed them, put
	// back after the uninstall (Helm leaves its metadata on a kept object).
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := hi.c.Get(ctx, client.ObjectKey{Name: webappCRD}, crd); err != nil {
		t.Fatal(err)
	}
	before := crd.DeepCopy()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := restoreMetadata(ctx, hi.c, before); err != nil {
			t.Errorf("restoring the CRD's labels and annotations: %v", err)
			return
		}
		now := &unstructured.Unstructured{}
		now.SetGroupVersionKind(crdGVK)
		if err := hi.c.Get(ctx, client.ObjectKey{Name: webappCRD}, now); err != nil {
			t.Errorf("the CRD after restoring its metadata: %v", err)
			return
		}
		if !maps.Equal(now.GetLabels(), before.GetLabels()) || !maps.Equal(now.GetAnnotations(), before.GetAnnotations()) {
			t.Errorf("the CRD's labels %v and annotations %v, want them back as %v and %v",
				now.GetLabels(), now.GetAnnotations(), before.GetLabels(), before.GetAnnotations())
		}
		t.Logf("the CRD's metadata is back; field managers %v", managers(now))
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		if err := hi.teardown(ctx); err != nil {
			t.Errorf("removing the release: %v", err)
		}
	})

	// As `make helm-install` creates it: the chart does not (docs/deploying.md).
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: helmNamespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted",
		namespaceLabel:                       "true",
	}}}
	if err := hi.c.Create(ctx, ns); err != nil {
		t.Fatalf("namespace %s: %v", helmNamespace, err)
	}
	// docs/deploying.md's adoption of a CRD installed otherwise.
	adopt := map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{helmManagedBy: "Helm"},
		"annotations": map[string]any{helmReleaseName: helmRelease, helmReleaseNamespace: helmNamespace},
	}}
	if err := hi.c.Patch(ctx, crd, mergePatch(t, adopt)); err != nil {
		t.Fatalf("adopting CRD %s into release %s: %v", webappCRD, helmRelease, err)
	}
	t.Logf("helm %s; chart %s %s; image %s:%s; release %s in %s", hi.helm, helmChartDir, hi.version, name, tag, helmRelease, helmNamespace)
}

// findHelm takes the helm `make tools` builds (TOOLS_BIN), else the one on
// PATH (a laptop).
func (hi *helmInstall) findHelm(t *testing.T) {
	t.Helper()
	if dir := harness.opts.ToolsBin; dir != "" {
		hi.helm = filepath.Join(dir, "helm")
		if _, err := os.Stat(hi.helm); err != nil {
			t.Fatalf("TOOLS_BIN has no helm (make tools builds it): %v", err)
		}
	} else {
		path, err := exec.LookPath("helm")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("helm: set TOOLS_BIN (bash hack/tools.sh --dir) or put helm on PATH: %v", err)
			}
			t.Skipf("helm: set TOOLS_BIN (bash hack/tools.sh --dir) or put helm on PATH: %v", err)
		}
		hi.helm = path
	}
	// Helm's own state (repositories, cache, registry logins) in the
	// test's temp dir, never the user's; the cluster is the suite's only.
	hi.helmEnv = append(os.Environ(),
		"KUBECONFIG="+harness.Kubeconfig(),
		"HELM_CACHE_HOME="+filepath.Join(hi.tmp, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(hi.tmp, "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(hi.tmp, "helm", "data"),
	)
}

// run runs helm against the suite's cluster and returns its stdout; a
// non-zero exit is an error carrying the arguments and stderr.
func (hi *helmInstall) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, hi.helm, append([]string{"--kubeconfig", harness.Kubeconfig()}, args...)...)
	cmd.Env = hi.helmEnv
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// mustRun is run for test steps: an error fails t.
func (hi *helmInstall) mustRun(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, err := hi.run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// requireRelease checks `helm list`: the release is deployed at revision
// from the chart version the test installed.
func (hi *helmInstall) requireRelease(ctx context.Context, t *testing.T, revision int) {
	t.Helper()
	var releases []struct {
		Name     string `json:"name"`
		Revision string `json:"revision"`
		Status   string `json:"status"`
		Chart    string `json:"chart"`
	}
	if err := json.Unmarshal([]byte(hi.mustRun(ctx, t, "list", "-n", helmNamespace, "-o", "json")), &releases); err != nil {
		t.Fatalf("helm list: %v", err)
	}
	want := fmt.Sprintf("%s revision %d deployed, chart webapp-operator-%s", helmRelease, revision, hi.version)
	if len(releases) != 1 {
		t.Fatalf("helm list -n %s: %+v, want %s", helmNamespace, releases, want)
	}
	r := releases[0]
	if got := fmt.Sprintf("%s revision %s %s, chart %s", r.Name, r.Revision, r.Status, r.Chart); got != want {
		t.Fatalf("helm list -n %s: %s, want %s", helmNamespace, got, want)
	}
}

func (hi *helmInstall) install(ctx context.Context, t *testing.T) {
	args := append([]string{"install", helmRelease, hi.chart, "-n", helmNamespace,
		// The adopted CRD's conversion Service is config/default's (see
		// the test's doc); the release takes it over.
		"--force-conflicts", "--wait", "--timeout", helmTimeout}, hi.values...)
	start := time.Now()
	hi.mustRun(ctx, t, args...)
	t.Logf("helm install --wait returned in %v", time.Since(start).Round(100*time.Millisecond))
	hi.requireRelease(ctx, t, 1)

	d := hi.waitOperatorRolledOut(ctx, t, "installed")
	hi.operatorPodUIDs = map[types.UID]bool{}
	for _, p := range hi.operatorPods(ctx, t, d) {
		hi.operatorPodUIDs[p.UID] = true
	}
	hi.waitLeader(ctx, t, hi.operatorPodUIDs)

	// The chart's webhooks, through its Service, with the CA the
	// operator injected; the suite's configurations are gone meanwhile.
	eventually(ctx, t, time.Minute, "the chart's webhook configurations call its Service with a CA", func(ctx context.Context) (bool, string, error) {
		var state []string
		ok := true
		for kind, name := range map[string]string{
			"MutatingWebhookConfiguration":   helmPrefix + "mutating-webhook-configuration",
			"ValidatingWebhookConfiguration": helmPrefix + "validating-webhook-configuration",
		} {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(admissionGVK(kind))
			if err := hi.c.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
				return false, "", err
			}
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				m, _ := h.(map[string]any)
				svc, _, _ := unstructured.NestedString(m, "clientConfig", "service", "name")
				svcNS, _, _ := unstructured.NestedString(m, "clientConfig", "service", "namespace")
				ca, _, _ := unstructured.NestedString(m, "clientConfig", "caBundle")
				ok = ok && svc == helmPrefix+"webhook-service" && svcNS == helmNamespace && ca != ""
				state = append(state, fmt.Sprintf("%s: %s/%s caBundle %d bytes", m["name"], svcNS, svc, len(ca)))
			}
		}
		return ok && len(state) > 0, strings.Join(state, "; "), nil
	})
	ns := Namespace(ctx, t)
	eventually(ctx, t, time.Minute, "the chart's mutating webhook defaults a WebApp (server-side dry run)", func(ctx context.Context) (bool, string, error) {
		err := dryRunWebApp(ctx, hi.cfg, ns)
		return err == nil, "admitted", err
	})
	tooSmall := newWebApp(ns, "too-small", kindWebAppImage)
	tooSmall.Spec.Resources = &webappv1.ContainerResources{Memory: new(resource.MustParse("1Mi"))}
	err := hi.c.Create(ctx, tooSmall, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), `admission webhook "vwebapp-v1.kb.io" denied the request`) {
		t.Errorf("a WebApp with 1Mi of memory: %v, want the chart's validating webhook vwebapp-v1.kb.io to deny it", err)
	}
	for kind, name := range map[string]string{"MutatingWebhookConfiguration": mutatingWebhookConfig, "ValidatingWebhookConfiguration": validatingWebhookCfg} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(admissionGVK(kind))
		if err := hi.c.Get(ctx, client.ObjectKey{Name: name}, u); !apierrors.IsNotFound(err) {
			t.Errorf("the suite's %s %s: %v; want it gone while the chart's operator runs", kind, name, err)
		}
	}
}

// admissionGVK is an admissionregistration.k8s.io/v1 kind.
func admissionGVK(kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: kind}
}

// waitOperatorRolledOut waits until the chart's operator Deployment is
// rolled out with the chart's replicas, from the chart version the test
// installed, and checks its pods run the suite's image with the chart's
// names.
func (hi *helmInstall) waitOperatorRolledOut(ctx context.Context, t *testing.T, what string) *appsv1.Deployment {
	t.Helper()
	d := waitDeployment(ctx, t, hi.cfg, helmNamespace, helmPrefix+"controller-manager", what+": rolled out", func(d *appsv1.Deployment) bool {
		return deploymentRolledOut(d, hi.replicas)
	})
	if got, want := d.Labels[helmChartLabel], "webapp-operator-"+hi.version; got != want {
		t.Errorf("Deployment %s: label %s=%q, want %q", d.Name, helmChartLabel, got, want)
	}
	pods := hi.operatorPods(ctx, t, d)
	if len(pods) != int(hi.replicas) {
		t.Fatalf("the chart's operator has %d pods, want %d: %v", len(pods), hi.replicas, podNames(pods))
	}
	for _, p := range pods {
		requirePodRunning(t, &p, operator.image)
		args := p.Spec.Containers[0].Args
		for _, want := range []string{"--leader-elect", "--webhook-service=" + helmPrefix + "webhook-service", "--webhook-cert-secret=" + helmPrefix + "webhook-server-cert"} {
			if !slices.Contains(args, want) {
				t.Errorf("operator pod %s: args %v, want %s", p.Name, args, want)
			}
		}
	}
	return d
}

// operatorPods lists the live pods of the chart's operator Deployment.
func (hi *helmInstall) operatorPods(ctx context.Context, t *testing.T, d *appsv1.Deployment) []corev1.Pod {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	return listPods(ctx, t, hi.cfg, helmNamespace, sel.String())
}

// waitLeader waits until one of the operator pods with a UID in pods holds
// the Lease in the release's namespace, and returns its name.
func (hi *helmInstall) waitLeader(ctx context.Context, t *testing.T, pods map[types.UID]bool) string {
	t.Helper()
	leader := ""
	eventually(ctx, t, time.Minute, fmt.Sprintf("one of the %d operator pods leads (Lease in %s)", len(pods), helmNamespace), func(ctx context.Context) (bool, string, error) {
		var l coordinationv1.Lease
		if err := hi.c.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: leaseName}, &l); err != nil {
			return false, "", err
		}
		holder := ptrString(l.Spec.HolderIdentity)
		var ps corev1.PodList
		if err := hi.c.List(ctx, &ps, client.InNamespace(helmNamespace)); err != nil {
			return false, "", err
		}
		for _, p := range ps.Items {
			if pods[p.UID] && holdsLease(holder, p.Name) {
				leader = p.Name
				return true, "holder " + holder, nil
			}
		}
		return false, "holder " + holder, nil
	})
	return leader
}

// sampleReady creates config/samples' v1 WebApp in the feature's
// namespace and waits for it to be Ready with its pods Running.
func (hi *helmInstall) sampleReady(ctx context.Context, t *testing.T) {
	ns := Namespace(ctx, t)
	file := filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "config", "samples", "apps_v1_webapp.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var w webappv1.WebApp
	if err := yaml.UnmarshalStrict(data, &w); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	w.Namespace = ns
	createWebApp(ctx, t, hi.cfg, &w)
	hi.app, hi.appImage = types.NamespacedName{Namespace: ns, Name: w.Name}, w.Spec.Image
	want := ptr.Deref(w.Spec.Replicas, 1)
	got := waitWebAppReady(ctx, t, hi.cfg, ns, w.Name, want)
	if ms := managers(got); !slices.Contains(ms, "webapp-operator/status") {
		t.Errorf("WebApp %s: status managers %v, want webapp-operator/status (the chart's operator)", w.Name, ms)
	}
	// Stored as v2: created as v1 and read in both versions, through the
	// chart's conversion webhook.
	for _, v := range []string{"v1", "v2"} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: webappv1.GroupVersion.Group, Version: v, Kind: "WebApp"})
		if err := hi.c.Get(ctx, hi.app, u); err != nil {
			t.Errorf("WebApp %s read as %s: %v", w.Name, v, err)
		}
	}
	pods := webAppPods(ctx, t, hi.cfg, ns, w.Name)
	if len(pods) != int(want) {
		t.Fatalf("WebApp %s has %d pods, want %d: %v", w.Name, len(pods), want, podNames(pods))
	}
	hi.appPods = map[types.UID]int32{}
	for _, p := range pods {
		requirePodRunning(t, &p, w.Spec.Image)
		hi.appPods[p.UID] = restarts(&p)
	}
	hi.appDeploy = waitDeployment(ctx, t, hi.cfg, ns, w.Name, "rolled out", func(d *appsv1.Deployment) bool { return deploymentRolledOut(d, want) })
}

// upgrade upgrades the release to the next chart version and checks that
// the operator rolled and the WebApp's pods did not.
func (hi *helmInstall) upgrade(ctx context.Context, t *testing.T) {
	next, err := nextChart(hi.chart, hi.version, filepath.Join(hi.tmp, "chart"))
	if err != nil {
		t.Fatal(err)
	}
	var before appsv1.Deployment
	if err := hi.c.Get(ctx, client.ObjectKey{Namespace: helmNamespace, Name: helmPrefix + "controller-manager"}, &before); err != nil {
		t.Fatal(err)
	}
	hi.chart, hi.version = next.dir, next.version
	args := append([]string{"upgrade", helmRelease, hi.chart, "-n", helmNamespace, "--wait", "--timeout", helmTimeout}, hi.values...)
	start := time.Now()
	hi.mustRun(ctx, t, args...)
	t.Logf("helm upgrade --wait to chart %s returned in %v", hi.version, time.Since(start).Round(100*time.Millisecond))
	hi.requireRelease(ctx, t, 2)

	// The operator rolled: a new pod template, every pod replaced.
	d := hi.waitOperatorRolledOut(ctx, t, "upgraded")
	if d.Generation <= before.Generation || d.Spec.Template.Annotations[helmUpgradeAnnotation] != hi.version {
		t.Fatalf("operator Deployment: generation %d (was %d), pod annotation %s=%q; want a new template with %q",
			d.Generation, before.Generation, helmUpgradeAnnotation, d.Spec.Template.Annotations[helmUpgradeAnnotation], hi.version)
	}
	newPods := map[types.UID]bool{}
	eventually(ctx, t, convergeTimeout, "every operator pod replaced", func(ctx context.Context) (bool, string, error) {
		var ps corev1.PodList
		if err := hi.c.List(ctx, &ps, client.InNamespace(helmNamespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return false, "", err
		}
		clear(newPods)
		var state []string
		old := 0
		for _, p := range ps.Items {
			state = append(state, fmt.Sprintf("%s(%s, annotation %q, deleting %t)", p.Name, p.Status.Phase, p.Annotations[helmUpgradeAnnotation], p.DeletionTimestamp != nil))
			if hi.operatorPodUIDs[p.UID] {
				old++
			} else if p.Annotations[helmUpgradeAnnotation] == hi.version {
				newPods[p.UID] = true
			}
		}
		return old == 0 && len(newPods) == int(hi.replicas), strings.Join(state, " "), nil
	})
	leader := hi.waitLeader(ctx, t, newPods)
	t.Logf("the upgraded operator's pod %s leads", leader)

	// A pass of the new leader over the WebApp: the Service it owns,
	// deleted, comes back (a new UID). Only the leader reconciles.
	var svc corev1.Service
	if err := hi.c.Get(ctx, hi.app, &svc); err != nil {
		t.Fatal(err)
	}
	if err := hi.c.Delete(ctx, &svc); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, convergeTimeout, "the WebApp's Service recreated by the upgraded operator", func(ctx context.Context) (bool, string, error) {
		var s corev1.Service
		if err := hi.c.Get(ctx, hi.app, &s); err != nil {
			return false, "", client.IgnoreNotFound(err)
		}
		return s.UID != svc.UID && s.DeletionTimestamp == nil, "uid " + string(s.UID), nil
	})

	// Ready, and still Ready five polls in a row.
	want := ptr.Deref(hi.appDeploy.Spec.Replicas, 1)
	streak := 0
	eventually(ctx, t, convergeTimeout, fmt.Sprintf("WebApp %s Ready with %d ready replicas for 5 polls in a row", hi.app, want), func(ctx context.Context) (bool, string, error) {
		w, err := getWebApp(ctx, hi.cfg, hi.app.Namespace, hi.app.Name)
		if err != nil {
			streak = 0
			return false, "", err
		}
		if isReady(w) && w.Status.IsReady() && ptr.Deref(w.Status.ReadyReplicas, 0) == want {
			streak++
		} else {
			streak = 0
		}
		return streak >= 5, fmt.Sprintf("streak %d: %s", streak, describeWebApp(w)), nil
	})

	// The same pods, none restarted, and the same Deployment spec.
	pods := webAppPods(ctx, t, hi.cfg, hi.app.Namespace, hi.app.Name)
	now := map[types.UID]int32{}
	for _, p := range pods {
		requirePodRunning(t, &p, hi.appImage)
		now[p.UID] = restarts(&p)
	}
	if !maps.Equal(now, hi.appPods) {
		t.Errorf("the WebApp's pods (UID: restarts) were %v before the upgrade, %v after: pods were replaced or restarted", hi.appPods, now)
	}
	var ad appsv1.Deployment
	if err := hi.c.Get(ctx, hi.app, &ad); err != nil {
		t.Fatal(err)
	}
	if ad.UID != hi.appDeploy.UID || ad.Generation != hi.appDeploy.Generation {
		t.Errorf("the WebApp's Deployment: uid %s generation %d after the upgrade, uid %s generation %d before; want it untouched",
			ad.UID, ad.Generation, hi.appDeploy.UID, hi.appDeploy.Generation)
	}
}

// uninstall deletes the WebApp (the chart's operator finalizes it), then
// uninstalls the release and checks what is left.
func (hi *helmInstall) uninstall(ctx context.Context, t *testing.T) {
	if err := deleteWebAppAndWait(ctx, hi.c, hi.app, convergeTimeout); err != nil {
		t.Fatal(err)
	}
	// What the release consists of: the chart as it runs, rendered.
	rendered, err := decodeManifests(hi.mustRun(ctx, t, append([]string{"template", helmRelease, hi.chart, "-n", helmNamespace}, hi.values...)...))
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	start := time.Now()
	hi.mustRun(ctx, t, "uninstall", helmRelease, "-n", helmNamespace, "--wait", "--timeout", helmTimeout)
	t.Logf("helm uninstall --wait returned in %v; %d rendered objects", time.Since(start).Round(100*time.Millisecond), len(rendered))

	gvks := []schema.GroupVersionKind{
		// The operator's runtime objects, and the release records.
		{Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Pod"},
		{Group: "apps", Version: "v1", Kind: "ReplicaSet"}, {Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
	}
	for _, o := range rendered {
		if !slices.Contains(gvks, o.GroupVersionKind()) {
			gvks = append(gvks, o.GroupVersionKind())
		}
	}
	eventually(ctx, t, convergeTimeout, "nothing of the release is left but the CRD", func(ctx context.Context) (bool, string, error) {
		var left []string
		for _, o := range rendered {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			err := hi.c.Get(ctx, client.ObjectKeyFromObject(o), got)
			switch {
			case o.GetKind() == "CustomResourceDefinition":
				if err != nil {
					return false, "", fmt.Errorf("the CRD must stay (helm.sh/resource-policy: keep): %w", err)
				}
			case err == nil:
				left = append(left, describeObject(got))
			case !apierrors.IsNotFound(err):
				return false, "", err
			}
		}
		// Nothing else carries the release's label or annotation, in any
		// namespace, nor is a release record (Helm's Secrets).
		for _, gvk := range gvks {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := hi.c.List(ctx, l); err != nil {
				return false, "", err
			}
			for _, u := range l.Items {
				if u.GetKind() == "CustomResourceDefinition" && u.GetName() == webappCRD {
					continue
				}
				if u.GetLabels()[labelInstance] == helmRelease || u.GetAnnotations()[helmReleaseName] == helmRelease ||
					u.GetLabels()["owner"] == "helm" && u.GetLabels()["name"] == helmRelease {
					left = append(left, describeObject(&u))
				}
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left), nil
	})
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := hi.c.Get(ctx, client.ObjectKey{Name: webappCRD}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.GetAnnotations()[helmResourcePolicy] != "keep" {
		t.Errorf("CRD %s: annotations %v, want %s=keep", webappCRD, crd.GetAnnotations(), helmResourcePolicy)
	}

	// What the operator created at runtime is all that is left in its
	// namespace (see the test's doc); then the namespace goes, as
	// docs/deploying.md says.
	var runtime []string
	eventually(ctx, t, convergeTimeout, "only the operator's runtime objects left in "+helmNamespace, func(ctx context.Context) (bool, string, error) {
		var unexpected []string
		runtime, unexpected, err = namespaceLeftovers(ctx, hi.c)
		return err == nil && len(unexpected) == 0, fmt.Sprintf("unexpected %v; the operator's %v", unexpected, runtime), err
	})
	t.Logf("left in %s (the operator's runtime objects, and every namespace's own), deleted with the namespace: %v", helmNamespace, runtime)
	if err := deleteNamespaceAndWait(ctx, hi.c, helmNamespace, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
}
