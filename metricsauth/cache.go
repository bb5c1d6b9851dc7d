package metricsauth

import (
	"sync"
	"time"
)

// maxEntries bounds each cache: tokens are chosen by whoever connects, so an
// unbounded cache would let a client grow the operator's heap at will.
const maxEntries = 4096

// ttlCache is a map whose entries expire, bounded by maxEntries.
type ttlCache[V any] struct {
	now     func() time.Time
	mu      sync.Mutex
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	value   V
	expires time.Time
}

func newTTLCache[V any](now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{now: now, entries: map[string]ttlEntry[V]{}}
}

// get returns the value under key unless it is absent or expired.
func (c *ttlCache[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put stores value under key for ttl. A full cache first drops its expired
// entries and, if none had expired, all of them: a flood of new keys costs
// later requests a review each, never memory.
func (c *ttlCache[V]) put(key string, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxEntries {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxEntries {
			clear(c.entries)
		}
	}
	c.entries[key] = ttlEntry[V]{value: value, expires: now.Add(ttl)}
}
