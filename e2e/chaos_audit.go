//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
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
