//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditapi "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/reconcilekit/reconcilekit/sharding"
)

// auditT0 is the synthetic logs' origin; at(s) is s seconds after it.
var auditT0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func at(s float64) time.Time {
	return auditT0.Add(time.Duration(math.Round(s*1e6)) * time.Microsecond) // the log's resolution
}

// auditLog builds a synthetic audit log, one JSON event a line, as
// kube-apiserver writes it under testdata/chaos-audit-policy.yaml.
type auditLog struct {
	lines []string
	n     int
}

// agent is the user agent of the replica id (main.go shardUserAgent).
func agent(id string) string {
	return "webapp-operator/v0.0.0 (linux/amd64) kubernetes/$Format shard/" + id
}

// event appends a completed request received at from and answered 10 ms
// later (took overrides: the answer's delay in seconds).
func (l *auditLog) event(from float64, ua, verb, uri string, ref map[string]string, code int, req, resp any, took ...float64) {
	l.n++
	d := 0.01
	if len(took) > 0 {
		d = took[0]
	}
	e := map[string]any{
		"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Request", "auditID": fmt.Sprintf("id-%d", l.n),
		"stage": "ResponseComplete", "requestURI": uri, "verb": verb,
		"user":      map[string]any{"username": operatorUser},
		"sourceIPs": []string{"127.0.0.1"}, "userAgent": ua, "objectRef": ref,
		"responseStatus":           map[string]any{"metadata": map[string]any{}, "code": code},
		"requestReceivedTimestamp": at(from).Format(time.RFC3339Nano),
		"stageTimestamp":           at(from + d).Format(time.RFC3339Nano),
	}
	if req != nil {
		e["requestObject"] = req
	}
	if resp != nil {
		e["responseObject"] = resp
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err)
	}
	l.lines = append(l.lines, string(b))
}

func leaseRef(id string) map[string]string {
	return map[string]string{"resource": "leases", "namespace": operatorNamespace, "name": shardGroup + "-" + id,
		"apiGroup": "coordination.k8s.io", "apiVersion": "v1"}
}

// lease appends an accepted write of replica id's Lease claiming claims
// ("0-3,7"), by id (verb create or update).
func (l *auditLog) lease(from float64, id, verb, claims string, took ...float64) {
	body := map[string]any{
		"kind": "Lease", "apiVersion": "coordination.k8s.io/v1",
		"metadata": map[string]any{"name": shardGroup + "-" + id, "namespace": operatorNamespace,
			"labels":      map[string]string{sharding.GroupLabel: shardGroup},
			"annotations": map[string]string{claimsAnnotation: claims, "sharding.reconcilekit.io/ranges": "64"}},
		"spec": map[string]any{"holderIdentity": id, "leaseDurationSeconds": 15},
	}
	l.event(from, agent(id), verb, "/apis/coordination.k8s.io/v1/namespaces/webapp-system/leases/"+shardGroup+"-"+id,
		leaseRef(id), 200, body, nil, took...)
}

// deleteLease appends the deletion of replica id's Lease by replica by.
func (l *auditLog) deleteLease(from float64, by, id string) {
	l.event(from, agent(by), "delete", "/apis/coordination.k8s.io/v1/namespaces/webapp-system/leases/"+shardGroup+"-"+id,
		leaseRef(id), 200, map[string]any{"kind": "DeleteOptions"}, nil)
}

// list appends a round's read of the group's Leases by replica id.
func (l *auditLog) list(from float64, id string) {
	l.event(from, agent(id), "list",
		"/apis/coordination.k8s.io/v1/namespaces/webapp-system/leases?labelSelector=sharding.reconcilekit.io%2Fgroup%3Dwebapp-operator",
		map[string]string{"resource": "leases", "namespace": operatorNamespace, "apiGroup": "coordination.k8s.io", "apiVersion": "v1"},
		200, nil, nil)
}

// create appends the workload's create of WebApp ns/name, answered with uid.
func (l *auditLog) create(from float64, ns, name string, uid types.UID) {
	l.event(from, "e2e.test/v0.0.0", "create", "/apis/apps.example.com/v1/namespaces/"+ns+"/webapps",
		map[string]string{"resource": "webapps", "namespace": ns, "name": name, "apiGroup": "apps.example.com", "apiVersion": "v1"},
		201, map[string]any{"kind": "WebApp"}, map[string]any{"kind": "WebApp",
			"metadata": map[string]any{"namespace": ns, "name": name, "uid": uid}})
}

// request appends replica id's request on group/resource ns/name.
func (l *auditLog) request(from float64, id, verb, group, resource, ns, name string, code int, body any, took ...float64) {
	ref := map[string]string{"resource": resource, "namespace": ns, "name": name, "apiGroup": group, "apiVersion": "v1"}
	l.event(from, agent(id), verb, "/apis/"+group+"/v1/namespaces/"+ns+"/"+resource+"/"+name, ref, code, body, nil, took...)
}

// patchApp appends replica id's patch of the WebApp ns/app.
func (l *auditLog) patchApp(from float64, id string, code int, took ...float64) {
	l.request(from, id, "patch", "apps.example.com", "webapps", "ns", "app", code, nil, took...)
}

// register appends replica id's merge patch of the WebApp ns/app's route
// registry entry.
func (l *auditLog) register(from float64, id string) {
	l.request(from, id, "patch", "", "configmaps", operatorNamespace, registryShard("ns", "app"), 200,
		map[string]any{"data": map[string]string{"ns.app": "http://app.ns.svc:80"}})
}

// permits parses the log and returns the windows, by range.
func (l *auditLog) permits(t *testing.T, until float64) map[int][]permit {
	t.Helper()
	events, _, err := parseAuditLog(strings.NewReader(l.String()))
	require.NoError(t, err)
	return newAuditJudge(events, shardGroup, operatorNamespace, sharding.DefaultRanges, at(until)).permits()
}

func (l *auditLog) String() string { return strings.Join(l.lines, "\n") + "\n" }

// judged parses the log and judges replicas a and b.
func (l *auditLog) judged(t *testing.T, until float64) auditVerdict {
	t.Helper()
	events, _, err := parseAuditLog(strings.NewReader(l.String()))
	require.NoError(t, err)
	return newAuditJudge(events, shardGroup, operatorNamespace, sharding.DefaultRanges, at(until)).judge([]string{"a", "b"}, time.Time{})
}

// appUID is the WebApp ns/app's UID, and appRange its range.
const appUID = types.UID("5b0c2a1e-0000-4000-8000-000000000001")

var appRange = sharding.RangeOf(appUID, sharding.DefaultRanges)

// handoff is a clean handoff of the app's range from a to b: a owns it
// from its list at 2 s, b claims it from 6 s (held back by a's claim),
// a's pass ends at 7.5 s and a releases the range at 8 s, b owns it from
// its list at 8.2 s and passes over the app at once.
func handoff() *auditLog {
	r := fmt.Sprint(appRange)
	l := &auditLog{}
	l.create(0.5, "ns", "app", appUID)
	l.lease(0, "a", "create", r)
	l.list(2, "a")
	l.request(3, "a", "get", "apps.example.com", "webapps", "ns", "app", 200, nil)
	l.request(3.2, "a", "patch", "apps", "deployments", "ns", "app", 200, nil)
	l.register(3.4, "a")
	l.lease(4, "b", "create", "")
	l.lease(4.1, "a", "update", r)
	l.list(6, "b")
	l.lease(6.1, "b", "update", r)
	l.list(6.1, "a")
	l.patchApp(7.5, "a", 200)
	l.list(8, "a")
	l.lease(8.02, "a", "update", "")
	l.list(8.2, "b")
	l.patchApp(8.5, "b", 200)
	l.request(8.6, "b", "patch", "", "services", "ns", "app", 200, nil)
	l.register(8.7, "b")
	l.lease(9, "b", "update", r)
	return l
}

// TestAuditJudgeCleanHandoff: the windows the Leases grant, and a handoff
// in which every request falls inside its replica's window.
func TestAuditJudgeCleanHandoff(t *testing.T) {
	v := handoff().judged(t, 20)
	assert.Empty(t, v.violations)
	assert.Equal(t, 7, v.requests, "every request on the app, its objects and its registry entry")
	assert.Equal(t, 2, v.windows)
	assert.Equal(t, 1, v.handoffs)
	assert.Equal(t, 1, v.inFlight, "a's patch at 7.5 s, within a second of its release at 8.02 s")
	assert.Equal(t, 4, v.nearWrites, "a's patch, b's patches of the app and its Service and its registry entry")
	assert.Equal(t, 0, v.takeovers)
	assert.Empty(t, v.shortOf(exercise{handoffs: 1, inFlight: 1, nearWrites: 1}))
	assert.Len(t, v.shortOf(exercise{inFlight: 2, takeovers: 1}), 2)

	// Judged from 8.3 s on, as a later scenario: a's window ended before,
	// and its requests are not this scenario's.
	events, _, err := parseAuditLog(strings.NewReader(handoff().String()))
	require.NoError(t, err)
	later := newAuditJudge(events, shardGroup, operatorNamespace, sharding.DefaultRanges, at(20)).judge([]string{"a", "b"}, at(8.3))
	assert.Empty(t, later.violations)
	assert.Equal(t, 3, later.requests)
	assert.Equal(t, 1, later.windows)
	assert.Equal(t, 0, later.handoffs)

	ps := handoff().permits(t, 20)[appRange]
	require.Len(t, ps, 2)
	assert.Equal(t, permit{span: span{at(2.01), at(8.02)}, replica: "a", rng: appRange, end: "released"}, ps[0])
	// b's list at 6 s saw a's claim; its list at 8.2 s began after a's
	// release was answered. Its window lasts until the log's end.
	assert.Equal(t, permit{span: span{at(8.21), at(20)}, replica: "b", rng: appRange, end: ""}, ps[1])
}

// TestAuditJudgeReleaseInFlight: a list in flight while the old owner's
// release was may have seen it: the new owner's window opens at the list's
// answer, after the release was received.
func TestAuditJudgeReleaseInFlight(t *testing.T) {
	l := handoff()
	l.list(8.015, "b") // answered at 8.025, a's release received at 8.02
	l.request(8.1, "b", "get", "apps.example.com", "webapps", "ns", "app", 200, nil)
	v := l.judged(t, 20)
	assert.Empty(t, v.violations)
	ps := l.permits(t, 20)[appRange]
	require.Len(t, ps, 2)
	assert.Equal(t, at(8.025), ps[1].from)
}

// TestAuditJudgeOutsideWindow: the negative controls, one per way a
// request falls outside its replica's windows.
func TestAuditJudgeOutsideWindow(t *testing.T) {
	for _, tt := range []struct {
		name string
		add  func(l *auditLog)
		want string
	}{
		{"a write after the release, refused", func(l *auditLog) { l.patchApp(8.5, "a", 409) },
			"patch webapps ns/app (409) by a at 12:00:08.500..12:00:08.510: outside its windows for range %d, after its window 12:00:02.010..12:00:08.020 (released)"},
		{"a read before the window", func(l *auditLog) {
			l.request(7, "b", "get", "apps.example.com", "webapps", "ns", "app", 200, nil)
		}, "get webapps ns/app (200) by b at 12:00:07.000..12:00:07.010: outside its windows for range %d, before its window 12:00:08.210..12:00:20.000 (open)"},
		{"a registry write before the window", func(l *auditLog) { l.register(7.9, "b") },
			"patch configmaps webapp-system/" + registryShard("ns", "app") + " (200) by b at 12:00:07.900..12:00:07.910: outside its windows for range %d, before its window"},
		{"a Deployment read by a replica that never owned the range", func(l *auditLog) {
			l.list(5, "c")
			l.request(5.5, "c", "get", "apps", "deployments", "ns", "app", 404, nil)
		}, "get deployments ns/app (404) by c at 12:00:05.500..12:00:05.510: outside its windows for range %d, it had no window for the range"},
		{"a write answered after the release was received", func(l *auditLog) { l.patchApp(7.9, "a", 200, 0.2) },
			"patch webapps ns/app (200) by a at 12:00:07.900..12:00:08.100: outside its windows for range %d, after its window"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := handoff()
			tt.add(l)
			events, _, err := parseAuditLog(strings.NewReader(l.String()))
			require.NoError(t, err)
			v := newAuditJudge(events, shardGroup, operatorNamespace, sharding.DefaultRanges, at(20)).judge([]string{"a", "b", "c"}, time.Time{})
			require.Len(t, v.violations, 1)
			assert.Contains(t, v.violations[0], fmt.Sprintf(tt.want, appRange))
		})
	}
}

// partitioned is replica a cut off at 3 s, after its last renewal at 2 s:
// b, which claims the range from 4 s, may take it once a's Lease lapses at
// 17 s, and does from its list at 17.5 s (deleting a's Lease).
func partitioned() *auditLog {
	r := fmt.Sprint(appRange)
	l := &auditLog{}
	l.create(0.5, "ns", "app", appUID)
	l.lease(0, "a", "create", r)
	l.list(1, "a")
	l.patchApp(1.5, "a", 200)
	l.lease(2, "a", "update", r)
	l.lease(3, "b", "create", "")
	l.list(4, "b")
	l.lease(4.1, "b", "update", r)
	for s := 5.0; s <= 15; s += 2 {
		l.list(s, "b")
		l.lease(s+0.1, "b", "update", r)
	}
	l.list(17.5, "b")
	l.deleteLease(17.55, "b", "a")
	l.lease(17.6, "b", "update", r)
	l.patchApp(18.5, "b", 200)
	return l
}

// TestAuditJudgeTakeover: a replica takes a cut-off replica's range only
// once its Lease lapsed; the negative controls take it sooner, or write
// through a held request after the lapse.
func TestAuditJudgeTakeover(t *testing.T) {
	v := partitioned().judged(t, 30)
	assert.Empty(t, v.violations)
	assert.Equal(t, 1, v.handoffs)
	assert.Equal(t, 1, v.takeovers, "a's window ended by expiry")
	assert.Equal(t, 0, v.inFlight, "a's last request was 15 s before its lapse")
	assert.Equal(t, 1, v.nearWrites, "b's patch within a second of its window's start")

	l := partitioned()
	ps := l.permits(t, 30)[appRange]
	require.Len(t, ps, 2)
	assert.Equal(t, permit{span: span{at(1.01), at(17)}, replica: "a", rng: appRange, end: "expired"}, ps[0])
	assert.Equal(t, permit{span: span{at(17.51), at(30)}, replica: "b", rng: appRange}, ps[1])

	// Negative controls: b writes while a's Lease is live (its lists saw
	// it); a's patch held by the partition reaches the API server at the
	// heal, at 25 s.
	l = partitioned()
	l.patchApp(12, "b", 200)
	v = l.judged(t, 30)
	require.Len(t, v.violations, 1, "b wrote while a's Lease was live")
	assert.Contains(t, v.violations[0], "by b at 12:00:12.000..12:00:12.010: outside its windows for range")

	l = partitioned()
	l.patchApp(25, "a", 200)
	v = l.judged(t, 30)
	require.Len(t, v.violations, 1, "a's write held by the partition")
	assert.Contains(t, v.violations[0], "by a at 12:00:25.000..12:00:25.010: outside its windows for range")
	assert.Contains(t, v.violations[0], "after its window 12:00:01.010..12:00:17.000 (expired)")

	// b's list answered at 16.5 s, with a's Lease lapsing 0.5 s later:
	// b's clock, read after the answer, may find it expired, so the
	// window starts at the lapse, not at the answer.
	l = partitioned()
	l.list(16.49, "b")
	l.patchApp(16.8, "b", 200)
	l.patchApp(17.1, "b", 200)
	v = l.judged(t, 30)
	require.Len(t, v.violations, 1, "b's patch at 16.8 s, before the lapse")
	assert.Contains(t, v.violations[0], "by b at 12:00:16.800")
}

// TestAuditJudgeOverlap: a renewal in flight keeps the old owner's window
// open past the lapse of its last answered write, which another replica
// took the range at: the windows overlap.
func TestAuditJudgeOverlap(t *testing.T) {
	l := partitioned()
	l.lease(16.9, "a", "update", fmt.Sprint(appRange), 2) // answered at 18.9 s
	l.list(19, "a")
	v := l.judged(t, 30)
	var overlap []string
	for _, msg := range v.violations {
		if strings.Contains(msg, "overlaps") {
			overlap = append(overlap, msg)
		}
	}
	require.Len(t, overlap, 1, "%v", v.violations)
	assert.Equal(t, fmt.Sprintf("range %d: b's window 12:00:17.510..12:00:30.000 (open) overlaps a's 12:00:01.010..12:00:17.550 (deleted)", appRange), overlap[0])
}

// TestAuditJudgePlacesRequests: what the check judges and what it cannot
// place in a range.
func TestAuditJudgePlacesRequests(t *testing.T) {
	l := handoff()
	// A registry read names no entry: the shard holds many ranges'.
	l.request(9.1, "b", "get", "", "configmaps", operatorNamespace, registryShard("ns", "app"), 200, nil)
	// An object named after no WebApp the log saw created.
	l.request(9.2, "b", "get", "", "services", "ns", "db", 200, nil)
	// Not judged at all: another ConfigMap, an Event, a list.
	l.request(9.3, "b", "patch", "", "configmaps", operatorNamespace, "webapp-operator-certs", 200, map[string]any{"data": map[string]string{"ns.app": "x"}})
	l.request(9.4, "b", "create", "events.k8s.io", "events", "ns", "app.1", 201, nil)
	l.event(9.5, agent("b"), "list", "/apis/apps.example.com/v1/webapps", map[string]string{"resource": "webapps", "apiGroup": "apps.example.com"}, 200, nil, nil)
	// Not a replica: no shard user agent.
	l.event(9.6, "kubectl/v1.37.2", "patch", "/apis/apps.example.com/v1/namespaces/ns/webapps/app",
		map[string]string{"resource": "webapps", "namespace": "ns", "name": "app", "apiGroup": "apps.example.com"}, 200, nil, nil)
	// A list of the Leases without the group's selector is no round.
	l.event(9.7, agent("c"), "list", "/apis/coordination.k8s.io/v1/namespaces/webapp-system/leases?limit=1",
		map[string]string{"resource": "leases", "namespace": operatorNamespace, "apiGroup": "coordination.k8s.io"}, 200, nil, nil)
	v := l.judged(t, 20)
	assert.Empty(t, v.violations)
	assert.Equal(t, 7, v.requests)
	assert.Equal(t, 2, v.unplaced)

	events, _, err := parseAuditLog(strings.NewReader(l.String()))
	require.NoError(t, err)
	j := newAuditJudge(events, shardGroup, operatorNamespace, sharding.DefaultRanges, at(20))
	assert.Empty(t, j.lists["c"])
	assert.Len(t, j.lists["a"], 3)

	// The registry write of two entries concerns both WebApps' ranges.
	body, err := json.Marshal(map[string]any{"data": map[string]any{"ns.app": "http://app.ns.svc:80", "other.web": nil, "bad": "x"}})
	require.NoError(t, err)
	assert.ElementsMatch(t, []types.NamespacedName{{Namespace: "ns", Name: "app"}, {Namespace: "other", Name: "web"}}, registryEntries(body))
	assert.Empty(t, registryEntries(nil))
}

// TestAuditJudgeNoReads: a log without the replicas' Lease reads is the
// policy's fault, not a clean verdict.
func TestAuditJudgeNoReads(t *testing.T) {
	l := &auditLog{}
	l.create(0.5, "ns", "app", appUID)
	l.patchApp(1, "a", 200)
	v := l.judged(t, 10)
	require.Len(t, v.violations, 2)
	assert.Contains(t, v.violations[1], "the audit log holds no read of the group's Leases by any of [a b]")
	assert.Contains(t, v.violations[0], "it had no window for the range")
}

// TestParseAuditLog: events of the ResponseComplete stage are kept; a
// line cut short, in the middle (a killed API server) or at the end (one
// being written), is skipped and counted.
func TestParseAuditLog(t *testing.T) {
	l := handoff()
	started := strings.Replace(l.lines[1], `"ResponseComplete"`, `"ResponseStarted"`, 1)
	text := l.lines[0] + "\n" + `{"kind":"Event","sta` + "\n" + started + "\n\n" + l.lines[2] + "\n" + `{"kind":"Event","stage":"Resp`
	events, skipped, err := parseAuditLog(strings.NewReader(text))
	require.NoError(t, err)
	assert.Equal(t, 2, skipped)
	require.Len(t, events, 2)
	assert.Equal(t, "create", events[0].Verb)
	assert.Equal(t, at(0.5), events[0].Received)
	assert.Equal(t, at(0.51), events[0].Completed)
	assert.Equal(t, 201, events[0].code())
	assert.Equal(t, "list", events[1].Verb)
}

// TestParseAuditLogOfTheAPIServersType: an event of the API server's own
// type (audit.k8s.io/v1), encoded as its JSON log backend encodes it, reads
// back with its times at the microsecond, its code and its body.
func TestParseAuditLogOfTheAPIServersType(t *testing.T) {
	body := []byte(`{"metadata":{"annotations":{"` + claimsAnnotation + `":"1-2"}},"spec":{"leaseDurationSeconds":15}}`)
	e := auditv1.Event{
		TypeMeta: metav1.TypeMeta{Kind: "Event", APIVersion: "audit.k8s.io/v1"},
		Level:    auditv1.LevelRequest, Stage: auditv1.StageResponseComplete, Verb: "update",
		RequestURI: "/apis/coordination.k8s.io/v1/namespaces/webapp-system/leases/webapp-operator-a",
		UserAgent:  agent("a"),
		ObjectRef: &auditv1.ObjectReference{Resource: "leases", Namespace: operatorNamespace, Name: shardGroup + "-a",
			APIGroup: "coordination.k8s.io", APIVersion: "v1"},
		ResponseStatus:           &metav1.Status{Code: 200},
		RequestObject:            &runtime.Unknown{Raw: body, ContentType: runtime.ContentTypeJSON},
		RequestReceivedTimestamp: metav1.NewMicroTime(at(1).Add(1400 * time.Nanosecond)),
		StageTimestamp:           metav1.NewMicroTime(at(1.25)),
	}
	line, err := json.Marshal(e)
	require.NoError(t, err)
	events, skipped, err := parseAuditLog(strings.NewReader(string(line) + "\n"))
	require.NoError(t, err)
	require.Zero(t, skipped)
	require.Len(t, events, 1)
	got := events[0]
	assert.Equal(t, at(1.000001), got.Received, "microseconds")
	assert.Equal(t, at(1.25), got.Completed)
	assert.True(t, got.accepted())
	assert.True(t, got.is("coordination.k8s.io", "leases"))
	j := newAuditJudge(events, shardGroup, operatorNamespace, sharding.DefaultRanges, at(10))
	require.Len(t, j.leases[shardGroup+"-a"], 1)
	assert.Equal(t, []bool{false, true, true}, j.leases[shardGroup+"-a"][0].claims[:3])
	assert.Equal(t, 15*time.Second, j.leases[shardGroup+"-a"][0].duration)
}

func TestShardIdentity(t *testing.T) {
	id, ok := shardIdentity(agent("chaos8-a-1"))
	assert.True(t, ok)
	assert.Equal(t, "chaos8-a-1", id)
	for _, ua := range []string{"webapp-operator/v0.0.0 (linux/amd64) kubernetes/$Format", "x shard/", "x shard/a b"} {
		_, ok := shardIdentity(ua)
		assert.False(t, ok, ua)
	}
}

func TestParseRangeSet(t *testing.T) {
	set, err := parseRangeSet("0-2,5", 8)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, true, true, false, false, true, false, false}, set)
	set, err = parseRangeSet("", 4)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, false, false, false}, set)
	for _, bad := range []string{"8", "3-1", "x", "1-", "-1"} {
		_, err := parseRangeSet(bad, 8)
		assert.Error(t, err, bad)
	}
}

// TestChaosAuditPolicy evaluates testdata/chaos-audit-policy.yaml with the
// API server's own policy code (as kube-apiserver loads and applies it)
// against the requests the check reads and the traffic it must not log.
func TestChaosAuditPolicy(t *testing.T) {
	p, err := policy.LoadPolicyFromFile("testdata/chaos-audit-policy.yaml")
	require.NoError(t, err)
	eval := policy.NewPolicyRuleEvaluator(p)
	const (
		admin = "kubernetes-admin"
		kcm   = "system:serviceaccount:kube-system:deployment-controller"
	)
	req := func(who, verb, group, resource, sub, ns, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: &user.DefaultInfo{Name: who}, Verb: verb, APIGroup: group, APIVersion: "v1",
			Resource: resource, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
	}
	for _, tt := range []struct {
		attrs authorizer.AttributesRecord
		want  auditapi.Level
	}{
		// The WebApps' UIDs, from any creator.
		{req(admin, "create", "apps.example.com", "webapps", "", "ns", ""), auditapi.LevelRequestResponse},
		{req(operatorUser, "create", "apps.example.com", "webapps", "", "ns", ""), auditapi.LevelRequestResponse},
		// The replicas' single-object requests, reads included.
		{req(operatorUser, "get", "apps.example.com", "webapps", "", "ns", "app"), auditapi.LevelMetadata},
		{req(operatorUser, "patch", "apps.example.com", "webapps", "status", "ns", "app"), auditapi.LevelMetadata},
		{req(operatorUser, "update", "apps.example.com", "webapps", "finalizers", "ns", "app"), auditapi.LevelMetadata},
		{req(operatorUser, "patch", "apps", "deployments", "", "ns", "app"), auditapi.LevelMetadata},
		{req(operatorUser, "create", "apps", "deployments", "", "ns", ""), auditapi.LevelMetadata},
		{req(operatorUser, "get", "", "services", "", "ns", "app"), auditapi.LevelMetadata},
		{req(operatorUser, "patch", "", "configmaps", "", operatorNamespace, "webapp-registry-03"), auditapi.LevelRequest},
		{req(operatorUser, "create", "", "configmaps", "", operatorNamespace, ""), auditapi.LevelRequest},
		// The Lease protocol: the rounds' reads and writes, the deletions.
		{req(operatorUser, "list", "coordination.k8s.io", "leases", "", operatorNamespace, ""), auditapi.LevelRequest},
		{req(operatorUser, "create", "coordination.k8s.io", "leases", "", operatorNamespace, ""), auditapi.LevelRequest},
		{req(operatorUser, "update", "coordination.k8s.io", "leases", "", operatorNamespace, shardGroup+"-a"), auditapi.LevelRequest},
		{req(operatorUser, "delete", "coordination.k8s.io", "leases", "", operatorNamespace, shardGroup+"-a"), auditapi.LevelRequest},
		// Not logged: watches, the caches' lists, everyone else's traffic.
		{req(operatorUser, "watch", "coordination.k8s.io", "leases", "", operatorNamespace, ""), auditapi.LevelNone},
		{req(operatorUser, "watch", "apps.example.com", "webapps", "", "", ""), auditapi.LevelNone},
		{req(operatorUser, "list", "apps.example.com", "webapps", "", "", ""), auditapi.LevelNone},
		{req(admin, "patch", "apps.example.com", "webapps", "", "ns", "app"), auditapi.LevelNone},
		{req(kcm, "update", "apps", "deployments", "status", "ns", "app"), auditapi.LevelNone},
		{req(operatorUser, "patch", "", "configmaps", "", "ns", "other"), auditapi.LevelNone},
		{req("system:kube-scheduler", "update", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"), auditapi.LevelNone},
		{req(operatorUser, "create", "", "pods", "", "ns", ""), auditapi.LevelNone},
		{req(operatorUser, "create", "events.k8s.io", "events", "", "ns", ""), auditapi.LevelNone},
		{authorizer.AttributesRecord{User: &user.DefaultInfo{Name: operatorUser}, Verb: "get", Path: "/readyz"}, auditapi.LevelNone},
	} {
		a := tt.attrs
		got := eval.EvaluatePolicyRule(a)
		assert.Equal(t, tt.want, got.Level, "%s %s %s/%s/%s %s/%s", a.User.GetName(), a.Verb, a.APIGroup, a.Resource, a.Subresource, a.Namespace, a.Name)
		if got.Level != auditapi.LevelNone {
			assert.Equal(t, []auditapi.Stage{auditapi.StageRequestReceived}, got.OmitStages, "one event a request")
			assert.True(t, got.OmitManagedFields)
		}
	}
	assert.Equal(t, "system:serviceaccount:webapp-system:webapp-controller-manager", operatorUser, "the user the policy names")
}

// TestAuditSection: the report's rows of the audit verdict, and the line
// that says why there are none.
func TestAuditSection(t *testing.T) {
	got := auditSection([]chaosResult{{Number: 7}, {Number: 8, Audit: &auditFigures{Requests: 1200, Unplaced: 3, Windows: 150,
		Handoffs: 90, InFlight: 4, NearWrites: 35, Takeovers: 20}}})
	assert.Contains(t, got, "| 8 | 1200 | 3 | 150 | 90 | 4 | 20 | 35 | 0 |\n")
	assert.NotContains(t, got, "| 7 |")
	assert.Contains(t, auditSection([]chaosResult{{Number: 9}}), "kept no audit log (E2E_AUDIT=0)")
	assert.Contains(t, auditSection([]chaosResult{{Number: 1}}), "No sharding scenario ran.")
}

// TestShardClaims: what scenarios 8-10 claim to exercise, in the short and
// the long form.
func TestShardClaims(t *testing.T) {
	t.Setenv("E2E_CHAOS", "")
	assert.Equal(t, exercise{handoffs: 1, takeovers: 1}, shardKillClaims())
	assert.Equal(t, exercise{handoffs: 4}, shardScaleClaims())
	assert.Equal(t, exercise{handoffs: 1, takeovers: 1}, shardPartitionClaims())
	t.Setenv("E2E_CHAOS", "long")
	assert.Equal(t, exercise{handoffs: 1, takeovers: 1, inFlight: 1, nearWrites: 1}, shardKillClaims())
	assert.Equal(t, exercise{handoffs: 12, inFlight: 1, nearWrites: 1}, shardScaleClaims())
	assert.Equal(t, exercise{handoffs: 3, takeovers: 3, nearWrites: 1}, shardPartitionClaims())

	var v auditVerdict
	short := v.shortOf(shardKillClaims())
	require.Len(t, short, 4)
	assert.Equal(t, "the scenario did not exercise what it claims: 0 handoffs with a pass of the old owner in flight in the audit log, at least 1 expected", short[1])
}
