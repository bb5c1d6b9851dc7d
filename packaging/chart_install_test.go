package packaging

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestChartInstallUpgradeUninstall installs the chart on a real API server
// the way docs/deploying.md does (namespace first, labelled for Pod Security
// "restricted", then `helm install webapp charts/webapp-operator -n
// webapp-system`), upgrades it with other values, and uninstalls it. The
// API server validates every object (schemas, RBAC references, webhook
// configurations); envtest runs no controllers and no kubelet, so the
// Deployment is stored but never rolled out, and nothing waits for it.
//
// After uninstall only the CRD is left: the chart templates it with
// helm.sh/resource-policy: keep (deleting a CRD deletes every WebApp); the
// docs say how to remove it.
func TestChartInstallUpgradeUninstall(t *testing.T) {
	needCluster(t)
	ctx := t.Context()
	c, err := client.New(cluster, client.Options{})
	require.NoError(t, err)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   releaseNS,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}
	require.NoError(t, client.IgnoreAlreadyExists(c.Create(ctx, ns)))

	// A WebApp CRD already in the cluster (the bundle test's, or one a
	// chart before 0.2 installed from crds/) is adopted by the release, as
	// docs/deploying.md says: Helm's ownership label and annotations.
	existing := &unstructured.Unstructured{}
	existing.SetAPIVersion("apiextensions.k8s.io/v1")
	existing.SetKind("CustomResourceDefinition")
	existing.SetName(crdName)
	if get(ctx, t, c, existing) != nil {
		adopt := fmt.Sprintf(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},"annotations":{"meta.helm.sh/release-name":%q,"meta.helm.sh/release-namespace":%q}}}`, releaseName, releaseNS)
		require.NoError(t, c.Patch(ctx, existing, client.RawPatch(types.MergePatchType, []byte(adopt))))
	}

	cfg := helmConfig(t, releaseNS)
	chart := loadChart(t)

	install := action.NewInstall(cfg)
	install.ReleaseName = releaseName
	install.Namespace = releaseNS
	// No waiting for readiness: envtest never rolls a Deployment out.
	install.WaitStrategy = kube.HookOnlyStrategy
	r, err := install.RunWithContext(ctx, chart, nil)
	require.NoError(t, err, "helm install")
	installed := r.(*releasev1.Release)
	assert.Equal(t, "deployed", string(installed.Info.Status))
	objs := decodeAll(t, []byte(installed.Manifest))
	require.Len(t, objs, 13, "templated objects, the CRD included")
	for _, o := range objs {
		got := get(ctx, t, c, o)
		if assert.NotNil(t, got, "%s is installed", key(o)) {
			assert.Equal(t, releaseName, got.GetLabels()["app.kubernetes.io/instance"], key(o))
		}
	}
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(crdName)
	require.NotNil(t, get(ctx, t, c, crd), "helm installed the CRD")

	// Upgrade: one replica, no metrics. The metrics roles leave the release
	// and Helm deletes them; the Deployment is updated in place.
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = releaseNS
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	r, err = upgrade.RunWithContext(ctx, releaseName, chart, map[string]any{
		"replicaCount": 1,
		"metrics":      map[string]any{"enabled": false},
	})
	require.NoError(t, err, "helm upgrade")
	upgraded := r.(*releasev1.Release)
	assert.Equal(t, 2, upgraded.Version)
	dep := get(ctx, t, c, find(t, objs, "Deployment", "webapp-controller-manager"))
	require.NotNil(t, dep)
	replicas, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
	assert.Equal(t, int64(1), replicas)
	for _, name := range []string{"webapp-metrics-auth-role", "webapp-metrics-reader"} {
		assert.Nil(t, get(ctx, t, c, find(t, objs, "ClusterRole", name)), "%s is removed by the upgrade", name)
	}

	uninstall := action.NewUninstall(cfg)
	uninstall.WaitStrategy = kube.HookOnlyStrategy
	_, err = uninstall.Run(releaseName)
	require.NoError(t, err, "helm uninstall")
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		assert.Nil(t, get(ctx, t, c, o), "%s is left after uninstall", key(o))
	}
	assert.NotNil(t, get(ctx, t, c, crd), "the CRD stays after uninstall (helm.sh/resource-policy: keep)")
	_, err = action.NewHistory(cfg).Run(releaseName)
	assert.ErrorContains(t, err, "not found", "no release record is left")
}

// helmConfig is the Helm action configuration for the envtest cluster,
// releases stored in Secrets (Helm's default driver).
func helmConfig(t *testing.T, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	flags.Namespace = &namespace
	cfg := action.NewConfiguration()
	require.NoError(t, cfg.Init(flags, namespace, "secret"))
	return cfg
}

// get reads o's current state, nil when it does not exist.
func get(ctx context.Context, t *testing.T, c client.Client, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(o.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(o), got)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err, "get %s", key(o))
	return got
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}
