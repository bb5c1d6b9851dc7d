//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/reconcilekit/reconcilekit/sharding"
)

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
