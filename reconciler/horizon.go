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
// after a conflict) while the informer cache still held an older copy. A
// pass whose cached copy is behind it reads the object from the apiserver
// instead (one uncached GET, only then), so it never acts on the past, such
// as a live copy of an object whose cleanup already ran. An entry lives
// while the cache is behind it, at most horizonTTL. The design, and why
// the pass reads rather than skips: docs/reconciler.md, "Never behind an
// earlier pass".
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
				forgetKey(&h.seen, k)
			}
		}
	}
	cmp, err := resourceversion.CompareResourceVersion(last.GetResourceVersion(), cachedRV)
	if len(finalized) > 0 || (err == nil && cmp > 0) {
		h.seen[key] = seenCopy{resourceVersion: last.GetResourceVersion(), finalized: finalized, at: now}
		return
	}
	forgetKey(&h.seen, key)
}

// forget drops key: the cache says the object is gone.
func (h *horizon) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	forgetKey(&h.seen, key)
}

// caughtUp drops key's entry once the cache holds resourceVersion rv, at
// least as new as the entry: the watch event of the pass's own write,
// which starts no pass to drop it (see wakeupFilter), arrived. An entry
// with finalizers removed from a deleting object stays (see seenCopy).
func (h *horizon) caughtUp(key types.NamespacedName, rv string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen, ok := h.seen[key]
	if !ok || len(seen.finalized) > 0 {
		return
	}
	if cmp, err := resourceversion.CompareResourceVersion(rv, seen.resourceVersion); err == nil && cmp >= 0 {
		forgetKey(&h.seen, key)
	}
}
