//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What OLM does with an operator bundle, for bundle_install_test.go, which
// installs examples/webapp/bundle without OLM: everything is derived from
// the bundle's manifests (the ClusterServiceVersion's install strategy and
// webhookdefinitions, the CRDs, the other manifests) the way OLM's
// StrategyDeploymentInstaller derives it
// (operator-lifecycle-manager/pkg/controller/install), with deterministic
// names where OLM generates them.

// olmWebhookCertDir is where OLM mounts the webhook serving certificate it
// issues (Secret <deployment>-service-cert, keys tls.crt and tls.key) into
// every container of a Deployment that has webhookdefinitions:
// controller-runtime's default certificate directory.
const olmWebhookCertDir = "/tmp/k8s-webhook-server/serving-certs"

// crdGVK is the CustomResourceDefinition kind (the e2e module does not
// import apiextensions' types).
var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// olmFieldOwner is the field manager of everything the emulation applies.
const olmFieldOwner = "olm-emulation"

// olmBundle is a bundle's manifests/ directory, parsed.
type olmBundle struct {
	csv  *v1alpha1.ClusterServiceVersion
	crds []*unstructured.Unstructured
	// others are the remaining manifests (ClusterRoles, Services, ...),
	// which OLM creates as they are, namespaced ones in the install
	// namespace.
	others []*unstructured.Unstructured
}

// loadBundle reads every YAML document in dir/manifests.
func loadBundle(dir string) (*olmBundle, error) {
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("bundle %s: no manifests/*.yaml (run make bundle)", dir)
	}
	b := &olmBundle{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if obj == nil {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			switch u.GetKind() {
			case v1alpha1.ClusterServiceVersionKind:
				if b.csv != nil {
					return nil, fmt.Errorf("bundle %s: two ClusterServiceVersions", dir)
				}
				b.csv = &v1alpha1.ClusterServiceVersion{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, b.csv); err != nil {
					return nil, fmt.Errorf("%s: %w", f, err)
				}
			case "CustomResourceDefinition":
				b.crds = append(b.crds, u)
			default:
				b.others = append(b.others, u)
			}
		}
	}
	if b.csv == nil {
		return nil, fmt.Errorf("bundle %s: no ClusterServiceVersion", dir)
	}
	if s := b.csv.Spec.InstallStrategy.StrategyName; s != v1alpha1.InstallStrategyNameDeployment {
		return nil, fmt.Errorf("bundle %s: install strategy %q, want %q", dir, s, v1alpha1.InstallStrategyNameDeployment)
	}
	return b, nil
}

// deployment returns the install strategy's only Deployment (the WebApp
// bundle has one; several would need one process or Deployment each).
func (b *olmBundle) deployment() (v1alpha1.StrategyDeploymentSpec, error) {
	ds := b.csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	if len(ds) != 1 {
		return v1alpha1.StrategyDeploymentSpec{}, fmt.Errorf("CSV %s: %d deployments in the install strategy, want 1", b.csv.Name, len(ds))
	}
	return ds[0], nil
}

// managerContainer returns the Deployment's operator container: the one
// its kubectl.kubernetes.io/default-container annotation names, or the
// only one.
func managerContainer(ds v1alpha1.StrategyDeploymentSpec) (corev1.Container, error) {
	cs := ds.Spec.Template.Spec.Containers
	if name := ds.Spec.Template.Annotations["kubectl.kubernetes.io/default-container"]; name != "" {
		for _, c := range cs {
			if c.Name == name {
				return c, nil
			}
		}
		return corev1.Container{}, fmt.Errorf("deployment %s: default container %q does not exist", ds.Name, name)
	}
	if len(cs) != 1 {
		return corev1.Container{}, fmt.Errorf("deployment %s: %d containers and no default-container annotation", ds.Name, len(cs))
	}
	return cs[0], nil
}

// ownerLabels are the labels OLM puts on what it creates for a CSV
// (ownerutil.OwnerLabel); the uninstall check lists by them.
func (b *olmBundle) ownerLabels(namespace string) map[string]string {
	return map[string]string{
		"olm.owner":           b.csv.Name,
		"olm.owner.kind":      v1alpha1.ClusterServiceVersionKind,
		"olm.owner.namespace": namespace,
	}
}

// rbac returns what OLM creates from the install strategy's permissions
// and clusterPermissions: each ServiceAccount named there, a Role and
// RoleBinding (in namespace) per permissions entry, a ClusterRole and
// ClusterRoleBinding per clusterPermissions entry. OLM generates the
// names; these are <csv>-<i> and <csv>-cluster-<i>. Nothing else: OLM also
// binds system:auth-delegator and extension-apiserver-authentication-reader
// for a Deployment with webhooks, which this leaves out, so the operator
// runs with the bundle's own RBAC only.
func (b *olmBundle) rbac(namespace string) []client.Object {
	labels := b.ownerLabels(namespace)
	meta := func(name, ns string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	var out []client.Object
	accounts := map[string]bool{}
	account := func(name string) {
		if !accounts[name] {
			accounts[name] = true
			out = append(out, &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(name, namespace)})
		}
	}
	spec := b.csv.Spec.InstallStrategy.StrategySpec
	for _, ds := range spec.DeploymentSpecs {
		account(serviceAccountOf(ds))
	}
	for i, p := range spec.Permissions {
		account(p.ServiceAccountName)
		name := fmt.Sprintf("%s-%d", b.csv.Name, i)
		out = append(out,
			&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(name, namespace), Rules: p.Rules},
			&rbacv1.RoleBinding{
				TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(name, namespace),
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: namespace}},
			})
	}
	for i, p := range spec.ClusterPermissions {
		account(p.ServiceAccountName)
		name := fmt.Sprintf("%s-cluster-%d", b.csv.Name, i)
		out = append(out,
			&rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: meta(name, ""), Rules: p.Rules},
			&rbacv1.ClusterRoleBinding{
				TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: meta(name, ""),
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: namespace}},
			})
	}
	return out
}

// serviceAccountOf is the ServiceAccount a Deployment's pods run as
// ("default" when unset, as OLM and the apiserver assume).
func serviceAccountOf(ds v1alpha1.StrategyDeploymentSpec) string {
	if sa := ds.Spec.Template.Spec.ServiceAccountName; sa != "" {
		return sa
	}
	return "default"
}

// otherManifests returns the bundle's other manifests as OLM creates them:
// namespaced ones in namespace, all with the owner labels.
func (b *olmBundle) otherManifests(namespace string, namespaced func(*unstructured.Unstructured) (bool, error)) ([]client.Object, error) {
	var out []client.Object
	for _, o := range b.others {
		o := o.DeepCopy()
		ok, err := namespaced(o)
		if err != nil {
			return nil, err
		}
		if ok {
			o.SetNamespace(namespace)
		}
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		for k, v := range b.ownerLabels(namespace) {
			labels[k] = v
		}
		o.SetLabels(labels)
		out = append(out, o)
	}
	return out, nil
}

// olmServiceName is the Service OLM creates for a Deployment with
// webhookdefinitions (install.ServiceName): <deployment>-service, with the
// dots of the Deployment's name replaced (WebhookDescription.DomainName).
func olmServiceName(d v1alpha1.WebhookDescription) string { return d.DomainName() + "-service" }

// olmServicePort is the Service port OLM opens for a webhookdefinition:
// named and numbered after containerPort (default 443), to targetPort
// (default: containerPort).
func olmServicePort(d v1alpha1.WebhookDescription) corev1.ServicePort {
	port := int32(443)
	if d.ContainerPort > 0 {
		port = d.ContainerPort
	}
	p := corev1.ServicePort{Name: strconv.Itoa(int(port)), Port: port, TargetPort: intstr.FromInt32(port)}
	if d.TargetPort != nil {
		p.TargetPort = *d.TargetPort
	}
	return p
}

// olmDeployment returns what OLM creates for a Deployment with
// webhookdefinitions (StrategyDeploymentInstaller.installCertRequirements):
// the Service <deployment>-service with a port per definition, selecting
// the Deployment's pods; the Secret <service>-cert holding cert's serving
// pair; and the Deployment from the install strategy, with that Secret
// mounted in every container at /apiserver.local.config/certificates
// (apiserver.crt, apiserver.key) and at olmWebhookCertDir (tls.crt,
// tls.key), as OLM mounts them.
func (b *olmBundle) olmDeployment(ds v1alpha1.StrategyDeploymentSpec, namespace string, cert *olmCertificate) []client.Object {
	labels := b.ownerLabels(namespace)
	service := ds.Name + "-service"
	var ports []corev1.ServicePort
	for _, d := range b.csv.Spec.WebhookDefinitions {
		if p := olmServicePort(d); d.DeploymentName == ds.Name && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	secret := &corev1.Secret{
		TypeMeta:   typeMeta("v1", "Secret"),
		ObjectMeta: metav1.ObjectMeta{Name: service + "-cert", Namespace: namespace, Labels: labels},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": cert.certPEM, "tls.key": cert.keyPEM},
	}
	svc := &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: namespace, Labels: labels},
		Spec:       corev1.ServiceSpec{Ports: ports, Selector: ds.Spec.Selector.MatchLabels},
	}
	spec := ds.Spec.DeepCopy()
	pod := &spec.Template.Spec
	for _, v := range []struct{ name, path, crt, key string }{
		{"apiservice-cert", "/apiserver.local.config/certificates", "apiserver.crt", "apiserver.key"},
		{"webhook-cert", olmWebhookCertDir, "tls.crt", "tls.key"},
	} {
		pod.Volumes = append(pod.Volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret.Name,
			Items:      []corev1.KeyToPath{{Key: "tls.crt", Path: v.crt}, {Key: "tls.key", Path: v.key}},
		}}})
		for i := range pod.Containers {
			pod.Containers[i].VolumeMounts = append(pod.Containers[i].VolumeMounts, corev1.VolumeMount{Name: v.name, MountPath: v.path})
		}
	}
	depLabels := map[string]string{}
	for k, v := range ds.Label {
		depLabels[k] = v
	}
	for k, v := range labels {
		depLabels[k] = v
	}
	dep := &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: namespace, Labels: depLabels},
		Spec:       *spec,
	}
	return []client.Object{secret, svc, dep}
}

// webhookEndpoint says where the apiserver sends a webhookdefinition's
// requests: nil for OLM's own choice (the Service), or a URL.
type webhookEndpoint func(d v1alpha1.WebhookDescription) *string

// webhookConfigurations returns the admission webhook configurations OLM
// creates for the CSV's Mutating- and ValidatingAdmissionWebhook
// definitions, one configuration per definition, named after its
// generateName (OLM uses it as a generateName prefix), built with
// operator-framework/api's own GetMutatingWebhook/GetValidatingWebhook (as
// OLM does), for an AllNamespaces OperatorGroup (no namespaceSelector).
// endpoint, when it returns a URL, replaces the Service reference.
func (b *olmBundle) webhookConfigurations(namespace string, caPEM []byte, endpoint webhookEndpoint) ([]client.Object, error) {
	var out []client.Object
	for _, d := range b.csv.Spec.WebhookDefinitions {
		meta := metav1.ObjectMeta{Name: d.GenerateName, Labels: b.ownerLabels(namespace)}
		meta.Labels["olm.webhook-description-generate-name"] = d.GenerateName
		config := func(cc *admissionregistrationv1.WebhookClientConfig) {
			if url := endpoint(d); url != nil {
				*cc = admissionregistrationv1.WebhookClientConfig{URL: url, CABundle: caPEM}
			}
		}
		switch d.Type {
		case v1alpha1.MutatingAdmissionWebhook:
			w := d.GetMutatingWebhook(namespace, nil, caPEM)
			config(&w.ClientConfig)
			out = append(out, &admissionregistrationv1.MutatingWebhookConfiguration{
				TypeMeta: typeMeta("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"), ObjectMeta: meta,
				Webhooks: []admissionregistrationv1.MutatingWebhook{w},
			})
		case v1alpha1.ValidatingAdmissionWebhook:
			w := d.GetValidatingWebhook(namespace, nil, caPEM)
			config(&w.ClientConfig)
			out = append(out, &admissionregistrationv1.ValidatingWebhookConfiguration{
				TypeMeta: typeMeta("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"), ObjectMeta: meta,
				Webhooks: []admissionregistrationv1.ValidatingWebhook{w},
			})
		case v1alpha1.ConversionWebhook:
			// conversion: set on the CRDs (setConversion)
		default:
			return nil, fmt.Errorf("webhookdefinition %s: unknown type %q", d.GenerateName, d.Type)
		}
	}
	return out, nil
}

// setConversion does what OLM does for each ConversionWebhook definition
// (createOrUpdateConversionWebhook): on every CRD it names in
// conversionCRDs (which the CSV must own), spec.conversion becomes
// strategy Webhook with the definition's Service (or endpoint's URL), path
// (default "/"), the CA, and its admissionReviewVersions as
// conversionReviewVersions. It reads and updates each CRD through c, and
// returns the names of the CRDs it changed.
func (b *olmBundle) setConversion(ctx context.Context, c client.Client, namespace string, caPEM []byte, endpoint webhookEndpoint) ([]string, error) {
	owned := map[string]bool{}
	for _, o := range b.csv.Spec.CustomResourceDefinitions.Owned {
		owned[o.Name] = true
	}
	var changed []string
	for _, d := range b.csv.Spec.WebhookDefinitions {
		if d.Type != v1alpha1.ConversionWebhook {
			continue
		}
		if len(d.ConversionCRDs) == 0 {
			return nil, fmt.Errorf("conversion webhookdefinition %s names no conversionCRDs", d.GenerateName)
		}
		path := "/"
		if d.WebhookPath != nil {
			path = *d.WebhookPath
		}
		clientConfig := map[string]any{
			"service": map[string]any{"namespace": namespace, "name": olmServiceName(d), "path": path, "port": int64(d.ContainerPort)},
		}
		if url := endpoint(d); url != nil {
			clientConfig = map[string]any{"url": *url}
		}
		clientConfig["caBundle"] = base64.StdEncoding.EncodeToString(caPEM)
		versions := make([]any, 0, len(d.AdmissionReviewVersions))
		for _, v := range d.AdmissionReviewVersions {
			versions = append(versions, v)
		}
		for _, name := range d.ConversionCRDs {
			if !owned[name] {
				return nil, fmt.Errorf("conversion webhookdefinition %s: the CSV does not own CRD %s", d.GenerateName, name)
			}
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(crdGVK)
			if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
				return nil, err
			}
			if p, _, _ := unstructured.NestedBool(crd.Object, "spec", "preserveUnknownFields"); p {
				return nil, fmt.Errorf("CRD %s: preserveUnknownFields must be false for a conversion webhook", name)
			}
			crd.Object["spec"].(map[string]any)["conversion"] = map[string]any{
				"strategy": "Webhook",
				"webhook":  map[string]any{"clientConfig": clientConfig, "conversionReviewVersions": versions},
			}
			if err := c.Update(ctx, crd, client.FieldOwner(olmFieldOwner)); err != nil {
				return nil, fmt.Errorf("CRD %s: setting the conversion webhook: %w", name, err)
			}
			changed = append(changed, name)
		}
	}
	return changed, nil
}

// olmCertificate is what OLM issues for a Deployment with
// webhookdefinitions: a CA (the caBundle of every webhook) and a serving
// certificate signed by it for <service>.<namespace> and
// <service>.<namespace>.svc, plus any extra IPs (the host-process
// deviation: 127.0.0.1).
type olmCertificate struct {
	caPEM, certPEM, keyPEM []byte
}

func newOLMCertificate(hosts []string, ips []net.IP) (*olmCertificate, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "olm-emulation-ca", Organization: []string{"e2e"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0], Organization: []string{"e2e"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: hosts, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &olmCertificate{
		caPEM:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// writeTo writes tls.crt and tls.key into dir, as OLM's Secret volume
// presents them.
func (c *olmCertificate) writeTo(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), c.certPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "tls.key"), c.keyPEM, 0o600)
}

// hostProcess describes how the CSV's container runs as a host process:
// on 127.0.0.1, with free ports.
type hostProcess struct {
	webhookPort, probePort, metricsPort int
	certDir                             string // where OLM's certificate was written
	kubeconfig                          string // stands in for the pod's ServiceAccount token
}

// hostArgs returns the container's args for a host process. Every flag is
// kept as the CSV has it, except these, which name host resources:
//   - --health-probe-bind-address, --metrics-bind-address (unless "0")
//     and --webhook-port: 127.0.0.1 and free ports (a pod has its own
//     network namespace; the host does not);
//   - --webhook-cert-dir, when it is OLM's mount path: the directory the
//     test wrote OLM's certificate to.
//
// and two flags are added: --webhook-host=127.0.0.1 (bind loopback only)
// and --kubeconfig (a pod gets its ServiceAccount's token mounted). The
// returned changes list every difference, for the test log.
func hostArgs(args []string, h hostProcess) (out, changes []string, err error) {
	seen := map[string]bool{}
	for _, a := range args {
		name, value, hasValue := strings.Cut(a, "=")
		if !strings.HasPrefix(name, "-") {
			return nil, nil, fmt.Errorf("arg %q: positional args are not supported", a)
		}
		name = strings.TrimLeft(name, "-")
		seen[name] = true
		replace := func(v string) {
			out = append(out, "--"+name+"="+v)
			changes = append(changes, fmt.Sprintf("%s -> --%s=%s", a, name, v))
		}
		switch {
		case name == "health-probe-bind-address":
			replace("127.0.0.1:" + strconv.Itoa(h.probePort))
		case name == "metrics-bind-address" && value != "0":
			replace("127.0.0.1:" + strconv.Itoa(h.metricsPort))
		case name == "webhook-port":
			replace(strconv.Itoa(h.webhookPort))
		case name == "webhook-host":
			replace("127.0.0.1")
		case name == "webhook-cert-dir" && hasValue && value == olmWebhookCertDir:
			replace(h.certDir)
		case name == "kubeconfig":
			return nil, nil, fmt.Errorf("arg %q: the CSV names a kubeconfig", a)
		default:
			out = append(out, a)
		}
	}
	add := func(a string) {
		out = append(out, a)
		changes = append(changes, "+ "+a)
	}
	// The binary's defaults bind all interfaces on fixed ports.
	if !seen["health-probe-bind-address"] {
		add("--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(h.probePort))
	}
	if !seen["metrics-bind-address"] {
		add("--metrics-bind-address=127.0.0.1:" + strconv.Itoa(h.metricsPort))
	}
	if !seen["webhook-port"] {
		add("--webhook-port=" + strconv.Itoa(h.webhookPort))
	}
	if !seen["webhook-host"] {
		add("--webhook-host=127.0.0.1")
	}
	add("--kubeconfig=" + h.kubeconfig)
	return out, changes, nil
}

// hostEnv resolves the container's env for a host process: literal
// values as they are, the Downward API's metadata.namespace and
// metadata.name as the pod would see them. Other sources (Secrets,
// ConfigMaps, resources) are an error: nothing here would resolve them.
func hostEnv(c corev1.Container, namespace, podName string) ([]string, error) {
	var out []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out = append(out, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			out = append(out, e.Name+"="+namespace)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			out = append(out, e.Name+"="+podName)
		default:
			return nil, fmt.Errorf("env %s: only values and the namespace and name fieldRefs are supported", e.Name)
		}
	}
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %s: envFrom is not supported", c.Name)
	}
	return out, nil
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
