package packaging

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// helmLabels are the labels the chart adds to every object
// (_helpers.tpl "webapp-operator.labels", Helm's recommended labels). They
// are the first of the two differences from config/default the chart test
// accepts.
var helmLabels = []string{
	"helm.sh/chart",
	"app.kubernetes.io/name",
	"app.kubernetes.io/instance",
	"app.kubernetes.io/version",
	"app.kubernetes.io/managed-by",
}

// TestChartMatchesConfigDefault renders the chart with its default values,
// as the release "webapp" in "webapp-system" (what `helm install webapp
// charts/webapp-operator -n webapp-system` renders, CRDs included), and
// builds config/default with kustomize's library. The two must hold the
// same objects, field for field, with two documented exceptions:
//
//  1. Helm's recommended labels (helmLabels) on every templated object.
//     They are what `helm list`, `kubectl get -l app.kubernetes.io/instance`
//     and the chart's own upgrade rely on; config/default has no release to
//     name.
//  2. config/default's Namespace "webapp-system" (labelled with Pod
//     Security "restricted") is not in the chart. A chart installs into its
//     release's namespace, which Helm does not own: `helm uninstall` would
//     otherwise delete the namespace and everything in it. docs/deploying.md
//     creates the namespace with the label before `helm install`.
//  3. The CRD's annotation helm.sh/resource-policy: keep. The chart
//     templates the CRD (templates/crd.yaml: its conversion webhook names
//     the release's Service, and `helm upgrade` must bring new versions,
//     which Helm never does for crds/), and keeps it on `helm uninstall`,
//     which would otherwise delete every WebApp.
//
// Any other difference, such as a new +kubebuilder:rbac marker that
// changed config/rbac/role.yaml, or a regenerated CRD not copied into the
// chart (`make bundle` does), fails here.
func TestChartMatchesConfigDefault(t *testing.T) {
	chart := renderChart(t, nil)
	for _, o := range chart {
		labels := o.GetLabels()
		if o.GetKind() == "CustomResourceDefinition" {
			annotations := o.GetAnnotations()
			require.Equal(t, "keep", annotations["helm.sh/resource-policy"], "%s is kept on helm uninstall", key(o))
			delete(annotations, "helm.sh/resource-policy")
			o.SetAnnotations(annotations)
		}
		for _, l := range helmLabels {
			require.Contains(t, labels, l, "%s lacks Helm's label %s", key(o), l)
			delete(labels, l)
		}
		if len(labels) == 0 {
			labels = nil
		}
		o.SetLabels(labels)
	}

	var kustomized []*unstructured.Unstructured
	var namespace *unstructured.Unstructured
	for _, o := range kustomizeBuild(t, defaultCfg) {
		if o.GetKind() == "Namespace" {
			namespace = o
			continue
		}
		kustomized = append(kustomized, o)
	}
	require.NotNil(t, namespace, "config/default creates its namespace")
	assert.Equal(t, releaseNS, namespace.GetName())

	want, got := byKey(t, kustomized), byKey(t, chart)
	for k, o := range want {
		c, ok := got[k]
		if !assert.True(t, ok, "the chart has no %s (config/default has)", k) {
			continue
		}
		wantYAML, gotYAML := toYAML(t, o), toYAML(t, c)
		assert.Equal(t, wantYAML, gotYAML, "%s differs between config/default (expected) and the chart (actual)", k)
	}
	for k := range got {
		assert.Contains(t, want, k, "the chart has %s, config/default has not", k)
	}
	assert.Len(t, got, 13, "the objects compared (CRD, RBAC, webhooks, Service, Deployment)")
}

// TestChartLint runs `helm lint --strict` (Helm's lint package): chart
// metadata, values against values.schema.json, templates rendered and
// parsed as Kubernetes YAML, for every certificate mode.
func TestChartLint(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"defaults":     nil,
		"cert-manager": {"webhook": map[string]any{"certificates": map[string]any{"mode": "cert-manager"}}},
	} {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			l.Namespace = releaseNS
			l.KubeVersion = kubeVersion(t)
			res := l.Run([]string{chartDir}, vals)
			for _, m := range res.Messages {
				// Info messages (an icon missing from Chart.yaml) are advice.
				assert.Less(t, m.Severity, support.WarningSev, "helm lint: %s", m)
			}
			assert.Empty(t, res.Errors)
			assert.Equal(t, 1, res.TotalChartsLinted)
		})
	}
	// The schema rejects what the templates cannot render.
	l := action.NewLint()
	res := l.Run([]string{chartDir}, map[string]any{"webhook": map[string]any{"certificates": map[string]any{"mode": "vault"}}})
	assert.NotEmpty(t, res.Errors, "an unknown certificate mode fails lint")
}

// TestChartCertManagerMode: cert-manager issues the certificate and injects
// the CA; the operator serves the mounted Secret and its role loses every
// permission self-management needs.
func TestChartCertManagerMode(t *testing.T) {
	objs := byKey(t, renderChart(t, map[string]any{
		"webhook": map[string]any{"certificates": map[string]any{"mode": "cert-manager"}},
	}))
	require.Contains(t, objs, "Issuer webapp-system/webapp-selfsigned-issuer")
	cert := objs["Certificate webapp-system/webapp-serving-cert"]
	require.NotNil(t, cert)
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	assert.Equal(t, "webapp-webhook-server-cert", secret)
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	assert.Contains(t, dns, "webapp-webhook-service.webapp-system.svc")

	for _, k := range []string{
		"MutatingWebhookConfiguration webapp-mutating-webhook-configuration",
		"ValidatingWebhookConfiguration webapp-validating-webhook-configuration",
		"CustomResourceDefinition webapps.apps.example.com",
	} {
		require.Contains(t, objs, k)
		assert.Equal(t, "webapp-system/webapp-serving-cert", objs[k].GetAnnotations()["cert-manager.io/inject-ca-from"], k)
	}

	dep := objs["Deployment webapp-system/webapp-controller-manager"]
	require.NotNil(t, dep)
	y := toYAML(t, dep)
	assert.Contains(t, y, "--webhook-cert-mode=external")
	assert.Contains(t, y, "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs")
	assert.Contains(t, y, "secretName: webapp-webhook-server-cert")
	assert.NotContains(t, y, "emptyDir")

	for _, k := range []string{"ClusterRole webapp-manager-role", "Role webapp-system/webapp-manager-role"} {
		role := toYAML(t, objs[k])
		assert.NotContains(t, role, "webhookconfigurations", k)
		assert.NotContains(t, role, "secrets", k)
	}

	// An existing issuer replaces the chart's self-signed one.
	objs = byKey(t, renderChart(t, map[string]any{"webhook": map[string]any{"certificates": map[string]any{
		"mode":        "cert-manager",
		"certManager": map[string]any{"issuerRef": map[string]any{"kind": "ClusterIssuer", "name": "corp-ca"}},
	}}}))
	assert.NotContains(t, objs, "Issuer webapp-system/webapp-selfsigned-issuer")
	kind, _, _ := unstructured.NestedString(objs["Certificate webapp-system/webapp-serving-cert"].Object, "spec", "issuerRef", "kind")
	assert.Equal(t, "ClusterIssuer", kind)
}

// TestChartValues: the values other than the certificate mode reach the
// objects they name; a name prefix other than config/default's is passed
// to the operator, whose flag defaults are config/default's names, and
// the role's resourceNames follow it.
func TestChartValues(t *testing.T) {
	objs := byKey(t, renderChartAs(t, "shop", "shop-ops", map[string]any{
		"replicaCount":   1,
		"image":          map[string]any{"repository": "registry.example.com/webapp-operator", "tag": "v1.2.3", "pullPolicy": "Always"},
		"leaderElection": map[string]any{"enabled": false},
		"metrics":        map[string]any{"enabled": false},
		"resources":      map[string]any{"limits": map[string]any{"memory": "1Gi"}},
	}))
	dep := objs["Deployment shop-ops/shop-controller-manager"]
	require.NotNil(t, dep, "names follow the release")
	y := toYAML(t, dep)
	assert.Contains(t, y, "\n  replicas: 1\n")
	assert.Contains(t, y, "image: registry.example.com/webapp-operator:v1.2.3")
	assert.Contains(t, y, "imagePullPolicy: Always")
	assert.NotContains(t, y, "--leader-elect")
	assert.Contains(t, y, "--metrics-bind-address=0")
	assert.Contains(t, y, "memory: 1Gi")
	for _, flag := range []string{
		"--webhook-service=shop-webhook-service",
		"--webhook-cert-secret=shop-webhook-server-cert",
		"--mutating-webhook-configuration=shop-mutating-webhook-configuration",
		"--validating-webhook-configuration=shop-validating-webhook-configuration",
	} {
		assert.Contains(t, y, flag)
	}
	assert.Contains(t, toYAML(t, objs["ClusterRole shop-manager-role"]), "- shop-mutating-webhook-configuration")
	assert.Contains(t, toYAML(t, objs["Role shop-ops/shop-manager-role"]), "- shop-webhook-server-cert")
	assert.NotContains(t, objs, "ClusterRole shop-metrics-auth-role", "metrics off: no metrics roles")

	// The default render passes none of those flags: they are the defaults.
	def := toYAML(t, byKey(t, renderChart(t, nil))["Deployment webapp-system/webapp-controller-manager"])
	assert.NotContains(t, def, "--webhook-service=")
	assert.NotContains(t, def, "--sharding")

	// Sharded, as config/sharded: --sharding and the pod's name.
	sharded := toYAML(t, byKey(t, renderChart(t, map[string]any{"replicaCount": 3, "sharding": map[string]any{"enabled": true}}))["Deployment webapp-system/webapp-controller-manager"])
	assert.Contains(t, sharded, "\n  replicas: 3\n")
	assert.Contains(t, sharded, "- --sharding\n")
	assert.Contains(t, sharded, "- --leader-elect\n")
	assert.Contains(t, sharded, "name: POD_NAME")
	assert.Contains(t, sharded, "fieldPath: metadata.name")
}

func renderChart(t *testing.T, vals map[string]any) []*unstructured.Unstructured {
	return renderChartAs(t, releaseName, releaseNS, vals)
}

// renderChartAs is `helm template NAME charts/webapp-operator -n NS
// --include-crds`: Helm's install action in client-only dry-run mode.
func renderChartAs(t *testing.T, name, namespace string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	chart := loadChart(t)
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.Replace = true
	install.ReleaseName = name
	install.Namespace = namespace
	install.IncludeCRDs = true
	install.KubeVersion = kubeVersion(t)
	r, err := install.Run(chart, vals)
	require.NoError(t, err, "helm template")
	rel, ok := r.(*releasev1.Release)
	require.True(t, ok, "a v1 release, got %T", r)
	objs := decodeAll(t, []byte(rel.Manifest))
	for _, h := range rel.Hooks {
		t.Errorf("the chart has a hook (%s): hooks are not in the diff with config/default", h.Path)
	}
	return objs
}

// kubeVersion is the Kubernetes version the chart is rendered for: the
// toolchain's (hack/tools.sh). Without it Helm's client-only mode assumes
// v1.20 in a test binary (it reads client-go's version from the build info
// only outside tests), below the chart's kubeVersion.
func kubeVersion(t *testing.T) *common.KubeVersion {
	t.Helper()
	v, err := common.ParseKubeVersion("v1.37.2")
	require.NoError(t, err)
	return v
}

func loadChart(t *testing.T) *chartv2.Chart {
	t.Helper()
	chart, err := loader.Load(chartDir)
	require.NoError(t, err)
	require.Equal(t, chartVersion, chart.Metadata.Version)
	return chart
}

// kustomizeBuild is `kustomize build DIR`, with the kustomize library
// kubectl's own kustomize is built from.
func kustomizeBuild(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err, "kustomize build %s", dir)
	b, err := m.AsYaml()
	require.NoError(t, err)
	return decodeAll(t, b)
}

func decodeAll(t *testing.T, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		if m == nil {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func key(o *unstructured.Unstructured) string {
	if ns := o.GetNamespace(); ns != "" {
		return o.GetKind() + " " + ns + "/" + o.GetName()
	}
	return o.GetKind() + " " + o.GetName()
}

func byKey(t *testing.T, objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	t.Helper()
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		k := key(o)
		require.NotContains(t, m, k, "two objects are %s", k)
		m[k] = o
	}
	return m
}

// toYAML prints an object with sorted keys, so that a difference shows as a
// readable line diff.
func toYAML(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	if o == nil {
		return ""
	}
	b, err := yaml.Marshal(o.Object)
	require.NoError(t, err)
	return string(b)
}
