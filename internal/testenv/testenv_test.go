package testenv_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

// TestToolchain proves the envtest control plane built from source by
// `make tools` works: it is the pinned version, and objects (built-in and
// custom) can be created and read back.
func TestToolchain(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()

	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	require.NoError(t, err)
	v, err := dc.ServerVersion()
	require.NoError(t, err)
	assert.Equal(t, "v1.37.2", v.GitVersion, "kube-apiserver reports the pinned version (ldflags set by hack/tools.sh)")

	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns}, Data: map[string]string{"k": "v"}}
	require.NoError(t, env.Client.Create(ctx, cm))
	got := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(cm), got))
	assert.Equal(t, "v", got.Data["k"])

	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}, Spec: testv1.WidgetSpec{Size: 2}}
	require.NoError(t, env.Client.Create(ctx, w))
	w.Status.Note = "status subresource works"
	require.NoError(t, env.Client.Status().Update(ctx, w))
	gotW := &testv1.Widget{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(w), gotW))
	assert.Equal(t, int32(2), gotW.Spec.Size)
	assert.Equal(t, "status subresource works", gotW.Status.Note)
}
