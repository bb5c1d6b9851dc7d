package sharding

import "time"

// rangeState is where one range stands for this replica. The transitions,
// all made by table.step once per lease round, are
//
//	free      → acquiring  the range is assigned to this replica
//	acquiring → owned      its claim is in this replica's lease (a write that
//	                       succeeded before the read this step works on) and
//	                       no live lease of another replica claims it
//	acquiring → free       no longer assigned, or this replica is not fresh
//	owned     → draining   no longer assigned, leaving, or not fresh
//	draining  → free       no pass of the range is in flight
//
// Only owned takes new passes. Every state but free is claimed in the
// lease, so a range is claimed by its owner from before it was owned until
// after its last pass ended: that is what makes the acquire check safe.
type rangeState uint8

const (
	free rangeState = iota
	acquiring
	owned
	draining
)

func (s rangeState) String() string {
	return [...]string{"free", "acquiring", "owned", "draining"}[s]
}

// table is the handoff state machine of one replica: pure, driven by the
// Member's lease rounds, so its tests need no API server and no clock.
type table struct {
	state []rangeState
	// inflight counts the passes begun and not yet ended, by range.
	inflight []int
	// persisted is the set of ranges the last successful lease write
	// claimed (or the lease as read back, when a write's answer was lost).
	persisted []bool
	// assignedAt is when an acquiring range was first assigned, for the
	// handoff-wait metric.
	assignedAt []time.Time
}

func newTable(ranges int) *table {
	return &table{
		state:      make([]rangeState, ranges),
		inflight:   make([]int, ranges),
		persisted:  make([]bool, ranges),
		assignedAt: make([]time.Time, ranges),
	}
}

// round is what one lease round knows: whether this replica is fresh (its
// own lease renewed within the renew deadline and not leaving), which
// ranges the assignment gives it, and which ranges a live lease of another
// replica claims.
type round struct {
	fresh            bool
	assigned         []bool
	claimedElsewhere []bool
	now              time.Time
}

// transition is one range's change in a step, for logs and metrics.
type transition struct {
	rng      int
	from, to rangeState
	// waited is, on acquiring → owned, how long since the range was
	// assigned to this replica.
	waited time.Duration
	// at is the round's time (round.now): taken before the step, so
	// before any pass the new state lets begin.
	at time.Time
}

// step advances every range by at most one transition (draining ranges with
// nothing in flight go on to free at once) and returns what changed.
func (t *table) step(rd round) []transition {
	var changes []transition
	move := func(r int, to rangeState) {
		changes = append(changes, transition{rng: r, from: t.state[r], to: to, at: rd.now})
		t.state[r] = to
		if to == free {
			// Until a write says otherwise, an unclaimed range is not
			// persisted: a later acquire must write its claim anew.
			t.persisted[r] = false
		}
	}
	for r, s := range t.state {
		want := rd.fresh && rd.assigned[r]
		switch s {
		case free:
			if want {
				move(r, acquiring)
				t.assignedAt[r] = rd.now
			}
		case acquiring:
			switch {
			case !want:
				move(r, free)
			case t.persisted[r] && !rd.claimedElsewhere[r]:
				move(r, owned)
				changes[len(changes)-1].waited = rd.now.Sub(t.assignedAt[r])
			}
		case owned:
			if !want {
				move(r, draining)
			}
		}
		if t.state[r] == draining && t.inflight[r] == 0 {
			move(r, free)
		}
	}
	return changes
}

// claims is the set of ranges this replica's lease must claim: every range
// not free.
func (t *table) claims() []bool {
	c := make([]bool, len(t.state))
	for r, s := range t.state {
		c[r] = s != free
	}
	return c
}

// owned returns the owned ranges in order.
func (t *table) ownedRanges() []int {
	var out []int
	for r, s := range t.state {
		if s == owned {
			out = append(out, r)
		}
	}
	return out
}

// idle reports whether no range is claimed: a leaving replica may delete
// its lease.
func (t *table) idle() bool {
	for _, s := range t.state {
		if s != free {
			return false
		}
	}
	return true
}
