//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// Things of the WebApp operator the suite checks by name; the controller
// package is internal to examples/webapp, so they are repeated here.
const (
	webappFinalizer = "apps.example.com/cleanup"
	labelInstance   = "app.kubernetes.io/instance"
	// The route registry: 16 ConfigMap shards in the operator's
	// namespace, labelled registryLabel=shard (controller.RegistryShard);
	// legacyRegistryName is the single ConfigMap of earlier versions,
	// which the operator empties and deletes.
	registryShards     = 16
	registryLabel      = "apps.example.com/route-registry"
	legacyRegistryName = "webapp-registry"
	// conditionReady and conditionReconciling are the kstatus conditions
	// every reconcilekit reconciler maintains.
	conditionReady       = "Ready"
	conditionReconciling = "Reconciling"
)

// registryShard is the registry ConfigMap that holds the entry of the
// WebApp ns/name: fnv-32a of "<ns>/<name>" modulo registryShards, as the
// operator's controller.RegistryShard computes it.
func registryShard(ns, name string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(ns + "/" + name))
	return fmt.Sprintf("webapp-registry-%02d", h.Sum32()%registryShards)
}

// registryShardNames lists the shards' names, comma-separated.
func registryShardNames() string {
	names := make([]string, registryShards)
	for i := range names {
		names[i] = fmt.Sprintf("webapp-registry-%02d", i)
	}
	return strings.Join(names, ",")
}

// Deadlines: the kwok node makes pods Ready at once, so everything here
// converges within seconds; the deadlines only bound a broken run.
const (
	convergeTimeout = 2 * time.Minute
	pollInterval    = 250 * time.Millisecond
	// slowWait: waits longer than this are logged.
	slowWait = 5 * time.Second
)

// eventually polls check until it reports done, and fails t after timeout
// with what and the last state check described, so a failure says how far
// things got. Errors from check are remembered and retried (objects that do
// not exist yet are the normal case); a poll that fails keeps the state the
// last successful one saw, so the failure reports both the last real state
// (and how old it is) and the last error. With E2E_TRACE set, every change
// of state is logged with the time it took to get there.
func eventually(ctx context.Context, t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	var (
		state   = "(no poll succeeded)"
		stateAt time.Time
		last    error
	)
	start := time.Now()
	defer func() {
		// Not an assertion: a hint where a slow run spends its time.
		if took := time.Since(start); took > slowWait {
			t.Logf("%s: took %v", what, took.Round(100*time.Millisecond))
		}
	}()
	trace := os.Getenv("E2E_TRACE") != ""
	err := wait.For(func(ctx context.Context) (bool, error) {
		done, st, err := check(ctx)
		if ctx.Err() != nil && !done {
			// Cut off by the deadline: keep the last real state and error
			// for the failure message.
			return false, nil
		}
		last = err
		if err == nil {
			if trace && st != state {
				t.Logf("%s: after %v: %s", what, time.Since(start).Round(10*time.Millisecond), st)
			}
			state, stateAt = st, time.Now()
		}
		return done && err == nil, nil
	}, wait.WithContext(ctx), wait.WithTimeout(timeout), wait.WithInterval(pollInterval), wait.WithImmediate())
	if err != nil {
		age := "never"
		if !stateAt.IsZero() {
			age = time.Since(stateAt).Round(100*time.Millisecond).String() + " before the deadline"
		}
		t.Fatalf("%s: not within %v: %v\n  last state (seen %s): %s\n  last error: %v", what, timeout, err, age, state, last)
	}
}

// eventuallyProgressing is eventually for a wait whose length grows with
// the work left (objects to finalize, however many earlier features left):
// it fails when the state check reports has not changed for stall, not
// after a fixed time; limit is only a safety net.
func eventuallyProgressing(ctx context.Context, t *testing.T, stall, limit time.Duration, what string, check func(ctx context.Context) (done bool, state string, err error)) {
	t.Helper()
	var (
		state   = "(no poll succeeded)"
		changed = time.Now()
		last    error
	)
	err := wait.For(func(ctx context.Context) (bool, error) {
		done, st, err := check(ctx)
		last = err
		if err == nil && st != state {
			state, changed = st, time.Now()
		}
		if done && err == nil {
			return true, nil
		}
		if time.Since(changed) > stall {
			return false, fmt.Errorf("no progress for %v", stall)
		}
		return false, nil
	}, wait.WithContext(ctx), wait.WithTimeout(limit), wait.WithInterval(pollInterval), wait.WithImmediate())
	if err != nil {
		t.Fatalf("%s: not reached (stalled %v, at most %v in all): %v\n  last state (unchanged since %s): %s\n  last error: %v",
			what, stall, limit, err, changed.Format(time.RFC3339), state, last)
	}
}

// newWebApp returns a WebApp with just an image: the webhook defaults the
// rest.
func newWebApp(ns, name, image string) *webappv1.WebApp {
	return &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       webappv1.WebAppSpec{Image: image},
	}
}

func getWebApp(ctx context.Context, cfg *envconf.Config, ns, name string) (*webappv1.WebApp, error) {
	var w webappv1.WebApp
	err := cfg.Client().Resources().Get(ctx, name, ns, &w)
	return &w, err
}

// describeWebApp is a one-line summary of a WebApp for failure messages.
func describeWebApp(w *webappv1.WebApp) string {
	var conds []string
	for _, c := range w.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	replicas := "nil"
	if w.Spec.Replicas != nil {
		replicas = fmt.Sprint(*w.Spec.Replicas)
	}
	return fmt.Sprintf("generation=%d observedGeneration=%d spec.replicas=%s status{ready=%t replicas=%d readyReplicas=%d} conditions=%v",
		w.Generation, ptr.Deref(w.Status.ObservedGeneration, 0), replicas, w.Status.IsReady(), ptr.Deref(w.Status.Replicas, 0), ptr.Deref(w.Status.ReadyReplicas, 0), conds)
}

// isReady is kstatus' "current": the status describes the latest spec and
// says Ready.
func isReady(w *webappv1.WebApp) bool {
	return ptr.Deref(w.Status.ObservedGeneration, 0) == w.Generation && meta.IsStatusConditionTrue(w.Status.Conditions, conditionReady)
}

// waitWebAppReady waits for Ready=True at the current generation with
// want ready replicas (want < 0: any number), and returns the WebApp.
func waitWebAppReady(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name string, want int32) *webappv1.WebApp {
	t.Helper()
	var w *webappv1.WebApp
	eventually(ctx, t, convergeTimeout, fmt.Sprintf("WebApp %s/%s Ready with %d ready replicas", ns, name, want), func(ctx context.Context) (bool, string, error) {
		var err error
		if w, err = getWebApp(ctx, cfg, ns, name); err != nil {
			return false, "", err
		}
		ok := isReady(w) && w.Status.IsReady() && (want < 0 || ptr.Deref(w.Status.ReadyReplicas, 0) == want && ptr.Deref(w.Status.Replicas, 0) == want)
		return ok, describeWebApp(w), nil
	})
	return w
}

// createWebApp creates w, failing t on error.
func createWebApp(ctx context.Context, t *testing.T, cfg *envconf.Config, w *webappv1.WebApp) {
	t.Helper()
	if err := cfg.Client().Resources().Create(ctx, w); err != nil {
		t.Fatalf("create WebApp %s/%s: %v", w.Namespace, w.Name, err)
	}
}

// patchWebApp applies a JSON merge patch to a WebApp (through both
// webhooks, like kubectl patch).
func patchWebApp(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name, patch string) *webappv1.WebApp {
	t.Helper()
	w := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := cfg.Client().Resources().GetControllerRuntimeClient().Patch(ctx, w, rawMergePatch(patch)); err != nil {
		t.Fatalf("patch WebApp %s/%s with %s: %v", ns, name, patch, err)
	}
	return w
}

// rawMergePatch is a JSON merge patch (RFC 7386), as `kubectl patch --type
// merge` sends.
func rawMergePatch(patch string) client.Patch {
	return client.RawPatch(types.MergePatchType, []byte(patch))
}

// requireControlledBy fails t unless obj's controller reference is w, with
// blockOwnerDeletion (so foreground deletion waits for it). The reference
// names the version the operator reconciles (apps.example.com/v2), whichever
// version w was read in: the group, kind, name and UID identify it.
func requireControlledBy(t *testing.T, obj client.Object, w *webappv1.WebApp) {
	t.Helper()
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		t.Fatalf("%T %s has no controller reference; ownerReferences %+v", obj, obj.GetName(), obj.GetOwnerReferences())
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != webappv1.GroupVersion.Group || ref.Kind != "WebApp" || ref.Name != w.Name || ref.UID != w.UID {
		t.Fatalf("%T %s: controller %s %s %s (uid %s), want WebApp %s (uid %s)", obj, obj.GetName(), ref.APIVersion, ref.Kind, ref.Name, ref.UID, w.Name, w.UID)
	}
	if ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("%T %s: controller reference without blockOwnerDeletion", obj, obj.GetName())
	}
}

// podsOf lists the pods of a WebApp (by its instance label) and counts the
// Ready ones per image.
func readyPodsByImage(ctx context.Context, cfg *envconf.Config, ns, name string) (map[string]int, error) {
	var pods corev1.PodList
	sel := labels.SelectorFromSet(labels.Set{labelInstance: name}).String()
	if err := cfg.Client().Resources(ns).List(ctx, &pods, resources.WithLabelSelector(sel)); err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				out[p.Spec.Containers[0].Image]++
			}
		}
	}
	return out, nil
}

// deploymentRolledOut reports whether d's controller has observed its
// latest spec and every replica runs it and is available.
func deploymentRolledOut(d *appsv1.Deployment, replicas int32) bool {
	return d.Status.ObservedGeneration == d.Generation && d.Spec.Replicas != nil && *d.Spec.Replicas == replicas &&
		d.Status.Replicas == replicas && d.Status.UpdatedReplicas == replicas &&
		d.Status.ReadyReplicas == replicas && d.Status.AvailableReplicas == replicas
}

func describeDeployment(d *appsv1.Deployment) string {
	image := ""
	if cs := d.Spec.Template.Spec.Containers; len(cs) > 0 {
		image = cs[0].Image
	}
	replicas := int32(-1)
	if d.Spec.Replicas != nil {
		replicas = *d.Spec.Replicas
	}
	return fmt.Sprintf("uid=%s generation=%d observedGeneration=%d spec.replicas=%d image=%s status{replicas=%d updated=%d ready=%d available=%d}",
		d.UID, d.Generation, d.Status.ObservedGeneration, replicas, image, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas)
}

// waitDeployment waits until the WebApp's Deployment satisfies ok.
func waitDeployment(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name, what string, ok func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	eventually(ctx, t, convergeTimeout, fmt.Sprintf("Deployment %s/%s: %s", ns, name, what), func(ctx context.Context) (bool, string, error) {
		if err := cfg.Client().Resources().Get(ctx, name, ns, &d); err != nil {
			return false, "", err
		}
		return ok(&d), describeDeployment(&d), nil
	})
	return &d
}

// managers lists the field managers in obj's managedFields, each with the
// subresource it wrote ("" for the main resource), e.g.
// "webapp-operator-primary/status".
func managers(obj metav1.Object) []string {
	var out []string
	for _, e := range obj.GetManagedFields() {
		m := e.Manager
		if e.Subresource != "" {
			m += "/" + e.Subresource
		}
		out = append(out, m)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// warningRecorder collects the warnings the apiserver returns (admission
// webhook warnings among them), as kubectl would print them.
type warningRecorder struct {
	mu       sync.Mutex
	messages []string
}

func (r *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages = append(r.messages, message)
}

func (r *warningRecorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.messages...)
}

// clientWithWarnings returns a client of the suite's admin config whose
// warnings go to the returned recorder.
func clientWithWarnings(t *testing.T, cfg *envconf.Config) (client.Client, *warningRecorder) {
	t.Helper()
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	rec := &warningRecorder{}
	rc.WarningHandlerWithContext = rec
	c, err := client.New(rc, client.Options{Scheme: cfg.Client().Resources().GetScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// quantity parses a resource quantity for comparisons.
func quantity(s string) resource.Quantity { return resource.MustParse(s) }

// hasAll reports whether s contains every one of subs.
func hasAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// featureSteps runs a feature's steps in order, with the suite's config at
// hand (cfg), and skips the rest once one failed: a feature whose steps build
// on each other embeds it and wraps each step with step.
type featureSteps struct {
	cfg    *envconf.Config
	broken bool
}

// step runs f as a feature step, unless an earlier step failed.
func (s *featureSteps) step(f func(ctx context.Context, t *testing.T)) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		t.Helper()
		if s.broken {
			t.Skip("an earlier step failed")
		}
		s.cfg = cfg
		f(ctx, t)
		if t.Failed() {
			s.broken = true
		}
		return ctx
	}
}
