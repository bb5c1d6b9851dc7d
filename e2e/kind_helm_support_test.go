//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// namespaceLeftovers lists what is left in the release's namespace after
// the uninstall: the operator's runtime objects (its certificate Secret,
// Lease and route registry ConfigMaps; and what every namespace has), and
// anything else, which should not be there.
func namespaceLeftovers(ctx context.Context, c client.Client) (runtime, unexpected []string, err error) {
	in := client.InNamespace(helmNamespace)
	expected := func(kind, name string) bool {
		switch kind {
		case "Secret":
			return name == helmPrefix+"webhook-server-cert"
		case "ConfigMap":
			return name == "kube-root-ca.crt" || strings.HasPrefix(name, legacyRegistryName+"-")
		case "Lease":
			return name == leaseName
		case "ServiceAccount":
			return name == "default"
		}
		return false
	}
	lists := []struct {
		kind string
		list client.ObjectList
	}{
		{"Secret", &corev1.SecretList{}}, {"ConfigMap", &corev1.ConfigMapList{}}, {"Lease", &coordinationv1.LeaseList{}},
		{"ServiceAccount", &corev1.ServiceAccountList{}}, {"Pod", &corev1.PodList{}}, {"Service", &corev1.ServiceList{}},
		{"Deployment", &appsv1.DeploymentList{}}, {"ReplicaSet", &appsv1.ReplicaSetList{}},
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list, in); err != nil {
			return nil, nil, err
		}
		items, err := meta.ExtractList(l.list)
		if err != nil {
			return nil, nil, err
		}
		for _, item := range items {
			o, ok := item.(client.Object)
			if !ok {
				return nil, nil, fmt.Errorf("%T is not an object", item)
			}
			kind := l.kind
			what := kind + " " + o.GetName()
			if expected(kind, o.GetName()) && o.GetAnnotations()[helmReleaseName] == "" && o.GetLabels()[helmManagedBy] != "Helm" {
				runtime = append(runtime, what)
			} else {
				unexpected = append(unexpected, what)
			}
		}
	}
	return runtime, unexpected, nil
}

// teardown removes whatever of the release is left, also after a failure:
// the WebApp first while the chart's operator can still finalize it, the
// release, then its namespace. Each part is done even if one before failed.
func (hi *helmInstall) teardown(ctx context.Context) error {
	var errs []error
	if hi.app.Name != "" {
		errs = append(errs, deleteWebAppAndWait(ctx, hi.c, hi.app, 2*time.Minute))
	}
	if hi.helm != "" {
		_, err := hi.run(ctx, "uninstall", helmRelease, "-n", helmNamespace, "--ignore-not-found", "--wait", "--timeout", helmTimeout)
		errs = append(errs, err)
	}
	errs = append(errs, deleteNamespaceAndWait(ctx, hi.c, helmNamespace, 3*time.Minute))
	return errors.Join(errs...)
}

// deleteWebAppAndWait deletes a WebApp and waits until its finalizer has
// run and it is gone; a WebApp that is not there is fine.
func deleteWebAppAndWait(ctx context.Context, c client.Client, key types.NamespacedName, timeout time.Duration) error {
	w := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := c.Delete(ctx, w); err != nil {
		return client.IgnoreNotFound(err)
	}
	state := ""
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, key, w)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		state = fmt.Sprintf("finalizers %v (error %v)", w.Finalizers, err)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("WebApp %s not finalized and deleted: %w; last: %s", key, err, state)
	}
	return nil
}

// deleteNamespaceAndWait deletes a namespace and waits until it is gone; a
// namespace that is not there is fine.
func deleteNamespaceAndWait(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(ctx, ns); err != nil {
		return client.IgnoreNotFound(err)
	}
	state := ""
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Name: name}, ns)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		state = fmt.Sprintf("phase %s conditions %v (error %v)", ns.Status.Phase, ns.Status.Conditions, err)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s not deleted: %w; last: %s", name, err, state)
	}
	return nil
}

// restoreMetadata puts the labels and annotations of an object back as
// they were in before: keys added since are removed, changed ones get
// their old value. It also drops the field managers that were not there
// (Helm's, which would otherwise co-own the CRD's fields and conflict
// with a later server-side apply that changes them).
func restoreMetadata(ctx context.Context, c client.Client, before *unstructured.Unstructured) error {
	now := &unstructured.Unstructured{}
	now.SetGroupVersionKind(before.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), now); err != nil {
		return client.IgnoreNotFound(err)
	}
	diff := func(was, is map[string]string) map[string]any {
		out := map[string]any{}
		for k, v := range is {
			if old, ok := was[k]; !ok {
				out[k] = nil
			} else if old != v {
				out[k] = old
			}
		}
		for k, v := range was {
			if _, ok := is[k]; !ok {
				out[k] = v
			}
		}
		return out
	}
	patch := func(m map[string]any) error {
		b, err := json.Marshal(map[string]any{"metadata": m})
		if err != nil {
			return err
		}
		if err := c.Patch(ctx, now, client.RawPatch(types.MergePatchType, b)); err != nil {
			return fmt.Errorf("%s %s: %w", before.GetKind(), before.GetName(), err)
		}
		return nil
	}
	if l, a := diff(before.GetLabels(), now.GetLabels()), diff(before.GetAnnotations(), now.GetAnnotations()); len(l) > 0 || len(a) > 0 {
		if err := patch(map[string]any{"labels": l, "annotations": a}); err != nil {
			return err
		}
	}
	known := map[string]bool{}
	for _, e := range before.GetManagedFields() {
		known[e.Manager] = true
	}
	kept := slices.DeleteFunc(now.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return !known[e.Manager] })
	if len(kept) > 0 && len(kept) < len(now.GetManagedFields()) {
		return patch(map[string]any{"managedFields": kept})
	}
	return nil
}

// mergePatch is v as a JSON merge patch.
func mergePatch(t *testing.T, v any) client.Patch {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return client.RawPatch(types.MergePatchType, b)
}

// chartMeta is what the test reads of a chart's Chart.yaml.
type chartMeta struct {
	Version string `json:"version"`
}

// chartVersion reads the version in dir/Chart.yaml.
func chartVersion(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "Chart.yaml"))
	if err != nil {
		return "", err
	}
	var m chartMeta
	if err := yaml.Unmarshal(data, &m); err != nil {
		return "", fmt.Errorf("%s/Chart.yaml: %w", dir, err)
	}
	if m.Version == "" {
		return "", fmt.Errorf("%s/Chart.yaml has no version", dir)
	}
	return m.Version, nil
}

// chartReplicas reads replicaCount in dir/values.yaml.
func chartReplicas(dir string) (int32, error) {
	data, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		return 0, err
	}
	var v struct {
		ReplicaCount *int32 `json:"replicaCount"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		return 0, fmt.Errorf("%s/values.yaml: %w", dir, err)
	}
	if v.ReplicaCount == nil {
		return 0, fmt.Errorf("%s/values.yaml has no replicaCount", dir)
	}
	return *v.ReplicaCount, nil
}

// nextChartVersion is the chart's next release, as a maintainer would
// cut it.
type nextChartVersion struct {
	dir, version string
}

// nextChart copies the chart in dir (version) to dst as its next version:
// the patch number bumped in Chart.yaml, and a pod annotation carrying the
// new version added to values.yaml's podAnnotations, a change to the
// operator's pod template, so the upgrade rolls the operator.
func nextChart(dir, version, dst string) (nextChartVersion, error) {
	parts := strings.Split(version, ".")
	patch, err := strconv.Atoi(parts[len(parts)-1])
	if len(parts) != 3 || err != nil {
		return nextChartVersion{}, fmt.Errorf("chart version %q: want MAJOR.MINOR.PATCH", version)
	}
	next := nextChartVersion{dir: dst, version: fmt.Sprintf("%s.%s.%d", parts[0], parts[1], patch+1)}
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		return next, fmt.Errorf("copying the chart: %w", err)
	}
	edit := func(file, old, new string) error {
		path := filepath.Join(dst, file)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(data, []byte(old)); n != 1 {
			return fmt.Errorf("%s: %q occurs %d times, want once", file, strings.TrimSpace(old), n)
		}
		return os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644)
	}
	if err := edit("Chart.yaml", "\nversion: "+version+"\n", "\nversion: "+next.version+"\n"); err != nil {
		return next, err
	}
	if err := edit("values.yaml", "\npodAnnotations: {}\n", fmt.Sprintf("\npodAnnotations:\n  %s: %q\n", helmUpgradeAnnotation, next.version)); err != nil {
		return next, err
	}
	if v, err := chartVersion(dst); err != nil || v != next.version {
		return next, fmt.Errorf("the copied chart's version is %q (%v), want %s", v, err, next.version)
	}
	return next, nil
}

// decodeManifests decodes a multi-document YAML stream, such as `helm
// template`'s output, skipping empty documents.
func decodeManifests(s string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(s), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if obj != nil {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// describeObject is "Kind namespace/name", for messages.
func describeObject(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// restarts sums a pod's container restarts.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}
