package ownership

import (
	"sync"
	"time"
)

// uncachedSet holds the objects the API server has and the cache did not
// (a create-only apply was refused): Apply reads them from the API server
// until the cache holds them, so the refusal is paid once. An entry leaves
// when the cache holds the object or the API server no longer has it; one
// that neither happens to (its owner deleted, or the object outside the
// cache's label selector and no longer applied) leaves uncachedTTL after
// it was added, swept when the set reaches uncachedSweep: the set stays
// bounded by the objects a controller touches in that time. An entry that
// expires while still needed costs one refused create-only apply, which
// adds it again.
type uncachedSet struct {
	mu    sync.Mutex
	added map[string]time.Time
	now   func() time.Time // time.Now; tests set it
}

const (
	uncachedTTL   = 10 * time.Minute
	uncachedSweep = 256
)

// has reports whether id is in the set.
func (s *uncachedSet) has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.added[id]
	return ok
}

// add puts id in the set, first sweeping the expired entries if the set is
// large.
func (s *uncachedSet) add(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if s.added == nil {
		s.added = map[string]time.Time{}
	}
	if len(s.added) >= uncachedSweep {
		for k, at := range s.added {
			if now.Sub(at) > uncachedTTL {
				delete(s.added, k)
			}
		}
	}
	s.added[id] = now
}

// remove takes id out of the set.
func (s *uncachedSet) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.added, id)
}

// size is the number of entries.
func (s *uncachedSet) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.added)
}

func (s *uncachedSet) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}
