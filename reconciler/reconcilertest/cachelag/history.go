package cachelag

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// lagKind is one lagged GroupVersionKind.
type lagKind struct {
	lag      Lag
	gvk      schema.GroupVersionKind
	scheme   *runtime.Scheme
	resource schema.GroupResource

	// ready is closed once the informer handler has synced or its
	// registration failed (err).
	ready chan struct{}
	err   error

	// objects holds each object's versions, oldest first; guarded by
	// Cache.mu.
	objects map[types.NamespacedName][]version
	// readKeys and listed record what was read since the last
	// ForgetReads: objects by key, and Lists by namespace ("" for all); guarded
	// by Cache.mu.
	readKeys map[types.NamespacedName]bool
	listed   map[string]bool
}

// wasRead reports whether a read since the last ForgetReads asked for key.
func (k *lagKind) wasRead(key types.NamespacedName) bool {
	return k.readKeys[key] || k.listed[""] || k.listed[key.Namespace]
}

// version is one observed state of an object.
type version struct {
	rv       string
	observed time.Time
	gone     bool           // a tombstone: the object was deleted
	obj      map[string]any // nil for a tombstone
}

// after orders versions by resourceVersion; a tombstone with the
// resourceVersion of a live version (a delete noticed on a re-list) comes
// after it.
func (v version) after(w version) bool {
	c, _ := resourceversion.CompareResourceVersion(v.rv, w.rv)
	return c > 0 || c == 0 && v.gone && !w.gone
}

// observe records obj, an informer's object or a write's answer, as a
// version of its object; long ago means it counts as observed long before
// any Delay.
func (l *Cache) observe(k *lagKind, obj any, gone, longAgo bool) {
	m, err := toMap(k.gvk, obj)
	if err != nil {
		return
	}
	u := unstructured.Unstructured{Object: m}
	v := version{rv: u.GetResourceVersion(), gone: gone}
	now := l.now()
	if !longAgo {
		v.observed = now
	}
	if _, err := resourceversion.CompareResourceVersion(v.rv, v.rv); err != nil {
		return // cannot be ordered
	}
	if !gone {
		v.obj = m
	}
	key := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}

	l.mu.Lock()
	defer l.mu.Unlock()
	h := k.objects[key]
	if p := k.pick(h, now); p >= 0 && !v.after(h[p]) {
		// Seen already (the first observation counts), or older than what
		// reads return now: a late event must not take reads back.
		return
	}
	i := sort.Search(len(h), func(i int) bool { return !v.after(h[i]) })
	if i < len(h) && !h[i].after(v) {
		return // seen already; the first observation counts
	}
	h = append(h, version{})
	copy(h[i+1:], h[i:])
	h[i] = v
	k.objects[key] = h
	k.trim(key, now)
}

// pick returns the index of the version of h a read returns at now, or -1:
// the newest version at least VersionsBehind behind the newest one (the oldest
// known, if fewer are known) that was observed at least Delay ago.
func (k *lagKind) pick(h []version, now time.Time) int {
	for i := min(max(len(h)-1-k.lag.VersionsBehind, 0), len(h)-1); i >= 0; i-- {
		if now.Sub(h[i].observed) >= k.lag.Delay {
			return i
		}
	}
	return -1
}

// trim drops the versions older than the one a read returns now: reads
// never go back (observe refuses older versions), so those are never read
// again. A readable tombstone stays, so that a late event cannot bring the
// object back. Callers hold Cache.mu.
func (k *lagKind) trim(key types.NamespacedName, now time.Time) {
	h := k.objects[key]
	if i := k.pick(h, now); i > 0 {
		k.objects[key] = append(h[:0:0], h[i:]...)
	}
}
