package reconciler

import (
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
// controller-runtime has no such guard (the informer is the only source
// across passes); Kubernetes' own controllers added one for the same reason
// (KEP-5647). Entries live only while the cache is behind: the pass that
// reads a copy at least as new, or finds the object gone, drops the entry.
type horizon struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]seenCopy
}

// seenCopy is the newest copy of an object a pass saw.
type seenCopy struct {
	resourceVersion string
	// finalized is our finalizer when the pass left the object deleting
	// without it. When the pass removed it and it was the last one, the
	// object is gone and the answer carries the resourceVersion the pass
	// read, so a cached copy at that version that still lists it is behind
	// too.
	finalized string
}

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
		(cmp == 0 && seen.finalized != "" && controllerutil.ContainsFinalizer(cached, seen.finalized))
}

// record ends a pass that read readRV from the cache and left the object
// as last (finalized: see seenCopy): remembered
// when the pass got ahead of the cache, forgotten otherwise.
func (h *horizon) record(key types.NamespacedName, readRV string, last client.Object, finalized string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmp, err := resourceversion.CompareResourceVersion(last.GetResourceVersion(), readRV)
	if finalized != "" || (err == nil && cmp > 0) {
		h.seen[key] = seenCopy{resourceVersion: last.GetResourceVersion(), finalized: finalized}
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

// cacheLagRequeue is when a pass skipped for a lagging cache runs again if
// no watch event wakes it first. Caches lag by milliseconds, or by seconds
// under load; a second is rarely needed and never a hot loop.
const cacheLagRequeue = time.Second
