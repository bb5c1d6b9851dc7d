//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// TestInvariantsProgressSplitsTheOperatorFromTheRollout: a WebApp whose
// Deployment the operator applied but the cluster has not rolled out has
// the operator's part done, is not converged, and its violations still say
// so; once rolled out and Ready, it is converged.
func TestInvariantsProgressSplitsTheOperatorFromTheRollout(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, webappv1.AddToScheme(scheme))
	const ns, name = "chaos", "app-000"
	m := appModel{Image: "registry.example.com/chaos/app-000:v1", Replicas: 2}
	ctrl := true
	w := &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "uid-1", Generation: 3},
		Spec:       webappv1.WebAppSpec{Image: m.Image, Replicas: new(m.Replicas)},
		Status:     webappv1.WebAppStatus{ObservedGeneration: new(int64(3))},
	}
	owner := []metav1.OwnerReference{{APIVersion: "apps.example.com/v1", Kind: "WebApp", Name: name, UID: "uid-1", Controller: &ctrl}}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Generation: 1, OwnerReferences: owner},
		Spec: appsv1.DeploymentSpec{Replicas: new(m.Replicas), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: m.Image}}}}},
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owner}}
	shard := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: registryShard(ns, name), Namespace: operatorNamespace, Labels: map[string]string{registryLabel: "shard"}},
		Data:       map[string]string{ns + "." + name: fmt.Sprintf("http://%s.%s.svc:80", name, ns)},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(w, d, svc, shard).WithStatusSubresource(w, d).Build()
	iv := newInvariants(c, ns, map[string]appModel{name: m})
	ctx := context.Background()

	violations, progress, err := iv.check(ctx)
	require.NoError(t, err)
	assert.Equal(t, appProgress{applied: true}, progress[name], "applied, waiting for the rollout")
	assert.Len(t, violations, 2, "not rolled out, and not Ready: %v", violations)

	// The register step comes after the rollout: an entry missing while the
	// Deployment rolls out is the rollout's part, not the operator's.
	delete(shard.Data, ns+"."+name)
	require.NoError(t, c.Update(ctx, shard))
	violations, progress, err = iv.check(ctx)
	require.NoError(t, err)
	assert.Equal(t, appProgress{applied: true}, progress[name], "not registered before the rollout, by design")
	assert.Len(t, violations, 3, "not rolled out, not registered, and not Ready: %v", violations)
	shard.Data[ns+"."+name] = fmt.Sprintf("http://%s.%s.svc:80", name, ns)
	require.NoError(t, c.Update(ctx, shard))

	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}
	require.NoError(t, c.Status().Update(ctx, d))
	_, progress, err = iv.check(ctx)
	require.NoError(t, err)
	assert.Equal(t, appProgress{applied: true, rolledOut: true}, progress[name], "rolled out, the operator has not said Ready yet")

	w.Status.Ready, w.Status.ReadyReplicas = new(true), new(int32(2))
	meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: conditionReady, Status: metav1.ConditionTrue, Reason: "Current"})
	require.NoError(t, c.Status().Update(ctx, w))
	violations, progress, err = iv.check(ctx)
	require.NoError(t, err)
	assert.Empty(t, violations)
	assert.Equal(t, appProgress{applied: true, rolledOut: true, converged: true}, progress[name])

	// An operator's violation (an update lost) is not the rollout's.
	d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/chaos/app-000:v0"
	require.NoError(t, c.Update(ctx, d))
	_, progress, err = iv.check(ctx)
	require.NoError(t, err)
	assert.Equal(t, appProgress{}, progress[name])
}

// TestAwaitConvergenceTimesFromTheLastWrite: an app the workload wrote
// after the last fault is timed from that write as well as from the fault.
func TestAwaitConvergenceTimesFromTheLastWrite(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, webappv1.AddToScheme(scheme))
	const ns, name = "chaos", "app-000"
	m := appModel{Image: "registry.example.com/chaos/app-000:v1", Replicas: 1, DBRef: chaosMissingDB}
	// Waiting for its database, it needs neither Deployment nor Service.
	w := &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Generation: 1},
		Spec:       webappv1.WebAppSpec{Image: m.Image, Replicas: new(m.Replicas), DBRef: nonEmpty(m.DBRef)},
		Status: webappv1.WebAppStatus{ObservedGeneration: new(int64(1)), Conditions: []metav1.Condition{
			{Type: conditionReady, Status: metav1.ConditionFalse, Reason: "DatabaseNotFound"},
			{Type: webappv1.DatabaseReady, Status: metav1.ConditionFalse, Reason: "DatabaseNotFound"},
		}},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(w).Build()
	iv := newInvariants(c, ns, map[string]appModel{name: m})
	now := time.Now()
	lastFault, lastWrite := now.Add(-time.Hour), now.Add(-time.Minute)
	conv, err := iv.awaitConvergence(context.Background(), lastFault, map[string]time.Time{name: lastWrite}, time.Minute)
	require.NoError(t, err)
	require.Empty(t, conv.violations)
	require.Len(t, conv.perApp, 1)
	require.Len(t, conv.sinceWrite, 1)
	assert.GreaterOrEqual(t, conv.perApp[0], time.Hour, "from the last fault")
	assert.GreaterOrEqual(t, conv.sinceWrite[0], time.Minute, "from the last write")
	assert.Less(t, conv.sinceWrite[0], time.Hour, "from the last write, which came after the fault")
}
