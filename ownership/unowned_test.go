package ownership_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/ownership"
)

// NotOwned applies without a controller reference, in any namespace, with
// the same compare-then-write; it releases an object the owner controlled,
// and still refuses one another owner controls.
func TestNotOwned(t *testing.T) {
	f := setup(t)
	archive := func() *corev1ac.ConfigMapApplyConfiguration { return configMap("archive", map[string]string{"k": "v"}) }
	require.Equal(t, ownership.Created, f.apply(t, archive(), ownership.NotOwned()))
	cm := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "archive"}, cm), "the namespace defaults to the owner's")
	assert.Empty(t, cm.OwnerReferences)
	f.requireUnchanged(t, archive(), ownership.NotOwned())

	other := env.Namespace(t)
	require.Equal(t, ownership.Created, f.apply(t, corev1ac.ConfigMap("archive", other), ownership.NotOwned()),
		"no owner reference has to cross namespaces")

	f.apply(t, configMap("was-owned", nil))
	f.apply(t, configMap("was-owned", nil), ownership.NotOwned())
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "was-owned"}, cm))
	assert.Empty(t, cm.OwnerReferences, "an object the owner controlled is released")

	theirs := f.widget(t, "theirs")
	require.NoError(t, env.Client.Create(f.ctx, f.typedConfigMap("controlled", nil,
		*metav1.NewControllerRef(theirs, testv1.GroupVersion.WithKind("Widget")))))
	_, err := f.a.Apply(f.ctx, f.owner, configMap("controlled", nil), ownership.NotOwned())
	var foreign *ownership.ForeignControllerError
	assert.True(t, errors.As(err, &foreign), "%v", err)

	clusterOwner := &corev1.Namespace{}
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Name: f.ns}, clusterOwner))
	_, err = f.a.Apply(f.ctx, clusterOwner, configMap("archive", nil), ownership.NotOwned())
	assert.ErrorContains(t, err, "metadata.namespace: Required value: owner is cluster-scoped")
}

// OwnerLabel labels an owned object on creation, labels an existing one on
// its next apply (drift), then compares equal; NotOwned ignores it.
func TestOwnerLabel(t *testing.T) {
	f := setup(t)
	label := ownership.OwnerLabel("example.com/range", "7")
	cm := &corev1.ConfigMap{}
	require.Equal(t, ownership.Created, f.apply(t, configMap("new", nil), label))
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "new"}, cm))
	assert.Equal(t, "7", cm.Labels["example.com/range"])
	f.requireUnchanged(t, configMap("new", nil), label)

	f.apply(t, configMap("older", nil))
	require.Equal(t, ownership.Updated, f.apply(t, configMap("older", nil), label), "an object applied without the label gets it")
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "older"}, cm))
	assert.Equal(t, "7", cm.Labels["example.com/range"])

	f.apply(t, configMap("shared", nil), ownership.NotOwned(), label)
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "shared"}, cm))
	assert.NotContains(t, cm.Labels, "example.com/range")
}
