//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// eventInitial marks the version an objectWatch started from (read with a
// GET before the watch), which no watch event delivers.
const eventInitial watch.EventType = "INITIAL"

// Restarting a watch the apiserver closed (its request timeout) is normal;
// this many restarts, or an error event, fail the test.
const maxWatchRestarts = 10

// timelineEvent is one version of a watched object, with the etcd revision
// that wrote it.
type timelineEvent struct {
	kind string // "WebApp" or "Deployment"
	typ  watch.EventType
	rv   string
	obj  client.Object
}

// objectWatch records every version of one object from a resourceVersion
// on, in the order the apiserver wrote them: a watch misses no write, where
// polling could. A watch the server closes is resumed from the last
// resourceVersion seen (event or bookmark); an error event (410 Gone: the
// history to resume from is compacted) or too many restarts stop it and
// fail the test.
type objectWatch struct {
	kind, ns, name string

	mu       sync.Mutex
	events   []timelineEvent
	lastRV   string // of the last event or bookmark
	restarts int
	err      error
}

// watchObject starts an objectWatch of initial's object (same namespace and
// name), from initial's resourceVersion, with list the list type of its
// kind. initial itself is the first event, typed eventInitial. The watch
// ends with the test; a failure of the watch fails it then, if no check
// has already.
func watchObject(ctx context.Context, t *testing.T, cfg *envconf.Config, kind string, list client.ObjectList, initial client.Object) *objectWatch {
	t.Helper()
	c, err := client.NewWithWatch(cfg.Client().RESTConfig(), client.Options{Scheme: cfg.Client().Resources().GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ow := &objectWatch{kind: kind, ns: initial.GetNamespace(), name: initial.GetName(), lastRV: initial.GetResourceVersion()}
	ow.events = append(ow.events, timelineEvent{kind: kind, typ: eventInitial, rv: initial.GetResourceVersion(), obj: initial.DeepCopyObject().(client.Object)})
	ctx, cancel := context.WithCancel(ctx)
	open := func(rv string) (watch.Interface, error) {
		return c.Watch(ctx, list.DeepCopyObject().(client.ObjectList),
			client.InNamespace(ow.ns), client.MatchingFields{"metadata.name": ow.name},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
	}
	w, err := open(ow.lastRV)
	if err != nil {
		cancel()
		t.Fatalf("watch %s %s/%s from resourceVersion %s: %v", kind, ow.ns, ow.name, ow.lastRV, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ow.run(ctx, w, open)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		ow.mu.Lock()
		defer ow.mu.Unlock()
		if ow.restarts > 0 {
			t.Logf("watch %s %s/%s: resumed %d times", kind, ow.ns, ow.name, ow.restarts)
		}
		if ow.err != nil {
			t.Errorf("watch %s %s/%s: %v", kind, ow.ns, ow.name, ow.err)
		}
	})
	return ow
}

func (ow *objectWatch) run(ctx context.Context, w watch.Interface, open func(rv string) (watch.Interface, error)) {
	for {
		err := ow.consume(ctx, w)
		w.Stop()
		if ctx.Err() != nil {
			return
		}
		ow.mu.Lock()
		if err == nil && ow.restarts >= maxWatchRestarts {
			err = fmt.Errorf("closed %d times, last at resourceVersion %s", ow.restarts+1, ow.lastRV)
		}
		if err != nil {
			ow.err = err
			ow.mu.Unlock()
			return
		}
		// The server ended the watch (request timeout): resume it.
		ow.restarts++
		rv := ow.lastRV
		ow.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if w, err = open(rv); err != nil {
			if ctx.Err() != nil {
				return
			}
			ow.mu.Lock()
			ow.err = fmt.Errorf("resume from resourceVersion %s: %w", rv, err)
			ow.mu.Unlock()
			return
		}
	}
}

// consume records w's events until it closes (nil) or delivers an error
// or something unexpected.
func (ow *objectWatch) consume(ctx context.Context, w watch.Interface) error {
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case ev, ok = <-w.ResultChan():
			if !ok {
				return nil
			}
		}
		if ev.Type == watch.Error {
			return fmt.Errorf("error event after resourceVersion %s: %w", ow.last(), apierrors.FromObject(ev.Object))
		}
		obj, isObj := ev.Object.(client.Object)
		if !isObj {
			return fmt.Errorf("%s event with a %T", ev.Type, ev.Object)
		}
		if err := ow.record(ev.Type, obj); err != nil {
			return err
		}
	}
}

// record appends one event; a bookmark only moves the resourceVersion to
// resume from.
func (ow *objectWatch) record(typ watch.EventType, obj client.Object) error {
	rv := obj.GetResourceVersion()
	ow.mu.Lock()
	defer ow.mu.Unlock()
	c, err := resourceversion.CompareResourceVersion(rv, ow.lastRV)
	if err != nil {
		return fmt.Errorf("%s event: %w", typ, err)
	}
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted:
		if c <= 0 {
			return fmt.Errorf("%s event at resourceVersion %s, not after %s", typ, rv, ow.lastRV)
		}
		ow.events = append(ow.events, timelineEvent{kind: ow.kind, typ: typ, rv: rv, obj: obj})
	case watch.Bookmark:
		if c < 0 {
			return fmt.Errorf("bookmark at resourceVersion %s, before %s", rv, ow.lastRV)
		}
	default:
		return fmt.Errorf("unknown event type %q at resourceVersion %s", typ, rv)
	}
	ow.lastRV = rv
	return nil
}

func (ow *objectWatch) last() string {
	ow.mu.Lock()
	defer ow.mu.Unlock()
	return ow.lastRV
}

// snapshot returns the events so far, and the error that stopped the
// watch, if one did.
func (ow *objectWatch) snapshot() ([]timelineEvent, error) {
	ow.mu.Lock()
	defer ow.mu.Unlock()
	return slices.Clone(ow.events), ow.err
}

// caughtUp reports whether the watch has delivered every version up to rv.
func (ow *objectWatch) caughtUp(rv string) (bool, error) {
	ow.mu.Lock()
	defer ow.mu.Unlock()
	if ow.err != nil {
		return false, ow.err
	}
	c, err := resourceversion.CompareResourceVersion(ow.lastRV, rv)
	return err == nil && c >= 0, err
}

// syncedHorizon waits until ow has delivered the version a consistent LIST
// of its object returns, and returns that LIST's resourceVersion: the
// object's history up to that revision is then complete, also when the
// object did not change for a while (the watch delivers nothing then).
func syncedHorizon(ctx context.Context, t *testing.T, cfg *envconf.Config, ow *objectWatch, list client.ObjectList) string {
	t.Helper()
	var horizon string
	eventually(ctx, t, convergeTimeout, fmt.Sprintf("the watch of %s %s/%s caught up with a LIST", ow.kind, ow.ns, ow.name), func(ctx context.Context) (bool, string, error) {
		if horizon == "" {
			l := list.DeepCopyObject().(client.ObjectList)
			if err := cfg.Client().Resources(ow.ns).List(ctx, l, func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + ow.name }); err != nil {
				return false, "", err
			}
			items, err := meta.ExtractList(l)
			if err != nil || len(items) != 1 {
				return false, "", fmt.Errorf("LIST %s %s/%s: %d items (%v)", ow.kind, ow.ns, ow.name, len(items), err)
			}
			item, err := meta.Accessor(items[0])
			if err != nil {
				return false, "", err
			}
			// Wait for the item first, then trust the list's revision.
			ok, err := ow.caughtUp(item.GetResourceVersion())
			if err != nil || !ok {
				return false, fmt.Sprintf("watch at %s, object at %s", ow.last(), item.GetResourceVersion()), err
			}
			horizon = l.GetResourceVersion()
		}
		return true, "", nil
	})
	return horizon
}

// rolloutReport is what checkReadyAfterRollout found.
type rolloutReport struct {
	// newDeploymentGen is the generation of the first Deployment version
	// whose template carries the new image; 0 if none does.
	newDeploymentGen int64
	// readyChecked counts the WebApp versions at the new generation with
	// Ready=True, up to the horizon.
	readyChecked int
	// violations: WebApp rv -> why the Deployment was not rolled out then.
	violations map[string]string
	// notes: "<kind>/<rv>" -> a remark for the timeline.
	notes map[string]string
}

// checkReadyAfterRollout checks that every WebApp version (of apps) whose
// status.observedGeneration is gen and whose Ready condition is True was
// written while the Deployment (deps) was rolled out with image: "while" is
// the Deployment's latest version with a smaller resourceVersion (etcd
// revisions order writes across kinds). WebApp versions after horizon,
// where the Deployment's history is not known to be complete, are not
// checked.
func checkReadyAfterRollout(apps, deps []timelineEvent, gen int64, image, horizon string) (rolloutReport, error) {
	rep := rolloutReport{violations: map[string]string{}, notes: map[string]string{}}
	if err := sortByRV(deps); err != nil {
		return rep, err
	}
	if err := sortByRV(apps); err != nil {
		return rep, err
	}
	for _, e := range deps {
		if d, ok := e.obj.(*appsv1.Deployment); ok && e.typ != watch.Deleted && templateImage(d) == image {
			rep.newDeploymentGen = d.Generation
			break
		}
	}
	for _, e := range deps {
		_, why := deploymentRolledOutWith(e, image, rep.newDeploymentGen)
		rep.notes[e.kind+"/"+e.rv] = why
	}
	for _, e := range apps {
		w, ok := e.obj.(*webappv1.WebApp)
		if !ok || e.typ == watch.Deleted || ptr.Deref(w.Status.ObservedGeneration, 0) != gen || !meta.IsStatusConditionTrue(w.Status.Conditions, conditionReady) {
			continue
		}
		if c, err := resourceversion.CompareResourceVersion(e.rv, horizon); err != nil {
			return rep, err
		} else if c > 0 {
			rep.notes[e.kind+"/"+e.rv] = "after the horizon " + horizon + ": not checked"
			continue
		}
		rep.readyChecked++
		// The Deployment at that moment: its latest version before e.
		var at *timelineEvent
		for i := range deps {
			c, err := resourceversion.CompareResourceVersion(deps[i].rv, e.rv)
			if err != nil {
				return rep, err
			}
			if c >= 0 {
				break
			}
			at = &deps[i]
		}
		if at == nil {
			rep.violations[e.rv] = "no version of the Deployment before it is known"
			continue
		}
		if ok, why := deploymentRolledOutWith(*at, image, rep.newDeploymentGen); !ok {
			rep.violations[e.rv] = fmt.Sprintf("the Deployment at rv %s: %s", at.rv, why)
		} else {
			rep.notes[e.kind+"/"+e.rv] = "ok: the Deployment at rv " + at.rv + " was rolled out"
		}
	}
	for rv, why := range rep.violations {
		rep.notes["WebApp/"+rv] = fmt.Sprintf("<-- VIOLATION: Ready=True at generation %d, but %s", gen, why)
	}
	return rep, nil
}

// deploymentRolledOutWith reports whether a version of the Deployment has
// rolled out the template carrying image, whose first generation is
// minGen: kstatus' rules for a Current Deployment (observedGeneration
// caught up; updatedReplicas = spec.replicas; replicas = updatedReplicas,
// no old pods left; availableReplicas = spec.replicas), and why not.
func deploymentRolledOutWith(e timelineEvent, image string, minGen int64) (bool, string) {
	d, ok := e.obj.(*appsv1.Deployment)
	switch {
	case !ok:
		return false, fmt.Sprintf("a %T", e.obj)
	case e.typ == watch.Deleted:
		return false, "deleted"
	case templateImage(d) != image:
		return false, "not rolled out: its template has image " + templateImage(d)
	case minGen == 0 || d.Generation < minGen:
		return false, fmt.Sprintf("not rolled out: generation %d, before the new template's %d", d.Generation, minGen)
	case d.Status.ObservedGeneration < d.Generation:
		return false, fmt.Sprintf("not rolled out: observedGeneration %d < generation %d", d.Status.ObservedGeneration, d.Generation)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch s := d.Status; {
	case s.UpdatedReplicas != want:
		return false, fmt.Sprintf("not rolled out: updatedReplicas %d != spec.replicas %d", s.UpdatedReplicas, want)
	case s.Replicas != s.UpdatedReplicas:
		return false, fmt.Sprintf("not rolled out: replicas %d != updatedReplicas %d (old pods left)", s.Replicas, s.UpdatedReplicas)
	case s.AvailableReplicas != want:
		return false, fmt.Sprintf("not rolled out: availableReplicas %d != spec.replicas %d", s.AvailableReplicas, want)
	}
	return true, "rolled out"
}

func templateImage(d *appsv1.Deployment) string {
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		return cs[0].Image
	}
	return ""
}

func sortByRV(events []timelineEvent) error {
	var bad error
	slices.SortStableFunc(events, func(a, b timelineEvent) int {
		c, err := resourceversion.CompareResourceVersion(a.rv, b.rv)
		bad = cmp.Or(bad, err)
		return c
	})
	return bad
}

// formatTimeline lists the events of every kind in resourceVersion order,
// one a line, with rep's notes.
func formatTimeline(rep rolloutReport, kinds ...[]timelineEvent) string {
	var all []timelineEvent
	for _, k := range kinds {
		all = append(all, k...)
	}
	_ = sortByRV(all)
	var b strings.Builder
	for _, e := range all {
		fmt.Fprintf(&b, "  rv=%-8s %-10s %-8s %s", e.rv, e.kind, e.typ, describeVersion(e.obj))
		if n := rep.notes[e.kind+"/"+e.rv]; n != "" {
			fmt.Fprintf(&b, "  [%s]", n)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// describeVersion is the part of a WebApp or Deployment version the
// timeline shows.
func describeVersion(obj client.Object) string {
	switch o := obj.(type) {
	case *webappv1.WebApp:
		cond := func(typ string) string {
			if c := meta.FindStatusCondition(o.Status.Conditions, typ); c != nil {
				return fmt.Sprintf("%s(%s)", c.Status, c.Reason)
			}
			return "-"
		}
		return fmt.Sprintf("generation=%d observedGeneration=%d Ready=%s Reconciling=%s readyReplicas=%d",
			o.Generation, ptr.Deref(o.Status.ObservedGeneration, 0), cond(conditionReady), cond(conditionReconciling), ptr.Deref(o.Status.ReadyReplicas, 0))
	case *appsv1.Deployment:
		replicas := "nil"
		if o.Spec.Replicas != nil {
			replicas = fmt.Sprint(*o.Spec.Replicas)
		}
		return fmt.Sprintf("generation=%d observedGeneration=%d image=%s spec.replicas=%s replicas=%d updated=%d available=%d",
			o.Generation, o.Status.ObservedGeneration, templateImage(o), replicas, o.Status.Replicas, o.Status.UpdatedReplicas, o.Status.AvailableReplicas)
	default:
		return fmt.Sprintf("%T", obj)
	}
}

// rolloutWatch watches a WebApp and its Deployment (same name) across an
// update of the WebApp.
type rolloutWatch struct {
	app, dep *objectWatch
}

// watchRollout starts watching the WebApp ns/name and its Deployment from
// their current versions; call it before the update.
func watchRollout(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name string) *rolloutWatch {
	t.Helper()
	r := cfg.Client().Resources(ns)
	var d appsv1.Deployment
	if err := r.Get(ctx, name, ns, &d); err != nil {
		t.Fatal(err)
	}
	w, err := getWebApp(ctx, cfg, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return &rolloutWatch{
		app: watchObject(ctx, t, cfg, "WebApp", &webappv1.WebAppList{}, w),
		dep: watchObject(ctx, t, cfg, "Deployment", &appsv1.DeploymentList{}, &d),
	}
}

// requireReadyOnlyAfterRollout fails t unless the WebApp said Ready=True at
// generation gen at least once, and only while its Deployment was rolled
// out with image: what `kubectl wait --for=condition=Ready`, Flux and Argo
// CD rely on. Call it after the rollout converged; the failure lists the
// timeline.
func (rw *rolloutWatch) requireReadyOnlyAfterRollout(ctx context.Context, t *testing.T, cfg *envconf.Config, gen int64, image string) {
	t.Helper()
	// The WebApp first: the Deployment's horizon is then the later one, and
	// every WebApp version up to the WebApp's horizon is checkable.
	syncedHorizon(ctx, t, cfg, rw.app, &webappv1.WebAppList{})
	horizon := syncedHorizon(ctx, t, cfg, rw.dep, &appsv1.DeploymentList{})
	apps, appErr := rw.app.snapshot()
	deps, depErr := rw.dep.snapshot()
	if err := errors.Join(appErr, depErr); err != nil {
		t.Fatalf("watches: %v", err)
	}
	rep, err := checkReadyAfterRollout(apps, deps, gen, image, horizon)
	if err != nil {
		t.Fatal(err)
	}
	timeline := formatTimeline(rep, apps, deps)
	switch {
	case len(rep.violations) > 0:
		t.Errorf("the WebApp said Ready=True at generation %d before its Deployment had rolled out %s (generation %d) %d time(s); timeline up to rv %s:\n%s",
			gen, image, rep.newDeploymentGen, len(rep.violations), horizon, timeline)
	case rep.readyChecked == 0:
		t.Errorf("no WebApp status at generation %d with Ready=True seen up to rv %s; timeline:\n%s", gen, horizon, timeline)
	default:
		t.Logf("%d WebApp status(es) at generation %d said Ready=True, each after the Deployment rolled out %s (generation %d); timeline up to rv %s:\n%s",
			rep.readyChecked, gen, image, rep.newDeploymentGen, horizon, timeline)
	}
}

// TestCheckReadyAfterRollout runs the timeline check on made-up histories:
// the stale-cache bug (Ready=True at the new generation from the old,
// rolled-out Deployment) is caught, a correct rollout passes.
func TestCheckReadyAfterRollout(t *testing.T) {
	const oldImage, newImage = "web:v1", "web:v2"
	dep := func(rv string, gen, observed int64, image string, replicas, updated, available int32) timelineEvent {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Generation: gen}}
		d.Spec.Replicas = new(int32(3))
		d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web", Image: image}}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available}
		return timelineEvent{kind: "Deployment", typ: watch.Modified, rv: rv, obj: d}
	}
	app := func(rv string, gen, observed int64, ready metav1.ConditionStatus) timelineEvent {
		w := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Generation: gen}}
		w.Status.ObservedGeneration = &observed
		w.Status.Conditions = []metav1.Condition{{Type: conditionReady, Status: ready, ObservedGeneration: observed}}
		return timelineEvent{kind: "WebApp", typ: watch.Modified, rv: rv, obj: w}
	}
	deps := []timelineEvent{
		dep("100", 1, 1, oldImage, 3, 3, 3),
		dep("110", 2, 1, newImage, 3, 3, 3), // the operator applied the new image
		dep("112", 2, 2, newImage, 4, 1, 3), // rolling
		dep("130", 2, 2, newImage, 3, 3, 3), // rolled out
	}
	tests := []struct {
		name          string
		apps          []timelineEvent
		horizon       string
		wantChecked   int
		wantViolation []string
	}{
		{
			name: "Ready only after the rollout",
			apps: []timelineEvent{
				app("99", 1, 1, metav1.ConditionTrue), app("105", 2, 1, metav1.ConditionTrue),
				app("115", 2, 2, metav1.ConditionFalse), app("131", 2, 2, metav1.ConditionTrue),
			},
			horizon: "200", wantChecked: 1,
		},
		{
			name: "Ready from a stale view of the old Deployment",
			apps: []timelineEvent{
				app("99", 1, 1, metav1.ConditionTrue), app("111", 2, 2, metav1.ConditionTrue),
				app("115", 2, 2, metav1.ConditionFalse), app("131", 2, 2, metav1.ConditionTrue),
			},
			horizon: "200", wantChecked: 2, wantViolation: []string{"111"},
		},
		{
			name:    "Ready before the new template was applied",
			apps:    []timelineEvent{app("105", 2, 2, metav1.ConditionTrue), app("131", 2, 2, metav1.ConditionTrue)},
			horizon: "200", wantChecked: 2, wantViolation: []string{"105"},
		},
		{
			name:    "Ready before any known Deployment version",
			apps:    []timelineEvent{app("99", 2, 2, metav1.ConditionTrue)},
			horizon: "200", wantChecked: 1, wantViolation: []string{"99"},
		},
		{
			name:    "never Ready at the new generation",
			apps:    []timelineEvent{app("99", 1, 1, metav1.ConditionTrue), app("115", 2, 2, metav1.ConditionFalse)},
			horizon: "200", wantChecked: 0,
		},
		{
			name:    "after the horizon: not checked",
			apps:    []timelineEvent{app("1000", 2, 2, metav1.ConditionTrue)},
			horizon: "200", wantChecked: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := checkReadyAfterRollout(tt.apps, slices.Clone(deps), 2, newImage, tt.horizon)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(maps.Keys(rep.violations))
			if rep.readyChecked != tt.wantChecked || !slices.Equal(got, tt.wantViolation) || rep.newDeploymentGen != 2 {
				t.Errorf("checked %d, violations %v, new Deployment generation %d; want %d, %v, 2\n%s",
					rep.readyChecked, got, rep.newDeploymentGen, tt.wantChecked, tt.wantViolation, formatTimeline(rep, tt.apps, deps))
			}
		})
	}
}
