package reconciler

import (
	"errors"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestOutagesReleaseOnlyWhatAnObservedOutageFailed drives the bookkeeping
// behind OutageRecovery: which keys a probe that finds the API server ready
// re-queues.
func TestOutagesReleaseOnlyWhatAnObservedOutageFailed(t *testing.T) {
	refused := &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	o := newOutages(nil)
	o.observe(key("before-start"), at(0), refused)
	assert.Empty(t, o.parked, "nothing is tracked unless the OutageRecovery source runs")
	o.running.Store(true)

	o.observe(key("outage"), at(1), refused)
	o.observe(key("own-error"), at(1), errors.New("bucket quota exceeded"))
	o.observe(key("terminal"), at(1), reconcile.TerminalError(refused))
	released, _, recovered := o.settle(nil, at(2))
	assert.Empty(t, released, "a probe that never saw the API server down releases nothing: the failure was not an outage it can vouch for")
	assert.False(t, recovered)

	_, waiting, _ := o.settle(errors.New("connection refused"), at(3))
	assert.Equal(t, 1, waiting)
	o.observe(key("during"), at(4), refused)
	o.observe(key("in-flight"), at(5), nil) // succeeded from the cache
	released, _, recovered = o.settle(nil, at(6))
	assert.True(t, recovered)
	assert.ElementsMatch(t, []types.NamespacedName{key("outage"), key("during")}, released)

	// A pass that started in the outage and failed after the recovery was
	// hit by it; one that started after it fails for its own reasons.
	o.observe(key("late"), at(5), refused)
	o.observe(key("after"), at(7), refused)
	released, waiting, recovered = o.settle(nil, at(8))
	assert.False(t, recovered)
	assert.Equal(t, []types.NamespacedName{key("late")}, released)
	assert.Equal(t, 1, waiting, "the key that failed after the recovery keeps its backoff")

	// The next outage releases it too; a success forgets a key.
	o.observe(key("gone"), at(9), refused)
	o.observe(key("gone"), at(10), nil)
	o.settle(errors.New("etcd down"), at(11))
	released, _, _ = o.settle(nil, at(12))
	assert.Equal(t, []types.NamespacedName{key("after")}, released)
	assert.Empty(t, o.parked)
}

// A server that is starting answers before it is ready: 403 until its
// authorizer has synced. A key whose pass failed that way while the probe
// saw the server down is still the outage's, and is released with the
// others (chaos 2: such keys kept the backoff of every failure before).
func TestOutagesKeepKeysThatFailDifferentlyWhileTheServerIsDown(t *testing.T) {
	refused := &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "app", errors.New("RBAC: not synced"))
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	t0 := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	o := newOutages(nil)
	o.running.Store(true)
	o.observe(key("app"), at(0), refused)
	o.settle(errors.New("connection refused"), at(1))
	o.observe(key("app"), at(2), forbidden)
	o.observe(key("first-failure"), at(2), forbidden)
	released, _, recovered := o.settle(nil, at(3))
	assert.True(t, recovered)
	assert.ElementsMatch(t, []types.NamespacedName{key("app"), key("first-failure")}, released)

	// With the server ready, a 403 is the object's own: it keeps its backoff.
	o.observe(key("app"), at(4), forbidden)
	assert.Empty(t, o.parked)
}

// A /readyz that flaps released every parked key at each flap, its backoff
// forgotten: the keys retried at the flap's pace against a server that
// could not serve them. A key is released at most once per
// releaseInterval; between, it retries on its own backoff and stays parked
// for the first recovery after the interval.
func TestOutagesReleaseAKeyOncePerIntervalWhileTheServerFlaps(t *testing.T) {
	refused := &url.Error{Op: "Patch", URL: "https://127.0.0.1:6443/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	key := types.NamespacedName{Namespace: "ns", Name: "flapped"}
	t0 := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	o := newOutages(nil)
	o.running.Store(true)

	flap := func(from time.Duration) []types.NamespacedName {
		o.observe(key, at(from), refused)
		o.settle(errors.New("readyz: etcd not ready"), at(from+time.Second))
		released, _, recovered := o.settle(nil, at(from+2*time.Second))
		assert.True(t, recovered, "a recovery at %v", from+2*time.Second)
		return released
	}
	assert.Equal(t, []types.NamespacedName{key}, flap(0), "the first recovery releases the key")
	for _, from := range []time.Duration{3 * time.Second, 6 * time.Second, 20 * time.Second} {
		assert.Empty(t, flap(from), "a recovery %v after the release forgets the key's backoff again", from-time.Second)
	}
	assert.Equal(t, 1, len(o.parked), "the key waits, parked, for a later recovery")
	assert.Equal(t, []types.NamespacedName{key}, flap(releaseInterval), "released again once the interval has passed")
}
