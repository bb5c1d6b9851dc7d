package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
)

// TestServiceOfTheSameNameIsNotTakenOver: a team's own Service happens to
// have the name of a new WebApp. The operator, configured as main.go
// configures it (its cache holds only Services labelled as its own, so it
// never sees this one), must not take it over, since deleting the WebApp
// would then delete the Service: the WebApp stalls, naming the Service,
// and the Service is untouched.
func TestServiceOfTheSameNameIsNotTakenOver(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}
	require.NoError(t, env.Client.Create(ctx, theirs))
	startOperator(t, ns)
	require.NoError(t, env.Client.Create(ctx, &webappv2.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: ns}, Spec: webappv2.WebAppSpec{Image: "web:1"}}))

	var stalled *metav1.Condition
	require.Eventually(t, func() bool {
		app := &webappv2.WebApp{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "shop"}, app); err != nil {
			return false
		}
		stalled = conditions.Get(app, conditions.Stalled)
		return stalled != nil && stalled.Status == metav1.ConditionTrue
	}, 30*time.Second, 100*time.Millisecond, "the WebApp never stalled")
	assert.Equal(t, reconciler.ReasonAdoptionRefused, stalled.Reason)
	assert.Contains(t, stalled.Message, "Service "+ns+"/shop")

	live := &corev1.Service{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), live))
	assert.Equal(t, theirs.ResourceVersion, live.ResourceVersion, "untouched")
	assert.Empty(t, live.OwnerReferences)
}
