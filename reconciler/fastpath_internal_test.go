package reconciler

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// TestStatusPatchSwitch: with fastpath.StatusPatch off (for the bench),
// the status write sends exactly the request client.MergeFrom with the
// optimistic lock sends, the whole object's merge patch (the pass's label
// and finalizer included, which the status subresource ignores); on, the
// patch of the status alone.
func TestStatusPatchSwitch(t *testing.T) {
	sent := func(t *testing.T) (patchType types.PatchType, data []byte) {
		t.Helper()
		scheme := runtime.NewScheme()
		require.NoError(t, testv1.AddToScheme(scheme))
		c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
			SubResourcePatch: func(_ context.Context, _ client.Client, sub string, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
				require.Equal(t, "status", sub)
				var err error
				patchType = patch.Type()
				data, err = patch.Data(obj)
				return err
			},
		})
		orig, obj := widgetPair()
		p := &pass[*testv1.Widget]{key: client.ObjectKeyFromObject(obj), obj: obj, orig: orig}
		_, err := p.writeStatus(t.Context(), c, c, prometheus.NewCounter(prometheus.CounterOpts{Name: "status_writes"}))
		require.NoError(t, err)
		require.NotNil(t, data, "no status write sent")
		return patchType, data
	}
	orig, obj := widgetPair()
	mergeFrom, err := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}).Data(obj)
	require.NoError(t, err)
	own, err := statusPatch{base: orig}.Data(obj)
	require.NoError(t, err)
	require.NotEqual(t, string(mergeFrom), string(own), "the test needs a pass whose two patches differ")

	t.Run("on", func(t *testing.T) {
		t.Cleanup(fastpath.Set(0))
		typ, data := sent(t)
		assert.Equal(t, types.MergePatchType, typ)
		assert.JSONEq(t, string(own), string(data))
	})
	t.Run("off", func(t *testing.T) {
		t.Cleanup(fastpath.Set(fastpath.StatusPatch))
		typ, data := sent(t)
		assert.Equal(t, types.MergePatchType, typ)
		assert.JSONEq(t, string(mergeFrom), string(data), "the request MergeFrom sends")
	})
}

// TestInternSwitch: with fastpath.Intern off (for the bench), the
// informers of a cache built by CacheOptions are the upstream ones, which
// intern nothing; on, they intern what they store.
func TestInternSwitch(t *testing.T) {
	informer := func() toolscache.SharedIndexInformer {
		return CacheOptions(cache.Options{}).NewInformer(&toolscache.ListWatch{}, &corev1.Service{}, 0, toolscache.Indexers{})
	}
	restore := fastpath.Set(0)
	_, interned := informer().(internedInformer)
	assert.True(t, interned, "on: the informer interns")
	restore()

	t.Cleanup(fastpath.Set(fastpath.Intern))
	_, interned = informer().(internedInformer)
	assert.False(t, interned, "off: the informer is NewInformer's own")
}

// TestUnknownFastPathFailsNew: a variable that names an unknown fast path
// fails New with an error that names the variable and its value (run in
// a child process, whose environment has it from the start).
func TestUnknownFastPathFailsNew(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnknownFastPathChild$", "-test.short", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fastpath.Env+"=interning")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestUnknownFastPathChild")
}

func TestUnknownFastPathChild(t *testing.T) {
	if os.Getenv(fastpath.Env) == "" {
		t.Skip("run by TestUnknownFastPathFailsNew")
	}
	_, err := New[*testv1.Widget](nil, Options[*testv1.Widget]{Name: "widgets"})
	assert.EqualError(t, err, `reconciler: RECONCILEKIT_FASTPATHS_OFF="interning": unknown fast path "interning" `+
		`(want a comma-separated list of statuspatch,verdicts,intern,createonly)`)
}
