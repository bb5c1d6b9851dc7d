//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// labelManaged marks every object the operator creates for a WebApp.
const labelManaged = "app.kubernetes.io/managed-by"

// invariants checks the state of one chaos namespace against the model of
// what its user asked for, reading the apiserver directly (never a cache:
// the point is the apiserver's truth). Every scenario ends with it.
//
// The invariants (issue 18):
//   - every WebApp that exists is converged: observedGeneration ==
//     generation, and Ready=True, or Ready=False with the condition that
//     explains it (DatabaseReady=False DatabaseNotFound for an app whose
//     dbRef names a Service that does not exist);
//   - every deleted WebApp is gone; nothing is stuck Terminating;
//   - exactly one Deployment and one Service per WebApp, controlled by it;
//     none whose owner is gone (orphaned);
//   - the route registry holds exactly the live WebApps' entries of the
//     namespace, each with the right address, once, in its own shard (a
//     WebApp waiting for its database has not reached the register step:
//     its entry is not checked);
//   - no update the user made was lost: the spec fields the workload set
//     (image, replicas, dbRef) are in the Deployment;
//   - no object was written by two leaders at once (see leaderLog).
type invariants struct {
	c          client.Client // uncached
	ns         string
	registryNS string
	model      map[string]appModel
}

// newInvariants returns the checker for ns against model (app -> what the
// user last asked).
func newInvariants(c client.Client, ns string, model map[string]appModel) *invariants {
	return &invariants{c: c, ns: ns, registryNS: operatorNamespace, model: model}
}

// expectedNotReady says why a WebApp the user configured this way cannot
// be Ready: the DatabaseReady reason that must explain it.
func expectedNotReady(m appModel) (reason string, notReady bool) {
	if m.DBRef == chaosMissingDB {
		return "DatabaseNotFound", true
	}
	return "", false
}

// appProgress is how far a live WebApp got, for the figures that split
// the time to converge between the operator and the cluster.
type appProgress struct {
	// applied: every invariant that is the operator's own work holds
	// (observedGeneration current, the user's spec in its Deployment, one
	// Deployment and Service, the registry right); what may be missing is
	// the cluster's rollout (kube-controller-manager, kube-scheduler, kwok)
	// and the Ready status that follows it.
	applied bool
	// rolledOut: its Deployment is rolled out (or it needs none).
	rolledOut bool
	// converged: all of its invariants hold.
	converged bool
}

// check returns every violation, and how far each live app of the model
// got (for the time-to-converge figures).
func (iv *invariants) check(ctx context.Context) (violations []string, progress map[string]appProgress, err error) {
	var apps webappv1.WebAppList
	if err := iv.c.List(ctx, &apps, client.InNamespace(iv.ns)); err != nil {
		return nil, nil, fmt.Errorf("listing WebApps in %s: %w", iv.ns, err)
	}
	var deployments appsv1.DeploymentList
	if err := iv.c.List(ctx, &deployments, client.InNamespace(iv.ns)); err != nil {
		return nil, nil, fmt.Errorf("listing Deployments in %s: %w", iv.ns, err)
	}
	var services corev1.ServiceList
	if err := iv.c.List(ctx, &services, client.InNamespace(iv.ns)); err != nil {
		return nil, nil, fmt.Errorf("listing Services in %s: %w", iv.ns, err)
	}
	registry, err := readRegistry(ctx, iv.c, iv.registryNS)
	if err != nil {
		return nil, nil, err
	}

	bad := map[string][]string{} // app ("" for the namespace) -> violations
	add := func(app, format string, args ...any) { bad[app] = append(bad[app], fmt.Sprintf(format, args...)) }
	// The violations that wait on the cluster's rollout, kept apart for
	// appProgress; they are violations all the same.
	rollout, notRolledOut := map[string][]string{}, map[string]bool{}
	addRollout := func(app, format string, args ...any) {
		rollout[app] = append(rollout[app], fmt.Sprintf(format, args...))
	}

	live := map[string]*webappv1.WebApp{}
	for i := range apps.Items {
		w := &apps.Items[i]
		live[w.Name] = w
		m, known := iv.model[w.Name]
		switch {
		case !known:
			add(w.Name, "WebApp %s exists but the workload never created it", w.Name)
		case m.Deleted:
			add(w.Name, "WebApp %s was deleted but still exists (deletionTimestamp %v, finalizers %v)", w.Name, w.DeletionTimestamp, w.Finalizers)
		case w.DeletionTimestamp != nil:
			add(w.Name, "WebApp %s is Terminating (finalizers %v) though never deleted", w.Name, w.Finalizers)
		default:
			iv.checkApp(w, m, add, addRollout)
		}
	}
	for name, m := range iv.model {
		if !m.Deleted && live[name] == nil {
			add(name, "WebApp %s is missing", name)
		}
	}

	owned := func(kind string, objs []client.Object) map[string]client.Object {
		byApp := map[string]client.Object{}
		for _, o := range objs {
			ref := metav1.GetControllerOf(o)
			if o.GetLabels()[labelManaged] != "webapp-operator" && ref == nil {
				continue // not the operator's (the database Service)
			}
			if ref == nil || ref.Kind != "WebApp" {
				add(o.GetName(), "%s %s is labelled as the operator's but has no WebApp controller", kind, o.GetName())
				continue
			}
			w := live[ref.Name]
			if w == nil || w.UID != ref.UID {
				add(ref.Name, "%s %s is orphaned: its WebApp %s (uid %s) is gone", kind, o.GetName(), ref.Name, ref.UID)
				continue
			}
			if prev, dup := byApp[ref.Name]; dup {
				add(ref.Name, "WebApp %s controls two %ss: %s and %s", ref.Name, kind, prev.GetName(), o.GetName())
			}
			byApp[ref.Name] = o
		}
		return byApp
	}
	deps := owned("Deployment", ptrs(deployments.Items))
	svcs := owned("Service", ptrs(services.Items))

	prefix := iv.ns + "."
	for key, entries := range registry {
		name, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue // another namespace's entry
		}
		for _, e := range entries {
			if m, known := iv.model[name]; !known || m.Deleted {
				add(name, "the route registry (%s) still holds %s=%s for a WebApp that does not exist (written by: %s)", e.configMap, key, e.value, e.writers)
			} else if shard := registryShard(iv.ns, name); e.configMap != shard {
				add(name, "the route registry holds %s=%s in %s, not in its shard %s", key, e.value, e.configMap, shard)
			}
		}
	}
	for name, w := range live {
		m := iv.model[name]
		if m.Deleted || w.DeletionTimestamp != nil {
			continue
		}
		_, notReady := expectedNotReady(m)
		d, _ := deps[name].(*appsv1.Deployment)
		switch {
		case d == nil && !notReady:
			add(name, "WebApp %s has no Deployment", name)
		case d != nil && !notReady:
			if !iv.checkDeployment(d, m, add) {
				notRolledOut[name] = true
				addRollout(name, "Deployment %s not rolled out: %s", name, describeDeployment(d))
			}
		}
		key, want := prefix+name, fmt.Sprintf("http://%s.%s.svc:80", name, iv.ns)
		if got := registry.value(key, registryShard(iv.ns, name)); !notReady && got != want {
			// A WebApp waiting for its database is not checked: its pass
			// stops at the database step, before the register step, so
			// its entry is whatever it was when it started to wait. One
			// whose Deployment is not rolled out waits at the deployment
			// step, before the register step, by design: its entry is
			// the rollout's part, not the operator's.
			if notRolledOut[name] {
				addRollout(name, "route registry %s=%q, want %q (registered once the Deployment is rolled out)", key, got, want)
			} else {
				add(name, "route registry %s=%q, want %q", key, got, want)
			}
		}
		if svcs[name] == nil && !notReady {
			add(name, "WebApp %s has no Service", name)
		}
	}

	progress = map[string]appProgress{}
	for name, m := range iv.model {
		if m.Deleted {
			continue
		}
		p := appProgress{applied: len(bad[name]) == 0}
		p.rolledOut = p.applied && !notRolledOut[name]
		p.converged = p.applied && len(rollout[name]) == 0
		progress[name] = p
	}
	for _, vs := range bad {
		violations = append(violations, vs...)
	}
	for _, vs := range rollout {
		violations = append(violations, vs...)
	}
	sort.Strings(violations)
	return violations, progress, nil
}

// checkApp checks a live WebApp's status; a WebApp that is not Ready is
// reported through addRollout (it may be waiting for its Deployment).
func (iv *invariants) checkApp(w *webappv1.WebApp, m appModel, add, addRollout func(app, format string, args ...any)) {
	if ptr.Deref(w.Status.ObservedGeneration, 0) != w.Generation {
		add(w.Name, "WebApp %s not converged: %s", w.Name, describeWebApp(w))
		return
	}
	if w.Spec.Image != m.Image || w.Spec.Replicas == nil || *w.Spec.Replicas != m.Replicas || ptr.Deref(w.Spec.DBRef, "") != m.DBRef {
		add(w.Name, "WebApp %s spec image=%s replicas=%v dbRef=%q, the user's last write was %+v", w.Name, w.Spec.Image, w.Spec.Replicas, ptr.Deref(w.Spec.DBRef, ""), m)
	}
	reason, notReady := expectedNotReady(m)
	if !notReady {
		if !meta.IsStatusConditionTrue(w.Status.Conditions, conditionReady) || !w.Status.IsReady() || ptr.Deref(w.Status.ReadyReplicas, 0) != m.Replicas {
			addRollout(w.Name, "WebApp %s not Ready with %d replicas: %s", w.Name, m.Replicas, describeWebApp(w))
		}
		return
	}
	db := meta.FindStatusCondition(w.Status.Conditions, webappv1.DatabaseReady)
	if !meta.IsStatusConditionFalse(w.Status.Conditions, conditionReady) || db == nil || db.Status != metav1.ConditionFalse || db.Reason != reason {
		add(w.Name, "WebApp %s should be Ready=False explained by DatabaseReady=False %s: %s", w.Name, reason, describeWebApp(w))
	}
}

// checkDeployment checks that the user's spec fields reached the
// Deployment, and reports whether it is rolled out.
func (iv *invariants) checkDeployment(d *appsv1.Deployment, m appModel, add func(app, format string, args ...any)) (rolledOut bool) {
	app := d.Name
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		add(app, "Deployment %s has %d containers", app, len(cs))
		return deploymentRolledOut(d, m.Replicas)
	}
	if cs[0].Image != m.Image {
		add(app, "Deployment %s image %s, the user's last write was %s (update lost)", app, cs[0].Image, m.Image)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != m.Replicas {
		add(app, "Deployment %s replicas %v, the user's last write was %d", app, d.Spec.Replicas, m.Replicas)
	}
	host := ""
	for _, e := range cs[0].Env {
		if e.Name == "DATABASE_HOST" {
			host = e.Value
		}
	}
	want := ""
	if m.DBRef != "" {
		want = fmt.Sprintf("%s.%s.svc", m.DBRef, d.Namespace)
	}
	if host != want {
		add(app, "Deployment %s DATABASE_HOST=%q, want %q (dbRef %q)", app, host, want, m.DBRef)
	}
	return deploymentRolledOut(d, m.Replicas)
}

func ptrs[T any, P interface {
	*T
	client.Object
}](items []T) []client.Object {
	out := make([]client.Object, 0, len(items))
	for i := range items {
		out = append(out, P(&items[i]))
	}
	return out
}

// convergence is how a scenario ended: the violations left at the
// deadline (none when it converged) and, per app, how long after the
// last fault it first satisfied its invariants (perApp), the operator's
// own part of them (applied) and its Deployment's rollout (rolledOut);
// sinceWrite times convergence from the later of the last fault and the
// workload's last write to the app.
type convergence struct {
	violations                 []string
	perApp, applied, rolledOut []time.Duration
	sinceWrite                 []time.Duration
}

// awaitConvergence polls the checker until no invariant is violated or
// timeout passes, timing each app from lastFault. lastWrite, when not nil,
// holds the time of the workload's last write to each app.
func (iv *invariants) awaitConvergence(ctx context.Context, lastFault time.Time, lastWrite map[string]time.Time, timeout time.Duration) (convergence, error) {
	first, applied, rolledOut := map[string]time.Duration{}, map[string]time.Duration{}, map[string]time.Duration{}
	firstAt := map[string]time.Time{}
	deadline := time.Now().Add(timeout)
	var res convergence
	for {
		violations, progress, err := iv.check(ctx)
		at := time.Now()
		now := at.Sub(lastFault)
		if err == nil {
			for app, p := range progress {
				if _, seen := applied[app]; !seen && p.applied {
					applied[app] = now
				}
				if _, seen := rolledOut[app]; !seen && p.rolledOut {
					rolledOut[app] = now
				}
				if _, seen := first[app]; !seen && p.converged {
					first[app], firstAt[app] = now, at
				}
			}
			res.violations = violations
			if len(violations) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			if err != nil && res.violations == nil {
				return res, err
			}
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
	res.perApp, res.applied, res.rolledOut = sortedValues(first), sortedValues(applied), sortedValues(rolledOut)
	since := map[string]time.Duration{}
	for app, at := range firstAt {
		from := lastFault
		if w := lastWrite[app]; w.After(from) {
			from = w
		}
		since[app] = at.Sub(from)
	}
	res.sinceWrite = sortedValues(since)
	return res, nil
}

func sortedValues(m map[string]time.Duration) []time.Duration {
	out := make([]time.Duration, 0, len(m))
	for _, d := range m {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// percentile returns the p-th percentile (0..100) of sorted durations,
// nearest rank; zero for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// registryEntry is one key of the route registry: its value, the
// ConfigMap that holds it, and who wrote it (the field managers owning the
// key, from managedFields: for a failure message, since a leftover entry's
// writer is the first thing to know).
type registryEntry struct{ configMap, value, writers string }

// keyWriters lists the managers whose managedFields own data key, with
// their operation and time.
func keyWriters(cm *corev1.ConfigMap, key string) string {
	var out []string
	for _, mf := range cm.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Data map[string]json.RawMessage `json:"f:data"`
		}
		if json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if _, ok := fields.Data["f:"+key]; ok {
			at := ""
			if mf.Time != nil {
				at = mf.Time.UTC().Format("15:04:05")
			}
			out = append(out, fmt.Sprintf("%s %s at %s", mf.Manager, mf.Operation, at))
		}
	}
	if len(out) == 0 {
		return "no manager owns it"
	}
	return strings.Join(out, ", ")
}

// routeRegistry is every key of the route registry's ConfigMaps.
type routeRegistry map[string][]registryEntry

// value is key's value in the ConfigMap shard ("" when it has none).
func (r routeRegistry) value(key, shard string) string {
	for _, e := range r[key] {
		if e.configMap == shard {
			return e.value
		}
	}
	return ""
}

// readRegistry reads the route registry's shards (labelled registryLabel)
// and the legacy single ConfigMap, if an earlier version left one, in ns.
func readRegistry(ctx context.Context, c client.Client, ns string) (routeRegistry, error) {
	var shards corev1.ConfigMapList
	if err := c.List(ctx, &shards, client.InNamespace(ns), client.MatchingLabels{registryLabel: "shard"}); err != nil {
		return nil, fmt.Errorf("listing the route registry's shards: %w", err)
	}
	cms := shards.Items
	var legacy corev1.ConfigMap
	switch err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: legacyRegistryName}, &legacy); {
	case err == nil:
		cms = append(cms, legacy)
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading the legacy route registry: %w", err)
	}
	r := routeRegistry{}
	for i := range cms {
		cm := &cms[i]
		for key, value := range cm.Data {
			r[key] = append(r[key], registryEntry{configMap: cm.Name, value: value, writers: keyWriters(cm, key)})
		}
	}
	return r, nil
}
