package packaging

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// olmNamespace is where the operator is installed: OLM's global operator
// namespace, whose OperatorGroup targets all namespaces (the only install
// mode the CSV supports).
const olmNamespace = "operators"

// TestBundleInstalls does with the bundle what OLM does with it, on a real
// API server, and checks that the API server accepts every object and that
// the operator gets the access it needs, and no more:
//
//   - the CRDs are created and become Established, and every alm-examples
//     object passes the CRD's schema (a server-side dry run);
//   - the ServiceAccount, a Role and RoleBinding per permissions entry (in
//     the operator's namespace), a ClusterRole and ClusterRoleBinding per
//     clusterPermissions entry, and the bundle's other manifests;
//   - the Deployment from the install strategy, with the certificate volume
//     OLM adds at the path the operator's --webhook-cert-dir names;
//   - the webhook Service and configurations OLM derives from the
//     webhookdefinitions (operator-framework/api's own helpers).
//
// Then SubjectAccessReviews for the operator's ServiceAccount: allowed
// everything the operator does, denied Secrets and webhook configurations
// (OLM manages the certificates).
//
// envtest runs no controllers, so the operator's pods are never scheduled;
// the operator itself runs in the e2e suite (config/local). That the
// sample becomes Ready with the bundle's operator is not tested here.
func TestBundleInstalls(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(cluster, client.Options{Scheme: scheme})
	require.NoError(t, err)

	bundle, err := manifests.GetBundleFromDir(bundleDir)
	require.NoError(t, err)
	csv := bundle.CSV
	strategy := csv.Spec.InstallStrategy.StrategySpec
	apply := func(o client.Object) {
		t.Helper()
		o.SetManagedFields(nil)
		require.NoError(t, c.Patch(ctx, o, client.Apply, client.FieldOwner("olm-emulation"), client.ForceOwnership), //nolint:staticcheck // SSA of typed objects
			"%T %s is accepted", o, o.GetName())
		cleanupClusterScoped(t, c, o)
	}

	for _, crd := range bundle.V1CRDs {
		crd := crd.DeepCopy()
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		apply(crd)
		waitEstablished(ctx, t, c, crd.Name)
	}
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: olmNamespace}})))

	var examples []map[string]any
	require.NoError(t, json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples))
	require.NotEmpty(t, examples)
	for _, e := range examples {
		u := &unstructured.Unstructured{Object: e}
		u.SetNamespace("default")
		assert.NoError(t, c.Create(ctx, u, client.DryRunAll), "alm-examples %s passes the CRD's schema", u.GetName())
	}

	// RBAC as OLM creates it (its names are generated; these are stable).
	saNames := map[string]bool{}
	for i, p := range strategy.Permissions {
		saNames[p.ServiceAccountName] = true
		name := fmt.Sprintf("%s-%d", csv.Name, i)
		apply(&rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: olmNamespace}, Rules: p.Rules})
		apply(&rbacv1.RoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: olmNamespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: olmNamespace}},
		})
	}
	for i, p := range strategy.ClusterPermissions {
		saNames[p.ServiceAccountName] = true
		name := fmt.Sprintf("%s-cluster-%d", csv.Name, i)
		apply(&rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules})
		apply(&rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: olmNamespace}},
		})
	}
	for sa := range saNames {
		apply(&corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: olmNamespace}})
	}
	for _, o := range bundle.Objects {
		if o.GetKind() == v1alpha1.ClusterServiceVersionKind || o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		o := o.DeepCopy()
		if o.GetKind() != "ClusterRole" {
			o.SetNamespace(olmNamespace)
		}
		require.NoError(t, c.Patch(ctx, o, client.Apply, client.FieldOwner("olm-emulation"), client.ForceOwnership), "%s %s", o.GetKind(), o.GetName()) //nolint:staticcheck // SSA of unstructured
		cleanupClusterScoped(t, c, o)
	}

	require.Len(t, strategy.DeploymentSpecs, 1)
	ds := strategy.DeploymentSpecs[0]
	dep := &appsv1.Deployment{
		TypeMeta:   typeMeta("apps/v1", "Deployment"),
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name, Namespace: olmNamespace, Labels: ds.Label},
		Spec:       *ds.Spec.DeepCopy(),
	}
	require.True(t, saNames[dep.Spec.Template.Spec.ServiceAccountName], "the Deployment runs as the ServiceAccount the permissions are for")
	// OLM's webhook certificate: a Secret <deployment>-service-cert,
	// mounted at controller-runtime's certificate directory.
	pod := &dep.Spec.Template.Spec
	pod.Volumes = append(pod.Volumes, corev1.Volume{Name: "webhook-cert", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: ds.Name + "-service-cert", Items: []corev1.KeyToPath{{Key: "tls.crt", Path: "tls.crt"}, {Key: "tls.key", Path: "tls.key"}}},
	}})
	for i := range pod.Containers {
		pod.Containers[i].VolumeMounts = append(pod.Containers[i].VolumeMounts, corev1.VolumeMount{Name: "webhook-cert", MountPath: "/tmp/k8s-webhook-server/serving-certs"})
	}
	assert.Contains(t, pod.Containers[0].Args, "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs", "the operator reads OLM's certificate")
	apply(dep)

	// v1's and v2's mutating and validating webhooks, and the conversion
	// webhook.
	require.Len(t, csv.Spec.WebhookDefinitions, 5)
	for _, w := range csv.Spec.WebhookDefinitions {
		require.Equal(t, ds.Name, w.DeploymentName)
		apply(&corev1.Service{
			TypeMeta:   typeMeta("v1", "Service"),
			ObjectMeta: metav1.ObjectMeta{Name: w.DomainName() + "-service", Namespace: olmNamespace},
			Spec: corev1.ServiceSpec{
				Selector: ds.Spec.Selector.MatchLabels,
				Ports:    []corev1.ServicePort{{Name: "443", Port: w.ContainerPort, TargetPort: ptrOr(w.TargetPort, intstr.FromInt32(443))}},
			},
		})
		// OLM injects its CA here; any bytes do for the API server, and no
		// call gets as far as TLS (the Service has no endpoints).
		ca := []byte("placeholder")
		switch w.Type {
		case v1alpha1.MutatingAdmissionWebhook:
			apply(&admissionregistrationv1.MutatingWebhookConfiguration{
				TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
				ObjectMeta: metav1.ObjectMeta{Name: w.GenerateName},
				Webhooks:   []admissionregistrationv1.MutatingWebhook{w.GetMutatingWebhook(olmNamespace, nil, ca)},
			})
		case v1alpha1.ValidatingAdmissionWebhook:
			apply(&admissionregistrationv1.ValidatingWebhookConfiguration{
				TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
				ObjectMeta: metav1.ObjectMeta{Name: w.GenerateName},
				Webhooks:   []admissionregistrationv1.ValidatingWebhook{w.GetValidatingWebhook(olmNamespace, nil, ca)},
			})
		case v1alpha1.ConversionWebhook:
			// OLM sets the CRD's spec.conversion to its Service (e2e's
			// TestBundleInstall does it as OLM does); here the CRD only
			// has to be the one named.
			assert.Equal(t, []string{crdName}, w.ConversionCRDs)
			assert.Equal(t, "/convert", *w.WebhookPath)
		default:
			t.Errorf("unexpected webhook type %s", w.Type)
		}
	}
	// The webhooks are wired: a WebApp now goes to the operator's Service,
	// which has no endpoints here, so admission fails closed.
	u := &unstructured.Unstructured{Object: examples[0]}
	u.SetNamespace("default")
	err = c.Create(ctx, u, client.DryRunAll)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "failed calling webhook", "the WebApp is sent to the bundle's webhooks")

	sa := fmt.Sprintf("system:serviceaccount:%s:%s", olmNamespace, pod.ServiceAccountName)
	ra := func(verb, group, resource, sub, ns, name string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
	}
	for _, a := range []authorizationv1.ResourceAttributes{
		ra("watch", "apps.example.com", "webapps", "", "", ""),
		ra("patch", "apps.example.com", "webapps", "status", "shop", "web"),
		ra("update", "apps.example.com", "webapps", "finalizers", "shop", "web"),
		ra("create", "apps", "deployments", "", "shop", ""),
		ra("patch", "", "services", "", "shop", "web"),
		ra("create", "events.k8s.io", "events", "", "shop", ""),
		ra("create", "coordination.k8s.io", "leases", "", olmNamespace, ""),
		ra("update", "coordination.k8s.io", "leases", "", olmNamespace, "webapp-operator.apps.example.com"),
		// The route registry: its shards by name, the legacy map by name
		// (migrated away), and list/watch in the operator's namespace.
		ra("patch", "", "configmaps", "", olmNamespace, "webapp-registry-00"),
		ra("patch", "", "configmaps", "", olmNamespace, "webapp-registry-15"),
		ra("patch", "", "configmaps", "", olmNamespace, "webapp-registry"),
		ra("delete", "", "configmaps", "", olmNamespace, "webapp-registry"),
		ra("list", "", "configmaps", "", olmNamespace, ""),
		ra("create", "authentication.k8s.io", "tokenreviews", "", "", ""),
		// The storage version migration.
		ra("get", "apiextensions.k8s.io", "customresourcedefinitions", "", "", crdName),
		ra("patch", "apiextensions.k8s.io", "customresourcedefinitions", "status", "", crdName),
	} {
		assert.True(t, allowed(ctx, t, c, sa, a), "%s may %s %s/%s %s in %q", sa, a.Verb, a.Resource, a.Subresource, a.Name, a.Namespace)
	}
	for _, a := range []authorizationv1.ResourceAttributes{
		ra("get", "", "secrets", "", olmNamespace, "webapp-webhook-server-cert"),
		ra("patch", "", "configmaps", "", olmNamespace, "webapp-registry-16"),
		ra("patch", "", "configmaps", "", olmNamespace, "other"),
		ra("list", "", "configmaps", "", "shop", ""),
		ra("create", "", "secrets", "", olmNamespace, ""),
		ra("update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", "vwebapp-v1.kb.io"),
		ra("delete", "apps.example.com", "webapps", "", "shop", "web"),
		ra("patch", "coordination.k8s.io", "leases", "", "shop", "webapp-operator.apps.example.com"),
		// The Rotator's caBundle injection: OLM's job.
		ra("update", "apiextensions.k8s.io", "customresourcedefinitions", "", "", crdName),
		ra("get", "apiextensions.k8s.io", "customresourcedefinitions", "", "", "other.example.com"),
	} {
		assert.False(t, allowed(ctx, t, c, sa, a), "%s may not %s %s %s in %q", sa, a.Verb, a.Resource, a.Name, a.Namespace)
	}
}

// cleanupClusterScoped deletes o after the test if it is cluster-scoped
// (not the CRD, shared with the chart's test): the chart installs objects of
// the same names (webapp-metrics-reader), which Helm refuses to adopt, and
// webhook configurations outlive their namespace.
func cleanupClusterScoped(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	if o.GetNamespace() != "" || o.GetObjectKind().GroupVersionKind().Kind == "CustomResourceDefinition" {
		return
	}
	t.Cleanup(func() {
		assert.NoError(t, client.IgnoreNotFound(c.Delete(context.Background(), o)), "deleting %s", o.GetName())
	})
}

func waitEstablished(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &crd); err != nil {
			return false, err
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "CRD %s becomes Established", name)
}

func allowed(ctx context.Context, t *testing.T, c client.Client, user string, a authorizationv1.ResourceAttributes) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}, ResourceAttributes: &a,
	}}
	require.NoError(t, c.Create(ctx, sar))
	return sar.Status.Allowed
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

func ptrOr(p *intstr.IntOrString, def intstr.IntOrString) intstr.IntOrString {
	if p == nil {
		return def
	}
	return *p
}
