package ownership

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/openapi"
)

// blockingOpenAPI is an apiserver whose /openapi/v3 answers only when
// released, and then with an error; it ignores its callers' contexts (as an
// openapi.Client without them does), so a fetch goes on until released.
type blockingOpenAPI struct {
	calls   atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (b *blockingOpenAPI) Paths() (map[string]openapi.GroupVersion, error) {
	b.calls.Add(1)
	b.started <- struct{}{}
	<-b.release
	return nil, errors.New("unavailable")
}

// Lookups of one group version share one fetch; a caller whose context ends
// returns while the fetch it shared goes on for the others; a lookup in
// another group version starts its own fetch at once.
func TestSchemaLookupsShareOneFetchPerGroupVersion(t *testing.T) {
	api := &blockingOpenAPI{started: make(chan struct{}, 4), release: make(chan struct{})}
	s := NewSchemaCache(api)
	s.Timeout = time.Hour
	lookup := func(ctx context.Context, gvk schema.GroupVersionKind) <-chan error {
		out := make(chan error, 1)
		go func() {
			_, err := s.lookup(ctx, gvk)
			out <- err
		}()
		return out
	}
	apps := deploymentGVK.GroupVersion()
	waiters := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		if f, ok := s.flights[apps]; ok {
			return f.waiters
		}
		return 0
	}

	ctx, cancel := context.WithCancel(t.Context())
	first := lookup(ctx, deploymentGVK)
	<-api.started
	second := lookup(t.Context(), apps.WithKind("ReplicaSet"))
	require.Eventually(t, func() bool { return waiters() == 2 }, 10*time.Second, time.Millisecond, "the ReplicaSet's lookup joins the Deployment's fetch")

	other := lookup(t.Context(), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
	<-api.started // core/v1's own fetch, although apps/v1's has not ended

	cancel()
	require.ErrorIs(t, <-first, context.Canceled)
	assert.Equal(t, 1, waiters(), "the fetch goes on for the ReplicaSet")
	select {
	case err := <-second:
		t.Fatalf("the ReplicaSet's lookup ended before its fetch: %v", err)
	default:
	}

	close(api.release)
	assert.ErrorContains(t, <-second, "unavailable")
	assert.ErrorContains(t, <-other, "unavailable")
	assert.Equal(t, int32(2), api.calls.Load(), "one fetch per group version")
}

// TestBuiltinSchemasDoNotKeepEveryKind: the parsed schemas of every built-in
// kind (0.8 MiB) are freed once the kinds in use are cut from them, and a
// kind first compared afterwards is still found.
func TestBuiltinSchemasDoNotKeepEveryKind(t *testing.T) {
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	_, ok := builtinSchema(deployment)
	require.True(t, ok)
	runtime.GC()
	assert.Nil(t, builtin.conv.Value(), "the parsed schemas of every built-in kind are still held after a GC")

	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "Service"},
		deployment,
	} {
		ts, ok := builtinSchema(gvk)
		require.True(t, ok, "%s", gvk)
		assert.NotEmpty(t, ts.schema.Types, "%s", gvk)
	}
	_, ok = builtinSchema(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	assert.False(t, ok, "not a built-in kind")
}
