//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/reconcilekit/reconcilekit/sharding"
)

// The sharding scenarios' second witness (issue 47): the API server's
// audit log (testdata/chaos-audit-policy.yaml), read after the scenario.
// checkShards judges the writes the replicas' proxies saw accepted against
// the ownership the replicas' own logs claim; that misses a pass that
// writes nothing or is refused (409), the route registry's writes, and a
// replica that takes a cut-off replica's ranges before its Lease expired,
// since each replica vouches for itself. Here every fact comes from the
// API server: the Leases as written, the rounds' reads of them, and every
// single-object request a replica sent (its user agent ends in
// shard/<identity>, examples/webapp/main.go), whatever its answer.
//
// A replica may act on range r inside a window the Leases grant it
// (auditJudge.permits): from the answer to its first list of the group's
// Leases received after its own Lease's accepted write claiming r and
// after every other Lease that claimed r stopped: a write without r, its
// deletion, or its expiry (its last write's receipt plus its
// leaseDurationSeconds; a Member takes an expired Lease's ranges in the
// round that finds it expired, before it deletes the Lease, so the
// deletion alone would come too late). The window lasts until the
// receipt of the replica's first accepted Lease write without r, the
// deletion of its Lease (by itself, or by another replica after expiry),
// the expiry of its Lease (no accepted renewal within its duration), or
// the end of the log. A request or write in flight during a list may
// have been seen by it: a release in flight does not hold the range, a
// claim in flight does not take it. Checked: every request of a replica
// for an object of range r was received and answered inside one of its
// windows for r, and no two replicas' windows for a range overlap.
//
// A request is placed in ranges by the WebApps it concerns: a WebApp, or
// its Deployment or Service (same namespace and name), is the WebApp's
// range, found from the UID its create's answer carried. The route
// registry is 16 ConfigMaps, each holding the entries of every WebApp
// whose "<namespace>/<name>" hashes to it (controller.RegistryShard), so
// of many ranges: a registry write is judged in the range of each entry
// its body names (a merge patch of one key, a create with one key); a
// registry read or deletion names none and concerns them all, so it is
// counted, not judged. The scenarios also count what they exercised
// (handoffs with a pass in flight, writes near a handoff, takeovers) and
// fail below their claims.

// Things of the operator and of the sharding protocol the check reads by
// name: the Member's claims annotation is unexported in package sharding.
const (
	// shardGroup is the WebApp operator's sharding group (main.go): its
	// replicas' Leases are shardGroup-<identity>.
	shardGroup = "webapp-operator"
	// claimsAnnotation lists a Lease's claimed ranges, as "0-3,7".
	claimsAnnotation = "sharding.reconcilekit.io/claims"
	// shardAgentMarker precedes the identity in a sharded replica's
	// user agent (main.go shardUserAgent).
	shardAgentMarker = " shard/"
	// nearHandoff is how close to a handoff a request counts as a pass
	// in flight or a write near it.
	nearHandoff = time.Second
)

// auditEvent is the part of an audit.k8s.io/v1 Event the check reads: one
// request, at its ResponseComplete stage.
type auditEvent struct {
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	UserAgent  string `json:"userAgent"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject  json.RawMessage `json:"requestObject"`
	ResponseObject json.RawMessage `json:"responseObject"`
	Received       time.Time       `json:"requestReceivedTimestamp"`
	Completed      time.Time       `json:"stageTimestamp"`
}

// code is the answer's HTTP status code, 0 without one.
func (e *auditEvent) code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// accepted reports whether the API server carried the request out (2xx).
func (e *auditEvent) accepted() bool { return e.code()/100 == 2 }

// is reports whether the event is about the given group and resource.
func (e *auditEvent) is(group, resource string) bool {
	return e.ObjectRef != nil && e.ObjectRef.APIGroup == group && e.ObjectRef.Resource == resource
}

// readAuditLog reads the completed requests of the audit log at path;
// skipped counts the lines that were no JSON event.
func readAuditLog(path string) (events []auditEvent, skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	events, skipped, err = parseAuditLog(f)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return events, skipped, nil
}

// parseAuditLog reads one JSON event a line and keeps those of the
// ResponseComplete stage (the policy omits RequestReceived; a watch's
// ResponseStarted has no answer yet). A line that is no event is skipped
// and counted, not an error: the API server writes each event with one
// write, but a line cut short (the suite SIGKILLs kube-apiserver in
// scenario 2) must not void the whole log.
func parseAuditLog(r io.Reader) (events []auditEvent, skipped int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e auditEvent
		if json.Unmarshal(line, &e) != nil {
			skipped++
			continue
		}
		if e.Stage == "ResponseComplete" {
			events = append(events, e)
		}
	}
	return events, skipped, sc.Err()
}

// shardIdentity is the replica a user agent names (shardUserAgent), if any.
func shardIdentity(userAgent string) (string, bool) {
	i := strings.LastIndex(userAgent, shardAgentMarker)
	if i < 0 {
		return "", false
	}
	id := userAgent[i+len(shardAgentMarker):]
	return id, id != "" && !strings.ContainsAny(id, " /")
}

// span is a request's time at the API server: received, then answered.
type span struct{ from, to time.Time }

// leaseEvent is an accepted write or deletion of one Lease of the group.
type leaseEvent struct {
	span
	deleted  bool
	claims   []bool        // writes: the claimed ranges
	duration time.Duration // writes: leaseDurationSeconds
}

// lapse is when the Lease written by e expires at the earliest: another
// replica dates a version from when its own read returned it, which is
// after the write was received.
func (e leaseEvent) lapse() time.Time { return e.from.Add(e.duration) }

// claiming reports whether the Lease claims r after e.
func (e leaseEvent) claiming(r int) bool { return !e.deleted && e.claims[r] }

// shardRequest is a replica's single-object request on a WebApp, an
// object named after one, or a route registry ConfigMap.
type shardRequest struct {
	span
	replica string
	verb    string
	code    int
	what    string // resource/subresource namespace/name
	ranges  []int  // the ranges of the WebApps it concerns
}

// write reports whether the request asked for a change.
func (q shardRequest) write() bool { return q.verb != "get" }

func (q shardRequest) String() string {
	return fmt.Sprintf("%s %s (%d) by %s at %s..%s", q.verb, q.what, q.code, q.replica, stamp(q.from), stamp(q.to))
}

// appCreate is one WebApp as its create's answer shows it.
type appCreate struct {
	uid types.UID
	at  time.Time
}

// auditJudge holds what the check reads from the log, sorted by received
// time: the group's Lease events and Lease lists, the WebApp creates and
// the replicas' requests.
type auditJudge struct {
	group, namespace string
	ranges           int
	until            time.Time

	leases   map[string][]leaseEvent // by Lease name
	lists    map[string][]span       // by identity
	apps     map[types.NamespacedName][]appCreate
	requests []shardRequest
	// unplaced records, by replica, when it sent a request the check
	// could place in no range: an object of no WebApp it saw created, a registry request
	// naming no entry (a read or a deletion: a shard holds the entries of
	// many ranges, so it concerns them all and judges none).
	unplaced map[string][]time.Time
	problems []string
}

// newAuditJudge sorts events into what the check reads; group and
// namespace are the sharding group and its Leases' namespace (also the
// route registry's); until ends the log.
func newAuditJudge(events []auditEvent, group, namespace string, ranges int, until time.Time) *auditJudge {
	j := &auditJudge{group: group, namespace: namespace, ranges: ranges, until: until,
		leases: map[string][]leaseEvent{}, lists: map[string][]span{}, apps: map[types.NamespacedName][]appCreate{},
		unplaced: map[string][]time.Time{}}
	sort.SliceStable(events, func(a, b int) bool { return events[a].Received.Before(events[b].Received) })
	for i := range events {
		j.add(&events[i])
	}
	// The requests are placed once every WebApp's create is known.
	for i := range events {
		if _, ok := shardIdentity(events[i].UserAgent); ok {
			j.addRequest(&events[i])
		}
	}
	return j
}

// add files a Lease event, a Lease list or a WebApp create.
func (j *auditJudge) add(e *auditEvent) {
	switch {
	case e.is("coordination.k8s.io", "leases") && e.ObjectRef.Namespace == j.namespace:
		j.addLease(e)
	case e.is("apps.example.com", "webapps") && e.Verb == "create" && e.ObjectRef.Subresource == "" && e.accepted():
		var obj struct {
			Metadata struct {
				Namespace string    `json:"namespace"`
				Name      string    `json:"name"`
				UID       types.UID `json:"uid"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(e.ResponseObject, &obj); err != nil || obj.Metadata.UID == "" {
			j.problems = append(j.problems, fmt.Sprintf("the create of WebApp %s/%s at %s shows no UID (audit level below RequestResponse?)",
				e.ObjectRef.Namespace, e.ObjectRef.Name, stamp(e.Received)))
			return
		}
		key := types.NamespacedName{Namespace: obj.Metadata.Namespace, Name: obj.Metadata.Name}
		j.apps[key] = append(j.apps[key], appCreate{uid: obj.Metadata.UID, at: e.Received})
	}
}

// addLease files a list of the group's Leases by a replica, or an accepted
// write or deletion of one of them (a refused one changed nothing).
func (j *auditJudge) addLease(e *auditEvent) {
	if e.Verb == "list" {
		id, ok := shardIdentity(e.UserAgent)
		if ok && e.accepted() && j.listsGroup(e.RequestURI) {
			j.lists[id] = append(j.lists[id], span{e.Received, e.Completed})
		}
		return
	}
	name := e.ObjectRef.Name
	if !strings.HasPrefix(name, j.group+"-") || !e.accepted() {
		return
	}
	ev := leaseEvent{span: span{e.Received, e.Completed}}
	switch e.Verb {
	case "delete":
		ev.deleted = true
	case "create", "update":
		var err error
		if ev.claims, ev.duration, err = j.readLease(e.RequestObject); err != nil {
			j.problems = append(j.problems, fmt.Sprintf("the %s of Lease %s at %s: %v", e.Verb, name, stamp(e.Received), err))
			return
		}
	default:
		return // get; the Member never patches
	}
	j.leases[name] = append(j.leases[name], ev)
}

// listsGroup reports whether a list's URI selects the group's Leases, as a
// Member's round reads them.
func (j *auditJudge) listsGroup(uri string) bool {
	u, err := url.Parse(uri)
	return err == nil && u.Query().Get("labelSelector") == sharding.GroupLabel+"="+j.group
}

// readLease reads the claims and the duration of a Lease as written.
func (j *auditJudge) readLease(raw json.RawMessage) ([]bool, time.Duration, error) {
	var l struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			LeaseDurationSeconds *int32 `json:"leaseDurationSeconds"`
		} `json:"spec"`
	}
	if len(raw) == 0 {
		return nil, 0, fmt.Errorf("no request body (audit level below Request?)")
	}
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, 0, err
	}
	claims, err := parseRangeSet(l.Metadata.Annotations[claimsAnnotation], j.ranges)
	if err != nil {
		return nil, 0, err
	}
	d := shardLease
	if s := l.Spec.LeaseDurationSeconds; s != nil {
		d = time.Duration(*s) * time.Second
	}
	return claims, d, nil
}

// parseRangeSet reads the claims notation ("0-3,7") into a set of ranges.
func parseRangeSet(s string, ranges int) ([]bool, error) {
	set := make([]bool, ranges)
	if s == "" {
		return set, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		first, last, run := strings.Cut(part, "-")
		lo, err := strconv.Atoi(first)
		hi := lo
		if err == nil && run {
			hi, err = strconv.Atoi(last)
		}
		if err != nil || lo < 0 || hi >= ranges || lo > hi {
			return nil, fmt.Errorf("claims %q: not a set of ranges below %d", s, ranges)
		}
		for r := lo; r <= hi; r++ {
			set[r] = true
		}
	}
	return set, nil
}

// addRequest files a replica's single-object request on what the check
// judges, with the ranges it concerns; reads included, and refused ones:
// a pass that reads or is refused is a pass all the same.
func (j *auditJudge) addRequest(e *auditEvent) {
	switch e.Verb {
	case "get", "create", "update", "patch", "delete":
	default:
		return // lists and watches: the cache's, not a pass's
	}
	id, _ := shardIdentity(e.UserAgent)
	ref := e.ObjectRef
	if ref == nil {
		return
	}
	q := shardRequest{span: span{e.Received, e.Completed}, replica: id, verb: e.Verb, code: e.code(),
		what: ref.Resource + "/" + ref.Subresource + " " + ref.Namespace + "/" + ref.Name}
	if ref.Subresource == "" {
		q.what = ref.Resource + " " + ref.Namespace + "/" + ref.Name
	}
	var apps []types.NamespacedName
	switch {
	case e.is("apps.example.com", "webapps"), e.is("apps", "deployments"), e.is("", "services"):
		// A WebApp's Deployment and Service bear its name (controller:
		// desiredDeployment, service).
		apps = []types.NamespacedName{{Namespace: ref.Namespace, Name: ref.Name}}
	case e.is("", "configmaps") && ref.Namespace == j.namespace && strings.HasPrefix(ref.Name, legacyRegistryName):
		apps = registryEntries(e.RequestObject)
	default:
		return
	}
	for _, app := range apps {
		uid, ok := j.uidAt(app, q.from)
		if !ok {
			continue
		}
		if r := sharding.RangeOf(uid, j.ranges); !slices.Contains(q.ranges, r) {
			q.ranges = append(q.ranges, r)
		}
	}
	if len(q.ranges) == 0 {
		j.unplaced[id] = append(j.unplaced[id], q.from)
		return
	}
	j.requests = append(j.requests, q)
}

// registryEntries names the WebApps whose registry entries a request body
// writes: a shard's create or update holds them in data, a merge patch
// sets or removes them there. Keys are "<namespace>.<name>"
// (controller.RegistryKey). A read or a deletion names none.
func registryEntries(body json.RawMessage) []types.NamespacedName {
	var obj struct {
		Data map[string]*string `json:"data"`
	}
	if len(body) == 0 || json.Unmarshal(body, &obj) != nil {
		return nil
	}
	var out []types.NamespacedName
	for key := range obj.Data {
		if ns, name, ok := strings.Cut(key, "."); ok && ns != "" && name != "" {
			out = append(out, types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	return out
}

// uidAt is the UID of the WebApp app as of at: the last one whose create
// was received before at. A request can only be about a WebApp a replica
// saw, so created already; the create's answer may be written after a
// replica's watch saw the WebApp, so its receipt dates it.
func (j *auditJudge) uidAt(app types.NamespacedName, at time.Time) (types.UID, bool) {
	var uid types.UID
	for _, c := range j.apps[app] {
		if c.at.After(at) {
			break
		}
		uid = c.uid
	}
	return uid, uid != ""
}

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
