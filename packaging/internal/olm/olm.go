// Package olm generates the WebApp operator's OLM bundle (registry+v1
// format, what `operator-sdk generate bundle` writes in a kubebuilder
// project) and a file-based catalog from examples/webapp/config, with
// operator-framework/api's types. It also copies the generated CRD into the
// Helm chart, so that `make bundle` refreshes every package.
//
// Everything is derived from config/: the Deployment, the roles and the
// webhooks from `kustomize build config/default`, the CRD and its field
// descriptions from config/crd, the examples from config/samples. What OLM
// does differently from config/default is changed here, each with why.
package olm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Release is what changes from one release of the bundle to the next.
type Release struct {
	// Version of the operator, the CSV's spec.version (semver, no "v").
	Version string
	// Image of the operator; empty means <ImageRepo>:v<Version>.
	Image string
	// Replaces is the CSV this one upgrades from (webapp-operator.v0.1.0),
	// empty for the first release. With SkipRange, it makes the channel's
	// upgrade graph (docs/deploying.md).
	Replaces string
	// SkipRange lets OLM upgrade straight from any version in the range
	// (olm.skipRange, e.g. ">=0.1.0 <0.2.0").
	SkipRange string
	// Channels of the release; the first is the package's default channel.
	Channels []string
	// BundleImage is where the bundle image (bundle.Dockerfile) is pushed;
	// the catalog refers to it. Empty means <ImageRepo>-bundle:v<Version>.
	BundleImage string
}

// Default is the release `make bundle` generates.
// Its channel follows OLM's naming convention (candidate, fast, stable):
// "candidate" while the operator's maturity is alpha.
var Default = Release{Version: "0.1.0", Channels: []string{"candidate"}}

const (
	// Package is the OLM package name (and the CSV name's prefix).
	Package = "webapp-operator"
	// ImageRepo is the operator's image repository (config/manager).
	ImageRepo = "reconcilekit/webapp-operator"
	// CertDir is where OLM mounts the webhook serving certificate it
	// issues (tls.crt, tls.key), also controller-runtime's default.
	CertDir = "/tmp/k8s-webhook-server/serving-certs"

	// Paths, relative to the repository root.
	WebappDir      = "examples/webapp"
	BundleDir      = WebappDir + "/bundle"
	BundleDocker   = WebappDir + "/bundle.Dockerfile"
	CatalogDir     = WebappDir + "/catalog"
	CatalogFile    = CatalogDir + "/" + Package + "/index.yaml"
	ChartCRD       = "charts/webapp-operator/files/apps.example.com_webapps.yaml"
	crdSource      = WebappDir + "/config/crd/bases/apps.example.com_webapps.yaml"
	defaultConfig  = WebappDir + "/config/default"
	samplesConfig  = WebappDir + "/config/samples"
	metadataFile   = BundleDir + "/metadata/annotations.yaml"
	manifestsDir   = BundleDir + "/manifests"
	mediaType      = "registry+v1"
	repositoryURL  = "https://github.com/reconcilekit/reconcilekit"
	operatorNSName = "webapp-system"
)

// Generate reads the repository at root and returns the files it generates,
// by path relative to root.
func Generate(root string, r Release) (map[string][]byte, error) {
	if r.Image == "" {
		r.Image = ImageRepo + ":v" + r.Version
	}
	if r.BundleImage == "" {
		r.BundleImage = ImageRepo + "-bundle:v" + r.Version
	}
	if len(r.Channels) == 0 {
		return nil, errors.New("a release needs a channel")
	}
	if _, err := semver.Parse(r.Version); err != nil {
		return nil, fmt.Errorf("version %q: %w", r.Version, err)
	}

	crdYAML, err := os.ReadFile(filepath.Join(root, crdSource))
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(crdYAML, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", crdSource, err)
	}
	objs, err := kustomize(filepath.Join(root, defaultConfig))
	if err != nil {
		return nil, err
	}
	samples, err := kustomize(filepath.Join(root, samplesConfig))
	if err != nil {
		return nil, err
	}

	csv, metricsReader, err := clusterServiceVersion(r, &crd, objs, samples)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		// operator-sdk's file names: <name>_<group>_<version>_<kind>.yaml,
		// the CRD as <group>_<plural>.yaml.
		manifestsDir + "/" + Package + ".clusterserviceversion.yaml":                          csv,
		manifestsDir + "/apps.example.com_webapps.yaml":                                       crdYAML,
		manifestsDir + "/webapp-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml": metricsReader,
		ChartCRD: crdYAML,
	}
	annotations := bundleAnnotations(r)
	files[metadataFile], err = marshal(map[string]any{"annotations": annotations})
	if err != nil {
		return nil, err
	}
	files[BundleDocker] = bundleDockerfile(annotations)
	files[CatalogFile], err = catalog(r, &crd)
	if err != nil {
		return nil, err
	}
	return files, nil
}

// Write writes the generated files under root, and removes the files under
// the bundle and catalog directories that are no longer generated.
func Write(root string, files map[string][]byte) error {
	for _, dir := range []string{BundleDir, CatalogDir} {
		if err := os.RemoveAll(filepath.Join(root, dir)); err != nil {
			return err
		}
	}
	for p, b := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func clusterServiceVersion(r Release, crd *apiextensionsv1.CustomResourceDefinition, objs, samples []*unstructured.Unstructured) (csvYAML, metricsReaderYAML []byte, err error) {
	var (
		deployment            appsv1.Deployment
		clusterRules, nsRules []rbacv1.PolicyRule
		webhooks              []v1alpha1.WebhookDescription
		serviceAccount        string
		metricsReader         *unstructured.Unstructured
	)
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			if err := convert(o, &deployment); err != nil {
				return nil, nil, err
			}
		case "ServiceAccount":
			serviceAccount = o.GetName()
		case "ClusterRole":
			var role rbacv1.ClusterRole
			if err := convert(o, &role); err != nil {
				return nil, nil, err
			}
			switch {
			case strings.HasSuffix(role.Name, "metrics-reader"):
				// Not the operator's: bound to the scraper by the user.
				// Shipped in the bundle as a plain manifest, which OLM
				// creates with the CSV.
				metricsReader = o
			default:
				// manager-role and metrics-auth-role: the operator's own.
				clusterRules = append(clusterRules, role.Rules...)
			}
		case "Role":
			var role rbacv1.Role
			if err := convert(o, &role); err != nil {
				return nil, nil, err
			}
			nsRules = append(nsRules, role.Rules...)
		case "MutatingWebhookConfiguration":
			var c admissionregistrationv1.MutatingWebhookConfiguration
			if err := convert(o, &c); err != nil {
				return nil, nil, err
			}
			for _, w := range c.Webhooks {
				webhooks = append(webhooks, webhookDescription(v1alpha1.MutatingAdmissionWebhook, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.SideEffects, w.AdmissionReviewVersions, w.TimeoutSeconds))
			}
		case "ValidatingWebhookConfiguration":
			var c admissionregistrationv1.ValidatingWebhookConfiguration
			if err := convert(o, &c); err != nil {
				return nil, nil, err
			}
			for _, w := range c.Webhooks {
				webhooks = append(webhooks, webhookDescription(v1alpha1.ValidatingAdmissionWebhook, w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.SideEffects, w.AdmissionReviewVersions, w.TimeoutSeconds))
			}
		case "CustomResourceDefinition":
			// config/crd's conversion webhook: OLM sets the CRD's
			// spec.conversion itself, from this definition, with its
			// own Service and CA.
			var c apiextensionsv1.CustomResourceDefinition
			if err := convert(o, &c); err != nil {
				return nil, nil, err
			}
			if conv := c.Spec.Conversion; conv != nil && conv.Strategy == apiextensionsv1.WebhookConverter &&
				conv.Webhook != nil && conv.Webhook.ClientConfig != nil && conv.Webhook.ClientConfig.Service != nil {
				none := admissionregistrationv1.SideEffectClassNone
				d := webhookDescription(v1alpha1.ConversionWebhook, "c"+c.Spec.Names.Singular+".kb.io",
					admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Path: conv.Webhook.ClientConfig.Service.Path}},
					nil, nil, nil, &none, conv.Webhook.ConversionReviewVersions, nil)
				d.ConversionCRDs = []string{c.Name}
				webhooks = append(webhooks, d)
			}
		}
		// Namespace, Service (webhook-service), RoleBindings and
		// ClusterRoleBindings: OLM creates its own, from the CSV.
	}
	// Four admission webhooks (mutating and validating, for v1 and v2)
	// and the conversion webhook.
	if deployment.Name == "" || serviceAccount == "" || metricsReader == nil || len(webhooks) != 5 {
		return nil, nil, errors.New("config/default lacks the Deployment, ServiceAccount, metrics-reader role, admission webhooks or conversion webhook")
	}
	for i := range webhooks {
		webhooks[i].DeploymentName = deployment.Name
	}
	if err := forOLM(&deployment, r.Image); err != nil {
		return nil, nil, err
	}

	examples, err := json.MarshalIndent(objectsOf(samples), "", "  ")
	if err != nil {
		return nil, nil, err
	}
	owned, err := crdDescriptions(crd)
	if err != nil {
		return nil, nil, err
	}
	csv := v1alpha1.ClusterServiceVersion{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ClusterServiceVersionKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: csvName(r.Version),
			// The platforms the operator image is built for (hack/image.sh:
			// a static linux/amd64 binary). OLM hides the operator on
			// clusters whose nodes match none.
			Labels: map[string]string{
				"operatorframework.io/arch.amd64": "supported",
				"operatorframework.io/os.linux":   "supported",
			},
			Annotations: map[string]string{
				"alm-examples":   string(examples),
				"capabilities":   "Basic Install",
				"categories":     "Developer Tools",
				"containerImage": r.Image,
				"description":    "Runs stateless web applications (a Deployment and a Service) declared as WebApp resources.",
				"repository":     repositoryURL,
				"support":        "reconcilekit",
				// Where `kubectl operator install` and consoles put it:
				// config/default's namespace, whose role names assume it.
				"operatorframework.io/suggested-namespace": operatorNSName,
			},
		},
		Spec: v1alpha1.ClusterServiceVersionSpec{
			DisplayName: "WebApp Operator",
			Description: csvDescription,
			Version:     version.OperatorVersion{Version: semver.MustParse(r.Version)},
			Maturity:    "alpha",
			// The oldest Kubernetes the operator's client and CRD features
			// (CEL validation rules) are tested against.
			MinKubeVersion: "1.30.0",
			Keywords:       []string{"webapp", "web", "deployment", "reconcilekit"},
			Maintainers:    []v1alpha1.Maintainer{{Name: "reconcilekit", Email: "maintainers@reconcilekit.dev"}},
			Provider:       v1alpha1.AppLink{Name: "reconcilekit", URL: repositoryURL},
			Links: []v1alpha1.AppLink{
				{Name: "Source", URL: repositoryURL + "/tree/main/examples/webapp"},
				{Name: "Deploying", URL: repositoryURL + "/blob/main/docs/deploying.md"},
			},
			Icon: []v1alpha1.Icon{{Data: base64.StdEncoding.EncodeToString([]byte(icon)), MediaType: "image/svg+xml"}},
			// WebApps in every namespace: the operator's cache and its
			// ClusterRole are cluster-wide, and it does not read OLM's
			// olm.targetNamespaces, so an OperatorGroup that targets fewer
			// namespaces is not supported.
			InstallModes: []v1alpha1.InstallMode{
				{Type: v1alpha1.InstallModeTypeOwnNamespace, Supported: false},
				{Type: v1alpha1.InstallModeTypeSingleNamespace, Supported: false},
				{Type: v1alpha1.InstallModeTypeMultiNamespace, Supported: false},
				{Type: v1alpha1.InstallModeTypeAllNamespaces, Supported: true},
			},
			CustomResourceDefinitions: v1alpha1.CustomResourceDefinitions{Owned: owned},
			InstallStrategy: v1alpha1.NamedInstallStrategy{
				StrategyName: v1alpha1.InstallStrategyNameDeployment,
				StrategySpec: v1alpha1.StrategyDetailsDeployment{
					DeploymentSpecs: []v1alpha1.StrategyDeploymentSpec{{
						Name: deployment.Name, Spec: deployment.Spec, Label: deployment.Labels,
					}},
					Permissions:        []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: serviceAccount, Rules: withoutSelfManagedCerts(nsRules)}},
					ClusterPermissions: []v1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: serviceAccount, Rules: withoutSelfManagedCerts(clusterRules)}},
				},
			},
			WebhookDefinitions: webhooks,
			Replaces:           r.Replaces,
			RelatedImages:      []v1alpha1.RelatedImage{{Name: "manager", Image: r.Image}},
		},
	}
	if r.SkipRange != "" {
		csv.Annotations["olm.skipRange"] = r.SkipRange
	}
	csvYAML, err = marshalObject(&csv)
	if err != nil {
		return nil, nil, err
	}
	metricsReaderYAML, err = marshal(metricsReader.Object)
	return csvYAML, metricsReaderYAML, err
}

// forOLM changes config/default's Deployment for OLM: OLM issues the
// webhook serving certificate, mounts it at CertDir (a volume of its own,
// so config's emptyDir there must go: two mounts at one path make an
// invalid pod) and injects its CA into the webhook configurations it
// creates. The operator therefore runs in external certificate mode; its
// self-managed Rotator would fight OLM over the CA bundles.
func forOLM(d *appsv1.Deployment, image string) error {
	spec := &d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return fmt.Errorf("deployment %s: want one container, got %d", d.Name, len(spec.Containers))
	}
	c := &spec.Containers[0]
	c.Image = image
	// The image is linux/amd64 only (the CSV's operatorframework.io/arch
	// labels say so to OLM): keep its pods off other nodes.
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
					{Key: corev1.LabelOSStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
				},
			}}},
		}}
	}
	c.Args = append(c.Args, "--webhook-cert-mode=external", "--webhook-cert-dir="+CertDir)
	var certVolume string
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		if m.MountPath == CertDir {
			certVolume = m.Name
			return true
		}
		return false
	})
	if certVolume == "" {
		return fmt.Errorf("deployment %s mounts nothing at %s", d.Name, CertDir)
	}
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == certVolume })
	if len(spec.Volumes) == 0 {
		spec.Volumes = nil
	}
	if len(c.VolumeMounts) == 0 {
		c.VolumeMounts = nil
	}
	return nil
}

// withoutSelfManagedCerts drops the permissions only the self-managed
// certificate Rotator needs (its Secret, and update on the webhook
// configurations to inject the CA), which external mode never uses. They
// also name config/default's objects, which under OLM do not exist: OLM
// names the webhook configurations itself. On the WebApp CRD only get is
// left (the storage version migration reads it): list, watch and update
// are the Rotator's, for the conversion webhook's caBundle, which OLM sets.
func withoutSelfManagedCerts(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		if slices.Equal(r.Resources, []string{"customresourcedefinitions"}) {
			r.Verbs = []string{"get"}
		}
		r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(res string) bool {
			return res == "mutatingwebhookconfigurations" || res == "validatingwebhookconfigurations" ||
				(res == "secrets" && slices.Contains(r.APIGroups, ""))
		})
		if len(r.Resources) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// webhookDescription is one generated webhook as OLM describes it. The
// webhook's matchConditions are dropped: v1alpha1.WebhookDescription
// (operator-framework/api v0.36) has no field for them (docs/deploying.md).
func webhookDescription(typ v1alpha1.WebhookAdmissionType, name string, cc admissionregistrationv1.WebhookClientConfig,
	rules []admissionregistrationv1.RuleWithOperations, fp *admissionregistrationv1.FailurePolicyType, mp *admissionregistrationv1.MatchPolicyType,
	se *admissionregistrationv1.SideEffectClass, versions []string, timeout *int32) v1alpha1.WebhookDescription {
	var path *string
	if cc.Service != nil {
		path = cc.Service.Path
	}
	// OLM's webhook Service listens on ContainerPort and forwards to
	// TargetPort, the manager's webhook-server port (--webhook-port).
	target := intstrFromInt(9443)
	return v1alpha1.WebhookDescription{
		GenerateName: name, Type: typ, ContainerPort: 443, TargetPort: &target,
		Rules: rules, FailurePolicy: fp, MatchPolicy: mp, SideEffects: se, AdmissionReviewVersions: versions,
		TimeoutSeconds: timeout, WebhookPath: path,
	}
}

// crdDescriptions describe the owned CRD for OLM consoles, one per served
// version (as operator-sdk lists them), with the descriptions from each
// version's schema (the Go doc comments of api/v1 and api/v2).
func crdDescriptions(crd *apiextensionsv1.CustomResourceDefinition) ([]v1alpha1.CRDDescription, error) {
	var out []v1alpha1.CRDDescription
	for i := range crd.Spec.Versions {
		d, err := crdDescription(crd, &crd.Spec.Versions[i])
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// crdDescription describes one version of the owned CRD.
func crdDescription(crd *apiextensionsv1.CustomResourceDefinition, v *apiextensionsv1.CustomResourceDefinitionVersion) (v1alpha1.CRDDescription, error) {
	if v.Schema == nil {
		return v1alpha1.CRDDescription{}, fmt.Errorf("%s %s: no schema", crd.Name, v.Name)
	}
	root := v.Schema.OpenAPIV3Schema
	field := func(path ...string) (string, error) {
		s := root
		for _, p := range path {
			next, ok := s.Properties[p]
			if !ok {
				return "", fmt.Errorf("%s %s: no field %s", crd.Name, v.Name, strings.Join(path, "."))
			}
			s = &next
		}
		return oneLine(s.Description), nil
	}
	type desc struct {
		path, name string
		x          []string
	}
	specs := []desc{
		{"image", "Image", []string{"urn:alm:descriptor:com.tectonic.ui:text"}},
		{"replicas", "Replicas", []string{"urn:alm:descriptor:com.tectonic.ui:podCount"}},
		{"resources", "Resources", []string{"urn:alm:descriptor:com.tectonic.ui:resourceRequirements"}},
		{"dbRef", "Database", []string{"urn:alm:descriptor:io.kubernetes:Service"}},
	}
	if v.Name != "v1" {
		// v2: the database is an object naming the Service.
		specs[3].path = "database.serviceName"
	}
	statuses := []desc{
		{"conditions", "Conditions", []string{"urn:alm:descriptor:io.kubernetes.conditions"}},
		{"readyReplicas", "Ready replicas", []string{"urn:alm:descriptor:com.tectonic.ui:podCount"}},
		{"message", "Message", []string{"urn:alm:descriptor:text"}},
	}
	out := v1alpha1.CRDDescription{
		Name: crd.Name, Version: v.Name, Kind: crd.Spec.Names.Kind, DisplayName: "Web App",
		Description: oneLine(root.Description),
		// What the operator creates for each WebApp.
		Resources: []v1alpha1.APIResourceReference{
			{Kind: "Deployment", Name: "", Version: "v1"},
			{Kind: "Service", Name: "", Version: "v1"},
		},
	}
	for _, d := range specs {
		text, err := field(append([]string{"spec"}, strings.Split(d.path, ".")...)...)
		if err != nil {
			return out, err
		}
		out.SpecDescriptors = append(out.SpecDescriptors, v1alpha1.SpecDescriptor{Path: d.path, DisplayName: d.name, Description: text, XDescriptors: d.x})
	}
	for _, d := range statuses {
		text, err := field("status", d.path)
		if err != nil {
			return out, err
		}
		out.StatusDescriptors = append(out.StatusDescriptors, v1alpha1.StatusDescriptor{Path: d.path, DisplayName: d.name, Description: text, XDescriptors: d.x})
	}
	return out, nil
}

func bundleAnnotations(r Release) map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       mediaType,
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         Package,
		"operators.operatorframework.io.bundle.channels.v1":        strings.Join(r.Channels, ","),
		"operators.operatorframework.io.bundle.channel.default.v1": r.Channels[0],
	}
}

// bundleDockerfile is the bundle image: the annotations as labels, the
// manifests and metadata at the image's root. Built from the directory
// that holds bundle/ (examples/webapp), as operator-sdk's.
func bundleDockerfile(annotations map[string]string) []byte {
	var b bytes.Buffer
	b.WriteString("# Generated by `make bundle` (packaging/internal/olm). Build from examples/webapp:\n")
	b.WriteString("#   docker build -f bundle.Dockerfile -t reconcilekit/webapp-operator-bundle:v<version> .\n")
	b.WriteString("FROM scratch\n\n")
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "LABEL %s=%s\n", k, annotations[k])
	}
	b.WriteString("\nCOPY bundle/manifests /manifests/\nCOPY bundle/metadata /metadata/\n")
	return b.Bytes()
}

// catalog is the package's file-based catalog (olm.package, olm.channel,
// olm.bundle), what `opm init` and `opm render` write, with the bundle
// referred to by image: `opm serve` or a CatalogSource built from it
// (catalog.Dockerfile) lists the operator.
func catalog(r Release, crd *apiextensionsv1.CustomResourceDefinition) ([]byte, error) {
	entry := map[string]any{"name": csvName(r.Version)}
	if r.Replaces != "" {
		entry["replaces"] = r.Replaces
	}
	if r.SkipRange != "" {
		entry["skipRange"] = r.SkipRange
	}
	docs := []any{
		map[string]any{
			"schema": "olm.package", "name": Package, "defaultChannel": r.Channels[0],
			"description": "Runs stateless web applications (a Deployment and a Service) declared as WebApp resources.",
			"icon":        map[string]any{"base64data": base64.StdEncoding.EncodeToString([]byte(icon)), "mediatype": "image/svg+xml"},
		},
	}
	for _, ch := range r.Channels {
		docs = append(docs, map[string]any{"schema": "olm.channel", "package": Package, "name": ch, "entries": []any{entry}})
	}
	properties := []any{map[string]any{"type": "olm.package", "value": map[string]any{"packageName": Package, "version": r.Version}}}
	for _, v := range crd.Spec.Versions {
		properties = append(properties, map[string]any{"type": "olm.gvk", "value": map[string]any{"group": crd.Spec.Group, "kind": crd.Spec.Names.Kind, "version": v.Name}})
	}
	docs = append(docs, map[string]any{
		"schema": "olm.bundle", "name": csvName(r.Version), "package": Package, "image": r.BundleImage,
		"properties": properties,
		"relatedImages": []any{
			map[string]any{"name": "", "image": r.BundleImage},
			map[string]any{"name": "manager", "image": r.Image},
		},
	})
	var b bytes.Buffer
	for _, d := range docs {
		y, err := marshal(d)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

func csvName(v string) string { return Package + ".v" + v }

func kustomize(dir string) ([]*unstructured.Unstructured, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	b, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// Decode splits a multi-document YAML stream into objects.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}

func objectsOf(us []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, 0, len(us))
	for _, u := range us {
		out = append(out, u.Object)
	}
	return out
}

func convert(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// marshalObject writes a typed object without the fields a typed
// round-trip adds but a manifest should not carry (creationTimestamp: null,
// an empty status).
func marshalObject(obj any) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u, "status")
	// Zero values of struct fields without omitempty in the API types.
	unstructured.RemoveNestedField(u, "spec", "cleanup")
	unstructured.RemoveNestedField(u, "spec", "apiservicedefinitions")
	deps, _, _ := unstructured.NestedSlice(u, "spec", "install", "spec", "deployments")
	for _, d := range deps {
		if m, ok := d.(map[string]any); ok {
			unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
			unstructured.RemoveNestedField(m, "spec", "strategy")
		}
	}
	_ = unstructured.SetNestedSlice(u, deps, "spec", "install", "spec", "deployments")
	return marshal(u)
}

func marshal(v any) ([]byte, error) { return yaml.Marshal(v) }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

const csvDescription = `The WebApp operator runs stateless web applications. A WebApp names an image, a number of
replicas and the resources of each pod; the operator creates and owns a Deployment and a Service
for it, optionally waits for a database Service (spec.dbRef), and reports Ready, Reconciling and
Stalled conditions (kstatus).

It is the example operator of [reconcilekit](https://github.com/reconcilekit/reconcilekit), a
toolkit for controller-runtime reconcilers: server-side apply with ownership, conditions,
finalizers and self-managed webhook certificates.

Under OLM the operator's admission webhooks (defaulting and validation of WebApps) use the
certificate OLM issues; the operator needs nothing else installed.`

// icon is the package's icon: a plain globe.
const icon = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64"><circle cx="32" cy="32" r="28" fill="#326ce5"/><path d="M4 32h56M32 4c-10 8-10 48 0 56M32 4c10 8 10 48 0 56" stroke="#fff" stroke-width="3" fill="none"/></svg>`
