package ownership_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/ownership"
)

// zeroDeployment sets zero values the API server does not store, because
// the Go type cannot tell them from "not set": hostNetwork false, a
// container's stdin false and workingDir "", minReadySeconds 0.
func zeroDeployment() runtime.ApplyConfiguration {
	d := deployment("nginx:1.27", map[string]string{"app": "web"})
	d.Spec.WithMinReadySeconds(0)
	d.Spec.Template.Spec.WithHostNetwork(false)
	d.Spec.Template.Spec.Containers[0].WithStdin(false).WithWorkingDir("")
	return d
}

// zeroService sets publishNotReadyAddresses false and loadBalancerIP "".
func zeroService() runtime.ApplyConfiguration {
	s := service(port("http", 80))
	s.Spec.WithPublishNotReadyAddresses(false).WithLoadBalancerIP("")
	return s
}

// Zero values the server omits are not drift: once applied, the next pass
// writes nothing, although the live objects never show them.
func TestApplyZeroValuesTheServerOmitsConverge(t *testing.T) {
	f := setup(t)
	require.Equal(t, ownership.Created, f.apply(t, zeroDeployment()))
	require.Equal(t, ownership.Created, f.apply(t, zeroService()))

	// The premise: the server has none of them.
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	require.NoError(t, f.m.APIReader.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "web"}, live))
	podSpec, _, err := unstructured.NestedMap(live.Object, "spec", "template", "spec")
	require.NoError(t, err)
	assert.NotContains(t, podSpec, "hostNetwork")
	assert.NotContains(t, podSpec["containers"].([]any)[0], "stdin")
	assert.NotContains(t, podSpec["containers"].([]any)[0], "workingDir")
	assert.NotContains(t, live.Object["spec"], "minReadySeconds")
	live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Service"))
	require.NoError(t, f.m.APIReader.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "web"}, live))
	assert.NotContains(t, live.Object["spec"], "publishNotReadyAddresses")
	assert.NotContains(t, live.Object["spec"], "loadBalancerIP")

	for range 2 {
		f.requireUnchanged(t, zeroDeployment())
		f.requireUnchanged(t, zeroService())
	}
}

// A zero value still means that value: another writer's hostNetwork true or
// publishNotReadyAddresses true is drift, and is reset.
func TestApplyResetsAFieldToItsOmittedZeroValue(t *testing.T) {
	f := setup(t)
	require.Equal(t, ownership.Created, f.apply(t, zeroDeployment()))
	require.Equal(t, ownership.Created, f.apply(t, zeroService()))

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	f.editAs(t, other, dep, func() { dep.Spec.Template.Spec.HostNetwork = true })
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	f.editAs(t, other, svc, func() { svc.Spec.PublishNotReadyAddresses = true })
	f.waitForCache(t, dep, svc)

	f.c.Reset()
	assert.Equal(t, ownership.Updated, f.apply(t, zeroDeployment()))
	assert.Equal(t, ownership.Updated, f.apply(t, zeroService()))
	assert.Equal(t, 2, f.c.Mutations(), "%v", f.c.MutatingRequests())
	f.get(t, dep)
	f.get(t, svc)
	assert.False(t, dep.Spec.Template.Spec.HostNetwork)
	assert.False(t, svc.Spec.PublishNotReadyAddresses)
	f.requireUnchanged(t, zeroDeployment())
	f.requireUnchanged(t, zeroService())
}
