//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
)

// permit is a window in which a replica may act on a range; end says how
// it ended: released (a Lease write without the range), deleted (its
// Lease), expired (not renewed within its duration), or "" (the log
// ended first).
type permit struct {
	span
	replica string
	rng     int
	end     string
}

func (p permit) String() string {
	end := p.end
	if end == "" {
		end = "open"
	}
	return fmt.Sprintf("%s..%s (%s)", stamp(p.from), stamp(p.to), end)
}

// maxRequest bounds how long the API server works on a request (its
// --request-timeout, one minute by default): a Lease write received
// earlier than that before a list was answered before the list began.
const maxRequest = time.Minute

// leaseName is the Lease of a replica of the group.
func (j *auditJudge) leaseName(id string) string { return j.group + "-" + id }

// settledBefore returns the index of the Lease's last event answered
// before t (-1: none): what every read received at t or later sees.
func settledBefore(evs []leaseEvent, t time.Time) int {
	i := sort.Search(len(evs), func(i int) bool { return !evs[i].from.Before(t) })
	for i--; i >= 0 && evs[i].from.After(t.Add(-maxRequest)); i-- {
		if evs[i].to.Before(t) {
			return i
		}
	}
	return i // older than maxRequest before t: answered before it
}

// ownClaims returns, for the list l read by replica id, the ranges its
// own Lease claimed as the list began: the write that persisted them was
// answered before (a Member reads and writes in turn), and had not
// expired.
func (j *auditJudge) ownClaims(id string, l span) []bool {
	evs := j.leases[j.leaseName(id)]
	i := settledBefore(evs, l.from)
	if i < 0 || evs[i].deleted || !l.from.Before(evs[i].lapse()) {
		return make([]bool, j.ranges)
	}
	return evs[i].claims
}

// answerSlack bounds how long after the API server answered a list its
// reader takes to stamp the time it judges expiries by.
const answerSlack = time.Second

// held returns the ranges a Lease surely claimed for the list l, and when
// it lapses: its last write answered before the list began claims them,
// and no write or deletion in flight during the list (which the list may
// have seen) gave them up. expired says its reader may find it expired:
// it lapses before the reader's clock, read after the answer, could say so.
func (j *auditJudge) held(evs []leaseEvent, l span) (claims []bool, lapse time.Time, expired bool) {
	i := settledBefore(evs, l.from)
	if i < 0 || evs[i].deleted {
		return nil, time.Time{}, false
	}
	claims = slices.Clone(evs[i].claims)
	for k := i + 1; k < len(evs) && evs[k].from.Before(l.to); k++ {
		if evs[k].to.Before(l.from) {
			continue
		}
		for r := range claims {
			claims[r] = claims[r] && evs[k].claiming(r)
		}
	}
	lapse = evs[i].lapse()
	return claims, lapse, lapse.Before(l.to.Add(answerSlack))
}

// openable returns, for each range, when replica id may own it from its
// list l (zero: it may not): its Lease claimed the range as the list
// began, and every other Lease of the group that surely claimed it had
// expired by then. That is the Member's rule (a claim becomes ownership
// in a round whose read began after the write that persisted it, when no
// live Lease of another replica claims the range) in the API server's
// times: the Member's clock can find a Lease expired no sooner than the
// write's receipt plus its duration, so the window starts no sooner.
func (j *auditJudge) openable(id string, l span) []time.Time {
	start := make([]time.Time, j.ranges)
	blocked := make([]bool, j.ranges)
	for r, c := range j.ownClaims(id, l) {
		if c {
			start[r] = l.to
		}
	}
	own := j.leaseName(id)
	for name, evs := range j.leases {
		if name == own {
			continue
		}
		claims, lapse, expired := j.held(evs, l)
		for r, c := range claims {
			switch {
			case !c:
			case expired && lapse.After(start[r]):
				start[r] = lapse
			case !expired:
				blocked[r] = true
			}
		}
	}
	for r := range start {
		if blocked[r] {
			start[r] = time.Time{}
		}
	}
	return start
}

// closing returns when replica id's window on r, opened by its list l,
// ends, and how: its first accepted Lease write without r, the deletion
// of its Lease (by itself or, after expiry, by another replica), the
// expiry of its last write (no renewal received within the duration), or
// the end of the log.
func (j *auditJudge) closing(id string, r int, l span) (time.Time, string) {
	evs := j.leases[j.leaseName(id)]
	i := settledBefore(evs, l.from)
	prev := evs[i]
	for _, e := range evs[i+1:] {
		switch {
		case e.from.After(prev.lapse()):
			return prev.lapse(), "expired"
		case e.deleted:
			return e.from, "deleted"
		case !e.claims[r]:
			return e.from, "released"
		}
		prev = e
	}
	if prev.lapse().Before(j.until) {
		return prev.lapse(), "expired"
	}
	return j.until, ""
}

// permits returns every window of every replica that read the group's
// Leases, by range, each range's in order.
func (j *auditJudge) permits() map[int][]permit {
	out := map[int][]permit{}
	for _, id := range slices.Sorted(maps.Keys(j.lists)) {
		lists := j.lists[id]
		open := make([][]time.Time, len(lists))
		for i, l := range lists {
			open[i] = j.openable(id, l)
		}
		for r := range j.ranges {
			var after time.Time
			for i, l := range lists {
				from := open[i][r]
				if l.from.Before(after) || from.IsZero() {
					continue
				}
				to, end := j.closing(id, r, l)
				if !from.Before(to) {
					continue // over before it began: nothing granted
				}
				out[r] = append(out[r], permit{span: span{from, to}, replica: id, rng: r, end: end})
				after = to
			}
		}
	}
	for r := range out {
		sort.Slice(out[r], func(a, b int) bool { return out[r][a].from.Before(out[r][b].from) })
	}
	return out
}

// auditVerdict is the audit check's verdict on one scenario's replicas,
// with the figures the report shows.
type auditVerdict struct {
	violations []string
	// requests counts the replicas' single-object requests judged (placed
	// in a range); unplaced those placed in none.
	requests, unplaced int
	// windows counts the replicas' windows; handoffs the ranges that went
	// from another replica's window to one of theirs; inFlight the
	// handoffs whose old owner sent a request for the range within
	// nearHandoff before its window ended; nearWrites the writes to
	// objects of a handed-off range from nearHandoff before the old
	// window's end to nearHandoff after the new one's start; takeovers
	// the handoffs whose old window ended by expiry or deletion.
	windows, handoffs, inFlight, nearWrites, takeovers int
}

// judge checks the requests of replicas (identities) since a time against
// the windows the Leases granted them, and the windows of every range that
// last until then against each other's. The windows are read from the
// whole log: a Lease written before since may still hold a range.
func (j *auditJudge) judge(replicas []string, since time.Time) auditVerdict {
	v := auditVerdict{violations: slices.Clone(j.problems)}
	mine := map[string]bool{}
	read := false
	for _, id := range replicas {
		mine[id] = true
		read = read || len(j.lists[id]) > 0
		for _, t := range j.unplaced[id] {
			if !t.Before(since) {
				v.unplaced++
			}
		}
	}
	if !read && len(replicas) > 0 {
		// A replica that reads nothing gets no window, and its requests
		// are reported; none reading at all is the log's fault.
		v.violations = append(v.violations, fmt.Sprintf("the audit log holds no read of the group's Leases by any of %v: "+
			"no user agent ending in %s<identity>, or a policy that does not log them", replicas, shardAgentMarker))
	}
	all := j.permits()
	recent := map[int][]permit{} // the windows that last until since
	for r, ps := range all {
		recent[r] = slices.DeleteFunc(slices.Clone(ps), func(p permit) bool { return p.to.Before(since) })
		v.violations = append(v.violations, overlaps(r, recent[r], mine)...)
		for _, p := range recent[r] {
			if mine[p.replica] {
				v.windows++
			}
		}
	}
	for _, q := range j.requests {
		if !mine[q.replica] || q.from.Before(since) {
			continue
		}
		v.requests++
		for _, r := range q.ranges {
			if msg, ok := inside(q, r, all[r]); !ok {
				v.violations = append(v.violations, msg)
			}
		}
	}
	j.countHandoffs(&v, recent, mine)
	sort.Strings(v.violations)
	return v
}

// overlaps reports the pairs of windows of a range, of two replicas one
// of which is judged, that overlap: both could have acted on it at once.
func overlaps(r int, ps []permit, mine map[string]bool) []string {
	var out []string
	for a := range ps {
		for b := a + 1; b < len(ps) && ps[b].from.Before(ps[a].to); b++ {
			if ps[a].replica != ps[b].replica && (mine[ps[a].replica] || mine[ps[b].replica]) {
				out = append(out, fmt.Sprintf("range %d: %s's window %s overlaps %s's %s",
					r, ps[b].replica, ps[b], ps[a].replica, ps[a]))
			}
		}
	}
	return out
}

// inside checks that q, a request for an object of range r, was received
// and answered within one of its replica's windows for r; the message
// says where it fell otherwise.
func inside(q shardRequest, r int, ps []permit) (string, bool) {
	var before, after *permit
	for i := range ps {
		p := &ps[i]
		if p.replica != q.replica {
			continue
		}
		if !q.from.Before(p.from) && !q.to.After(p.to) {
			return "", true
		}
		if !p.from.After(q.from) {
			before = p
		} else if after == nil {
			after = p
		}
	}
	where := "it had no window for the range"
	switch {
	case before != nil && after != nil:
		where = fmt.Sprintf("between its windows %s and %s", before, after)
	case before != nil:
		where = fmt.Sprintf("after its window %s", before)
	case after != nil:
		where = fmt.Sprintf("before its window %s", after)
	}
	return fmt.Sprintf("%s: outside its windows for range %d, %s", q, r, where), false
}

// countHandoffs counts the handoffs to the judged replicas and what they
// exercised: a pass of the old owner in flight, writes near the handoff,
// a takeover of an expired or deleted Lease's range.
func (j *auditJudge) countHandoffs(v *auditVerdict, permits map[int][]permit, mine map[string]bool) {
	byRange := map[int][]int{} // indices in j.requests
	for k, q := range j.requests {
		for _, r := range q.ranges {
			byRange[r] = append(byRange[r], k)
		}
	}
	near := map[int]bool{} // the writes counted, by index in j.requests
	for r, ps := range permits {
		for i := 1; i < len(ps); i++ {
			old, next := ps[i-1], ps[i]
			if old.replica == next.replica || !mine[next.replica] {
				continue
			}
			v.handoffs++
			if old.end == "expired" || old.end == "deleted" {
				v.takeovers++
			}
			inFlight := false
			for _, k := range byRange[r] {
				q := j.requests[k]
				if q.replica == old.replica && !q.from.Before(old.to.Add(-nearHandoff)) && q.from.Before(old.to) {
					inFlight = true
				}
				if q.write() && mine[q.replica] && !q.from.Before(old.to.Add(-nearHandoff)) && !q.from.After(next.from.Add(nearHandoff)) {
					near[k] = true
				}
			}
			if inFlight {
				v.inFlight++
			}
		}
	}
	v.nearWrites = len(near)
}

// exercise is what a sharded scenario claims to exercise, as minimum
// counts of its audit verdict.
type exercise struct {
	handoffs, inFlight, nearWrites, takeovers int
}

// shortOf reports each count of v below what want claims.
func (v auditVerdict) shortOf(want exercise) []string {
	var out []string
	check := func(what string, got, min int) {
		if got < min {
			out = append(out, fmt.Sprintf("the scenario did not exercise what it claims: %d %s in the audit log, at least %d expected", got, what, min))
		}
	}
	check("handoffs to its replicas", v.handoffs, want.handoffs)
	check("handoffs with a pass of the old owner in flight", v.inFlight, want.inFlight)
	check("writes within a second of a handoff", v.nearWrites, want.nearWrites)
	check("takeovers of an expired or deleted Lease's range", v.takeovers, want.takeovers)
	return out
}
