package ownership

import (
	"fmt"
	"testing"
	"time"
)

// The set of objects read from the API server because the cache lacked
// them never lost an entry that neither the cache nor the API server
// settled (an owner deleted, an object outside the cache's selector no
// longer applied): it grew with every such object for the life of the
// process. Entries older than uncachedTTL go when the set is large;
// younger ones stay.
func TestUncachedSetForgetsOldEntries(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	s := &uncachedSet{now: func() time.Time { return now }}
	for i := range uncachedSweep {
		s.add(fmt.Sprintf("old-%d", i))
	}
	now = now.Add(uncachedTTL / 2)
	s.add("recent")
	if n := s.size(); n != uncachedSweep+1 {
		t.Fatalf("%d entries half a TTL later, want %d (nothing expired yet)", n, uncachedSweep+1)
	}
	now = now.Add(uncachedTTL/2 + time.Second)
	s.add("new")
	if n := s.size(); n != 2 || !s.has("recent") || !s.has("new") || s.has("old-0") {
		t.Errorf("after a TTL: %d entries, recent %v, new %v, old-0 %v; want only recent and new", n, s.has("recent"), s.has("new"), s.has("old-0"))
	}
}
