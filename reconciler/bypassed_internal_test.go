package reconciler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// A released UID whose deletion event never reaches the handler (a
// predicate drops deletions, another finalizer keeps the object) is
// forgotten after releasedTTL, so the map does not grow with every
// deletion.
func TestReleasedUIDsAreForgotten(t *testing.T) {
	b := newBypassed[*testv1.Widget]()
	for i := range releasedSweep {
		b.releasing(types.UID(fmt.Sprint("old-", i)))(true)
	}
	for uid := range b.released {
		b.released[uid] = time.Now().Add(-releasedTTL - time.Second)
	}
	b.releasing("fresh")(true)
	b.releasing("failed")(false)
	assert.Equal(t, []types.UID{"fresh"}, keys(b.released))
	assert.True(t, b.wasReleased("fresh"))
	assert.False(t, b.wasReleased("fresh"), "its deletion event comes once")
}

func keys(m map[types.UID]time.Time) []types.UID {
	out := []types.UID{}
	for k := range m {
		out = append(out, k)
	}
	return out
}
