package reconciler

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// horizon remembers, per key, the newest resourceVersion of the object that
// a pass saw from the apiserver itself (its own write's answer, or a re-read
// after a conflict) while the informer cache still held an older copy.
//
// Without it a pass can act on the past. A pass whose finalizer patch
// conflicts re-reads the object, finds it deleting, runs cleanup and removes
// the finalizer; the object is gone. The cache has not caught up yet, so the
// next pass (woken by the cleanup's own writes) reads the older, live copy
// and runs the steps again: whatever cleanup undid (a registry entry, an
// external resource) is created again for an object that no longer exists,
// and nothing will ever clean it up. The same holds, less dramatically, for
// any pass that reads a copy older than the status it wrote itself.
//
// A pass that finds its cached copy behind reads the object from the
// apiserver instead (one uncached GET, only then) and acts on that. Skipping
// the pass until the cache catches up, as Kubernetes' own controllers do
// since v1.36 (KEP-5647), would need a requeue, which resets the error
// backoff and makes every test that drives passes by hand wait for the
// cache. controller-runtime has no such guard.
//
// An entry lives while the cache is behind it: a pass that reads a cached
// copy at least as new, or finds the object gone from the cache, drops it.
// An object whose last event never comes (a predicate dropping deletions)
// would keep its entry, so entries older than horizonTTL are swept.
type horizon struct {
	mu        sync.Mutex
	seen      map[types.NamespacedName]seenCopy
	lastSweep time.Time
}

// seenCopy is the newest copy of an object a pass saw.
type seenCopy struct {
	resourceVersion string
	// finalized are the finalizers the reconciler removes (its own and the
	// retired ones) that the pass left a deleting object without. When
	// the pass removed the last finalizer, the object is gone and the
	// answer carries the resourceVersion the pass read, so a cached copy
	// at that version that still lists one of them is behind too.
	finalized []string
	at        time.Time
}

// horizonTTL bounds how long an entry is kept: a cache that far behind is
// broken, and the entry would only keep costing a GET per pass.
const horizonTTL = 10 * time.Minute

func newHorizon() *horizon { return &horizon{seen: map[types.NamespacedName]seenCopy{}} }

// behind reports whether cached is older than what a pass already saw of
// it, and that newer resourceVersion. Incomparable resourceVersions (not an
// etcd-backed apiserver) are never behind.
func (h *horizon) behind(key types.NamespacedName, cached client.Object) (string, bool) {
	h.mu.Lock()
	seen, ok := h.seen[key]
	h.mu.Unlock()
	if !ok {
		return "", false
	}
	cmp, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), seen.resourceVersion)
	if err != nil {
		return "", false
	}
	return seen.resourceVersion, cmp < 0 ||
		(cmp == 0 && slices.ContainsFunc(seen.finalized, func(name string) bool { return controllerutil.ContainsFinalizer(cached, name) }))
}

// record ends a pass that read cachedRV from the cache and left the object
// as last (finalized: see seenCopy): remembered when the pass got ahead of
// the cache, forgotten otherwise.
func (h *horizon) record(key types.NamespacedName, cachedRV string, last client.Object, finalized []string) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.lastSweep) > time.Minute {
		h.lastSweep = now
		for k, e := range h.seen {
			if now.Sub(e.at) > horizonTTL {
				delete(h.seen, k)
			}
		}
	}
	cmp, err := resourceversion.CompareResourceVersion(last.GetResourceVersion(), cachedRV)
	if len(finalized) > 0 || (err == nil && cmp > 0) {
		h.seen[key] = seenCopy{resourceVersion: last.GetResourceVersion(), finalized: finalized, at: now}
		return
	}
	delete(h.seen, key)
}

// forget drops key: the cache says the object is gone.
func (h *horizon) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.seen, key)
}
