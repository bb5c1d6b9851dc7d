package reconciler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// unlisted is a cache whose informers never finish their first list (no
// RBAC to list the kind, an API server that never answers).
type unlisted struct {
	cache.Cache
	gets atomic.Int32
}

func (u *unlisted) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	u.gets.Add(1)
	return neverSynced{}, nil
}

type neverSynced struct{ cache.Informer }

func (neverSynced) HasSynced() bool { return false }

// TestLazyWatchWaitsOnEachPassesContext: while one pass waits for a
// referenced kind's first list, another pass is not queued behind it: it
// gives up with its own context, and its error is not taken for an API
// server outage.
func TestLazyWatchWaitsOnEachPassesContext(t *testing.T) {
	objects := &unlisted{}
	l := &lazyWatch{objects: objects, obj: partialObject(corev1.SchemeGroupVersion.WithKind("Service"))}

	first, stop := context.WithCancel(context.Background())
	firstDone := make(chan error, 1)
	go func() { firstDone <- l.need(first) }()
	require.Eventually(t, func() bool { return objects.gets.Load() == 1 }, 10*time.Second, 5*time.Millisecond, "the first pass started the informer")

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	err := l.need(gone)
	require.Error(t, err, "a pass whose context is done gives up while the first still waits")
	assert.False(t, apierrors.IsTimeout(err) || IsAPIServerUnavailable(err), "not an outage: %v", err)
	select {
	case err := <-firstDone:
		t.Fatalf("the first pass stopped waiting on its own: %v", err)
	default:
	}
	stop()
	assert.Error(t, <-firstDone)
	assert.False(t, l.needed)
}
