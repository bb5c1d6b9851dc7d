package sharding

import (
	"slices"
	"testing"
	"time"
)

func all(n int, v bool) []bool {
	s := make([]bool, n)
	for i := range s {
		s[i] = v
	}
	return s
}

func only(n int, rs ...int) []bool {
	s := make([]bool, n)
	for _, r := range rs {
		s[r] = true
	}
	return s
}

func states(t *table) []rangeState { return slices.Clone(t.state) }

// A range is owned only once its claim was persisted by an earlier write
// and no other live lease claims it.
func TestTableAcquiresOnlyAPersistedUncontestedClaim(t *testing.T) {
	tb := newTable(2)
	now := time.Unix(0, 0)
	tb.step(round{fresh: true, assigned: only(2, 0), claimedElsewhere: only(2, 0), now: now})
	if got := states(tb); !slices.Equal(got, []rangeState{acquiring, free}) {
		t.Fatalf("after assignment: %v", got)
	}
	// Not persisted yet: however free the range, no ownership.
	tb.step(round{fresh: true, assigned: only(2, 0), claimedElsewhere: all(2, false), now: now})
	if tb.state[0] != acquiring {
		t.Fatalf("owned a range whose claim was never written: %v", tb.state[0])
	}
	tb.persisted = tb.claims()
	// Persisted, but the old owner still claims it (draining).
	tb.step(round{fresh: true, assigned: only(2, 0), claimedElsewhere: only(2, 0), now: now})
	if tb.state[0] != acquiring {
		t.Fatalf("owned a range another live lease claims: %v", tb.state[0])
	}
	changes := tb.step(round{fresh: true, assigned: only(2, 0), claimedElsewhere: all(2, false), now: now.Add(3 * time.Second)})
	if tb.state[0] != owned || len(changes) != 1 || changes[0].waited != 3*time.Second || !changes[0].at.Equal(now.Add(3*time.Second)) {
		t.Fatalf("want owned after 3s, at the round's time, got %v %+v", tb.state[0], changes)
	}
}

// An owned range that is reassigned drains: no new passes, and it is
// unclaimed only when its passes have ended.
func TestTableDrainsBeforeReleasing(t *testing.T) {
	tb := newTable(1)
	tb.state[0], tb.persisted[0], tb.inflight[0] = owned, true, 1
	tb.step(round{fresh: true, assigned: all(1, false), claimedElsewhere: all(1, false)})
	if tb.state[0] != draining || !tb.claims()[0] {
		t.Fatalf("reassigned with a pass in flight: %v, claimed %v", tb.state[0], tb.claims()[0])
	}
	tb.step(round{fresh: true, assigned: all(1, false), claimedElsewhere: all(1, false)})
	if tb.state[0] != draining {
		t.Fatal("released with a pass in flight")
	}
	tb.inflight[0] = 0
	tb.step(round{fresh: true, assigned: all(1, false), claimedElsewhere: all(1, false)})
	if tb.state[0] != free || tb.claims()[0] {
		t.Fatalf("drained: %v, claimed %v", tb.state[0], tb.claims()[0])
	}
}

// A replica that is not fresh (its renewals fail) gives up everything it
// owns and every claim it was acquiring, even if still assigned.
func TestTableNotFreshGivesUpEverything(t *testing.T) {
	tb := newTable(3)
	tb.state = []rangeState{owned, acquiring, owned}
	tb.inflight[2] = 1
	tb.step(round{fresh: false, assigned: all(3, true), claimedElsewhere: all(3, false)})
	if got := states(tb); !slices.Equal(got, []rangeState{free, free, draining}) {
		t.Fatalf("not fresh: %v", got)
	}
	// Fresh again: a drained range is acquired afresh, never resumed.
	tb.inflight[2] = 0
	tb.step(round{fresh: true, assigned: all(3, true), claimedElsewhere: all(3, false)})
	if got := states(tb); !slices.Equal(got, []rangeState{acquiring, acquiring, free}) {
		t.Fatalf("fresh again: %v", got)
	}
}
