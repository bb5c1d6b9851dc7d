package ownership_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/ownership"
)

var (
	createOnlySeed  = flag.Uint64("createonly.seed", 48, "seed of TestCreateOnlyApplyMatchesPlainApply's generated cases")
	createOnlyCases = flag.Int("createonly.cases", 4, "TestCreateOnlyApplyMatchesPlainApply's cases per kind and starting state")
)

// TestCreateOnlyApplyMatchesPlainApply is the differential test of Apply's
// create-only apply (write.go, issue #48): where the kit's cache holds no
// object, Apply sends a server-side apply that may only create, and falls
// back, when the API server says the object exists after all, to reading
// it from the API server and judging it. The reference is what that fast
// path replaces: read the object from the API server, judge it by Apply's
// documented rules, and send a plain server-side apply (same field
// manager, ForceOwnership, the very configuration the kit sends, which
// ConfigFor returns and the test checks against every apply the kit sent,
// no precondition). For a fixed seed, random desired objects of five kinds
// (ConfigMap, Secret, Service, Deployment, typed apply configurations; the
// Gadget custom resource, an unstructured one with non-canonical
// quantities) with random labels, annotations, data and spec fields, and
// random options (Adopt, NotOwned, OwnerLabel, IgnoreFields), are applied
// by the kit, through the manager's cached client, in one namespace and by
// the reference, through an uncached client, in another, from the same
// starting state: absent (the normal create); the configuration as this
// field manager applied it (its last pass), not yet in the kit's cache;
// another configuration this field manager applied for this owner, for
// none or for another owner; written by another field manager (a create
// or an apply) with no owner reference, an owner reference to the owner,
// or a controller reference to it or to another owner; and one of these
// being deleted, held by another manager's finalizer (Apply defines nothing
// for it: it must act as on any object). Every existing object is hidden
// from the kit's cache (kitClient: the deterministic form of a cache that
// has not seen it yet), so every case takes the create-only apply first,
// which the test asserts. The stored objects must be equal but for the
// namespace, uid, resourceVersion, creationTimestamp, managedFields times,
// a deletionTimestamp's value and a Service's allocated cluster IPs (the
// managers, operations and owned fields are compared), and the kit's
// answer must be what the reference's implies:
//
//   - the object did not exist before (an apply that creates, HTTP 201):
//     Created;
//   - it existed and the plain apply changed its resourceVersion: Updated;
//   - it existed and its resourceVersion stayed (the server found nothing
//     to write): Unchanged;
//   - the plain apply failed: an error of the same reason
//     (apierrors.ReasonForError, e.g. Invalid for a Deployment's changed
//     selector);
//   - a controller other than the owner: ForeignController, and no apply;
//   - no controller, no Adopt, and nothing tying the object to the owner
//     (an owner reference with its UID, or the hash of this configuration
//     recorded by this field manager; with NotOwned, that this field
//     manager wrote it): AdoptionRefused, and no apply.
//
// The answer the kit's own namespace shows (the same mapping on its
// object's truth before and after) must be the kit's answer too. The
// default run is 5 kinds × 5 starting states × 4 cases = 100 cases in
// about 10 s on two cores (seed 48: 20 Created, 22 Updated, 30 Unchanged,
// 14 AdoptionRefused, 10 ForeignController, 4 Invalid; 80 took the
// fallback); the log has the counts by state and answer. For a longer
// run, or another draw (1,000 cases: about 50 s):
//
//	go test -run TestCreateOnlyApplyMatchesPlainApply ./ownership/ -createonly.cases=40 -createonly.seed=7
//
// Each case's objects are deleted when it ends (a Service's cluster IP
// comes from a /24), its namespaces when the test ends.
func TestCreateOnlyApplyMatchesPlainApply(t *testing.T) {
	testenv.Require(t)
	r := newDiffRun(t)
	start := time.Now()
	for k := range coDiffKinds {
		for s := range startState(len(stateNames)) {
			for i := range *createOnlyCases {
				c := r.newCase(t, k, s, i)
				t.Run(c.name, func(t *testing.T) { r.check(t, c) })
			}
		}
	}
	t.Logf("%d cases (%d kinds × %d starting states × %d, seed %d) in %s", r.cases, len(coDiffKinds), len(stateNames),
		*createOnlyCases, *createOnlySeed, time.Since(start).Round(100*time.Millisecond))
	t.Logf("by starting state: %s", r.byState.String())
	t.Logf("by answer: %s", r.byAnswer.String())
	t.Logf("the create-only apply was refused and the kit judged the API server's copy in %d cases", r.fellBack)
	if r.cases == len(coDiffKinds)*len(stateNames)**createOnlyCases && *createOnlyCases >= 4 {
		for _, want := range []string{string(ownership.Created), string(ownership.Updated), string(ownership.Unchanged), foreignController, adoptionRefused} {
			assert.Positive(t, r.byAnswer[want], "no case answered %s: the draw no longer covers it", want)
		}
	}
}

// startState is what the server has before the kit's and the reference's
// apply.
type startState int

const (
	absent       startState = iota // nothing
	unseenOwn                      // this configuration, applied by this field manager
	ownOlder                       // another configuration, applied by this field manager
	otherManager                   // written by another field manager
	deleting                       // one of the three above, being deleted
)

var stateNames = [...]string{"absent", "unseen-own", "own-older", "other-manager", "deleting"}

func (s startState) String() string { return stateNames[s] }

const (
	foreignController = "ForeignController"
	adoptionRefused   = "AdoptionRefused"
	otherWriter       = "someone-else"
	finalizerHolder   = "finalizer-holder"
	createOnlyHold    = "test.reconcilekit.io/hold"
)

// diffRun is one run of the test: the kit's namespace, where the owner
// lives, and the reference's.
type diffRun struct {
	m            *testenv.Manager
	kitNS, refNS string
	owner, other *testv1.Widget
	schemas      *ownership.SchemaCache
	configs      *ownership.Applier // ConfigFor only
	cases        int
	fellBack     int
	byState      counts
	byAnswer     counts
}

func newDiffRun(t *testing.T) *diffRun {
	t.Helper()
	r := &diffRun{m: env.StartManager(t), kitNS: env.Namespace(t), refNS: env.Namespace(t), schemas: schemas(),
		byState: counts{}, byAnswer: counts{}}
	for _, w := range []**testv1.Widget{&r.owner, &r.other} {
		*w = &testv1.Widget{ObjectMeta: metav1.ObjectMeta{GenerateName: "widget-", Namespace: r.kitNS}}
		require.NoError(t, env.Client.Create(t.Context(), *w))
	}
	r.configs = &ownership.Applier{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme, FieldManager: manager, Schemas: r.schemas}
	t.Cleanup(func() {
		// envtest runs no namespace controller: the namespaces stay
		// Terminating, empty (every case deletes its objects).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, ns := range []string{r.kitNS, r.refNS} {
			if err := env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Errorf("deleting namespace %s: %v", ns, err)
			}
		}
	})
	return r
}

// diffCase is one generated case.
type diffCase struct {
	kind     coDiffKind
	state    startState
	name     string
	desired  runtime.ApplyConfiguration
	opts     []ownership.ApplyOption
	optNames []string
	adopt    bool
	notOwned bool
	// config is what the kit sends (ConfigFor), in the kit's namespace.
	config map[string]any
	prior  *prior // nil: absent
	seed   [2]uint64
}

func (c *diffCase) String() string {
	s := fmt.Sprintf("%s %q from state %s", c.kind.name, c.name, c.state)
	if c.prior != nil {
		s += " (" + c.prior.desc + ")"
	}
	opts := "none"
	if len(c.optNames) > 0 {
		opts = strings.Join(c.optNames, ", ")
	}
	return s + fmt.Sprintf(", options: %s; rerun: -run 'TestCreateOnlyApplyMatchesPlainApply/%s$' -createonly.seed=%d", opts, c.name, c.seed[0])
}

// prior is the object the server has before the applies, written the same
// way into both namespaces.
type prior struct {
	desc     string
	manager  string
	create   bool           // written with a create (an Update entry in managedFields), else a forced server-side apply
	obj      map[string]any // in the kit's namespace
	deleting bool           // then held by createOnlyHold and deleted
}

// newCase draws case i of kind k in starting state s: the case's own
// random source, so that one case reruns alone.
func (r *diffRun) newCase(t *testing.T, k int, s startState, i int) *diffCase {
	t.Helper()
	seed := [2]uint64{*createOnlySeed, uint64(k)<<32 | uint64(s)<<16 | uint64(i)}
	rng := rand.New(rand.NewPCG(seed[0], seed[1]))
	kind := coDiffKinds[k]
	c := &diffCase{kind: kind, state: s, seed: seed, name: fmt.Sprintf("%s-%s-%d", strings.ToLower(kind.name), s, i)}
	c.desired = kind.gen(rng, c.name)
	noAdopt := false
	switch s {
	case absent:
	case deleting:
		c.prior, noAdopt = r.drawPrior(t, rng, c, []startState{unseenOwn, ownOlder, otherManager}[i%3], i/3)
		c.prior.deleting = true
		c.prior.desc += ", being deleted (another manager's finalizer holds it)"
	default:
		c.prior, noAdopt = r.drawPrior(t, rng, c, s, i)
	}
	r.drawOptions(rng, c, noAdopt)
	c.config = r.configFor(t, r.owner, c.desired, c.opts...)
	if c.prior != nil && c.prior.obj == nil {
		c.prior.obj = runtime.DeepCopyJSON(c.config)
	}
	return c
}

// drawPrior draws the object the server has in state s, variant v; for
// unseenOwn its obj is left nil, to be the case's configuration. noAdopt
// says the case must not pass Adopt: an object nothing ties to the owner
// that the draw must see refused.
func (r *diffRun) drawPrior(t *testing.T, rng *rand.Rand, c *diffCase, s startState, v int) (*prior, bool) {
	t.Helper()
	switch s {
	case unseenOwn:
		return &prior{desc: "this configuration, applied by this field manager (its last pass)", manager: manager}, false
	case ownOlder:
		old := c.kind.gen(rng, c.name)
		p := &prior{manager: manager}
		switch v % 3 {
		case 0:
			p.obj, p.desc = r.configFor(t, r.owner, old), "another configuration, applied by this field manager for this owner"
		case 1:
			p.obj, p.desc = r.configFor(t, r.owner, old, ownership.NotOwned()), "another configuration, applied by this field manager for no owner (NotOwned)"
		default:
			p.obj, p.desc = r.configFor(t, r.other, old), "another configuration, applied by this field manager for another owner"
		}
		return p, false
	case otherManager:
		obj := acToMap(t, c.kind.gen(rng, c.name))
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace(r.kitNS)
		ref := func(w *testv1.Widget, controller bool) metav1.OwnerReference {
			return metav1.OwnerReference{APIVersion: testv1.GroupVersion.String(), Kind: "Widget", Name: w.Name, UID: w.UID, Controller: &controller}
		}
		var tie string
		switch v % 4 {
		case 0:
			tie = "no owner reference"
		case 1:
			u.SetOwnerReferences([]metav1.OwnerReference{ref(r.owner, false)})
			tie = "an owner reference to the owner"
		case 2:
			u.SetOwnerReferences([]metav1.OwnerReference{ref(r.owner, true)})
			tie = "the owner as its controller"
		default:
			u.SetOwnerReferences([]metav1.OwnerReference{ref(r.other, true)})
			tie = "another owner as its controller"
		}
		p := &prior{manager: otherWriter, create: rng.IntN(2) == 0, obj: obj}
		how := "a server-side apply"
		if p.create {
			how = "a create"
		}
		p.desc = fmt.Sprintf("written by %q with %s, %s", otherWriter, how, tie)
		return p, v%4 == 0 && (v/4)%2 == 0
	}
	panic(fmt.Sprintf("no prior for state %s", s))
}

// drawOptions draws the case's ApplyOptions.
func (r *diffRun) drawOptions(rng *rand.Rand, c *diffCase, noAdopt bool) {
	add := func(name string, opt ownership.ApplyOption) {
		c.opts = append(c.opts, opt)
		c.optNames = append(c.optNames, name)
	}
	if !noAdopt && rng.IntN(4) == 0 {
		c.adopt = true
		add("Adopt", ownership.Adopt())
	}
	switch {
	case rng.IntN(6) == 0:
		c.notOwned = true
		add("NotOwned", ownership.NotOwned())
	case rng.IntN(5) == 0:
		v := pick(rng, "0", "7")
		add("OwnerLabel(example.com/shard="+v+")", ownership.OwnerLabel("example.com/shard", v))
	}
	if path := map[string]string{"Deployment": "spec.replicas", "ConfigMap": "metadata.annotations[note]"}[c.kind.name]; path != "" && rng.IntN(4) == 0 {
		add("IgnoreFields("+path+")", ownership.IgnoreFields(path))
	}
}

func (r *diffRun) configFor(t *testing.T, owner client.Object, desired runtime.ApplyConfiguration, opts ...ownership.ApplyOption) map[string]any {
	t.Helper()
	config, err := r.configs.ConfigFor(t.Context(), owner, desired, opts...)
	require.NoError(t, err)
	return config
}

// check runs one case: the same starting state in both namespaces, the
// kit's Apply in one, the reference in the other, then the comparison.
func (r *diffRun) check(t *testing.T, c *diffCase) {
	ctx := t.Context()
	gvk := c.kind.gvk
	kitKey := client.ObjectKey{Namespace: r.kitNS, Name: c.name}
	refKey := client.ObjectKey{Namespace: r.refNS, Name: c.name}
	t.Cleanup(func() { r.remove(t, gvk, c.prior != nil && c.prior.deleting, kitKey, refKey) })
	if c.prior != nil {
		for _, ns := range []string{r.kitNS, r.refNS} {
			r.write(t, c.prior, gvk, ns)
		}
	}

	// The kit, through the cached client, which has not seen the object.
	kitBefore := r.truth(t, gvk, kitKey)
	kc := &kitClient{Client: r.m.Client}
	if c.prior != nil {
		kc.hide = kitKey
	}
	a := &ownership.Applier{Client: kc, APIReader: r.m.APIReader, Scheme: env.Scheme, FieldManager: manager, Schemas: r.schemas}
	res, err := a.Apply(ctx, r.owner, c.desired, c.opts...)
	kitAnswer := answerOf(res, err)
	kitAfter := r.truth(t, gvk, kitKey)

	// The reference, on the API server's truth.
	refBefore := r.truth(t, gvk, refKey)
	refAnswer, refAfter := r.reference(t, c, refBefore, refKey)

	r.cases++
	r.byState.add(c.state.String())
	r.byAnswer.add(kitAnswer)
	defer func() {
		if t.Failed() {
			t.Logf("case: %s\nthe configuration: %s\nthe starting object (kit's namespace): %s\nthe kit's error: %v",
				c, indent(c.config), indent(priorObj(c)), err)
		}
	}()

	require.NotEmpty(t, kc.sent, "%s: the kit sent no apply", c)
	require.Equal(t, ownership.CreateOnlyResourceVersion, kc.sent[0].resourceVersion,
		"%s: the kit's first apply was not create-only, so the case does not test the fast path; it sent: %s", c, kc)
	if len(kc.sent) > 1 || kc.sent[0].err != nil {
		r.fellBack++
	}
	for i, s := range kc.sent {
		assert.Equal(t, indent(c.config), indent(s.config), "%s: the kit's apply %d is not the configuration the reference applies", c, i+1)
	}

	assert.Equal(t, refAnswer, kitAnswer,
		"%s: the kit answered %s where the plain apply implies %s (reference: %s; the kit sent: %s)",
		c, kitAnswer, refAnswer, transition(refBefore, refAfter), kc)
	own, wantOwn := implied(kitBefore, kitAfter), kitAnswer
	if !succeeded(kitAnswer) {
		wantOwn = string(ownership.Unchanged) // nothing written
	}
	assert.Equal(t, wantOwn, own, "%s: the kit answered %s, but its own object shows %s (%s; the kit sent: %s)",
		c, kitAnswer, own, transition(kitBefore, kitAfter), kc)
	assert.Equal(t, normalised(refAfter), normalised(kitAfter),
		"%s: the stored objects differ (expected: the reference's, actual: the kit's; answers %s and %s)", c, refAnswer, kitAnswer)
}

// reference judges the object as the API server has it (before) by
// Apply's documented rules and, where they let it, sends a plain
// server-side apply of the kit's configuration; it returns the answer
// that implies and the object afterwards.
func (r *diffRun) reference(t *testing.T, c *diffCase, before *unstructured.Unstructured, key client.ObjectKey) (string, *unstructured.Unstructured) {
	t.Helper()
	if refused := r.refusal(c, before); refused != "" {
		return refused, r.truth(t, c.kind.gvk, key)
	}
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(c.config)}
	u.SetNamespace(key.Namespace)
	err := env.Client.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(manager), client.ForceOwnership)
	after := r.truth(t, c.kind.gvk, key)
	if err != nil {
		return errorAnswer(err), after
	}
	return implied(before, after), after
}

// refusal is Apply's documented judgement of an existing object (see Adopt
// and the errors' documentation): "" where it writes.
func (r *diffRun) refusal(c *diffCase, live *unstructured.Unstructured) string {
	if live == nil {
		return ""
	}
	if ctrl := metav1.GetControllerOf(live); ctrl != nil {
		if ctrl.UID != r.owner.UID {
			return foreignController
		}
		return ""
	}
	wrote := slices.ContainsFunc(live.GetManagedFields(), func(e metav1.ManagedFieldsEntry) bool { return e.Manager == manager })
	switch {
	case c.adopt:
		return ""
	case c.notOwned && wrote:
		return ""
	case c.notOwned:
		return adoptionRefused
	}
	for _, ref := range live.GetOwnerReferences() {
		if ref.UID == r.owner.UID {
			return ""
		}
	}
	hash, _, _ := unstructured.NestedString(c.config, "metadata", "annotations", ownership.ConfigHashAnnotation)
	if live.GetAnnotations()[ownership.ConfigHashAnnotation] == hash && wrote {
		return ""
	}
	return adoptionRefused
}

// implied is the answer the object's truth before and after a write
// implies.
func implied(before, after *unstructured.Unstructured) string {
	switch {
	case after == nil && before == nil:
		return string(ownership.Unchanged)
	case after == nil:
		return "Deleted"
	case before == nil || before.GetUID() != after.GetUID():
		return string(ownership.Created)
	case before.GetResourceVersion() != after.GetResourceVersion():
		return string(ownership.Updated)
	}
	return string(ownership.Unchanged)
}

func succeeded(answer string) bool {
	switch ownership.ApplyResult(answer) {
	case ownership.Created, ownership.Updated, ownership.Unchanged:
		return true
	}
	return false
}

// answerOf is the kit's answer: its ApplyResult, or its error's kind.
func answerOf(res ownership.ApplyResult, err error) string {
	var (
		fce *ownership.ForeignControllerError
		are *ownership.AdoptionRefusedError
	)
	switch {
	case err == nil:
		return string(res)
	case errors.As(err, &fce):
		return foreignController
	case errors.As(err, &are):
		return adoptionRefused
	}
	return errorAnswer(err)
}

func errorAnswer(err error) string {
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return "error " + string(reason)
	}
	return "error: " + err.Error()
}

func transition(before, after *unstructured.Unstructured) string {
	version := func(u *unstructured.Unstructured) string {
		if u == nil {
			return "absent"
		}
		return fmt.Sprintf("uid %s resourceVersion %s", u.GetUID(), u.GetResourceVersion())
	}
	return version(before) + " → " + version(after)
}

// write puts p into namespace ns, as p says.
func (r *diffRun) write(t *testing.T, p *prior, gvk schema.GroupVersionKind, ns string) {
	t.Helper()
	ctx := t.Context()
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(p.obj)}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	if p.create {
		require.NoError(t, env.Client.Create(ctx, u, client.FieldOwner(p.manager)), "creating the starting object in %s", ns)
	} else {
		require.NoError(t, env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(p.manager), client.ForceOwnership),
			"applying the starting object in %s", ns)
	}
	if !p.deleting {
		return
	}
	hold := fmt.Appendf(nil, `{"metadata":{"finalizers":[%q]}}`, createOnlyHold)
	require.NoError(t, env.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, hold), client.FieldOwner(finalizerHolder)))
	require.NoError(t, env.Client.Delete(ctx, u, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	require.NotNil(t, r.truth(t, gvk, client.ObjectKeyFromObject(u)), "the finalizer holds the object")
}

// remove deletes the case's objects, first releasing the finalizer that
// holds them if held.
func (r *diffRun) remove(t *testing.T, gvk schema.GroupVersionKind, held bool, keys ...client.ObjectKey) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, key := range keys {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetName(key.Name)
		u.SetNamespace(key.Namespace)
		if held {
			release := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))
			if err := env.Client.Patch(ctx, u, release, client.FieldOwner(finalizerHolder)); client.IgnoreNotFound(err) != nil {
				t.Errorf("releasing %s %s: %v", gvk.Kind, key, err)
			}
		}
		if err := env.Client.Delete(ctx, u); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting %s %s: %v", gvk.Kind, key, err)
		}
	}
}

// truth reads the object from the API server, nil if it does not exist.
func (r *diffRun) truth(t *testing.T, gvk schema.GroupVersionKind, key client.ObjectKey) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := env.Client.Get(t.Context(), key, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return u
}

// normalised is u as JSON without what legitimately differs between two
// objects written alike in two namespaces: the namespace, uid,
// resourceVersion and creationTimestamp, the managedFields' times (their
// managers, operations and fields stay, sorted), when deletion began (not
// whether), and a Service's allocated cluster IPs.
func normalised(u *unstructured.Unstructured) string {
	if u == nil {
		return "absent"
	}
	m := runtime.DeepCopyJSON(u.Object)
	md, _ := m["metadata"].(map[string]any)
	for _, f := range []string{"namespace", "uid", "resourceVersion", "creationTimestamp"} {
		delete(md, f)
	}
	if _, ok := md["deletionTimestamp"]; ok {
		md["deletionTimestamp"] = "(set)"
	}
	if entries, ok := md["managedFields"].([]any); ok {
		for _, e := range entries {
			delete(e.(map[string]any), "time")
		}
		slices.SortFunc(entries, func(a, b any) int { return strings.Compare(indent(a), indent(b)) })
	}
	if spec, ok := m["spec"].(map[string]any); ok && u.GetKind() == "Service" {
		if _, ok := spec["clusterIP"]; ok {
			spec["clusterIP"] = "(allocated)"
		}
		if ips, ok := spec["clusterIPs"].([]any); ok {
			for i := range ips {
				ips[i] = "(allocated)"
			}
		}
	}
	return indent(m)
}

func indent(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("(%v: %v)", err, v)
	}
	return string(b)
}

func priorObj(c *diffCase) any {
	if c.prior == nil {
		return nil
	}
	return c.prior.obj
}

// kitClient is the manager's cached client as the kit's Applier gets it,
// but for one object, hide, that its cache has not seen yet: a Get of it
// is NotFound, deterministically, however fast the informer. It records
// every apply the kit sends.
type kitClient struct {
	client.Client
	hide client.ObjectKey
	sent []sentApply
}

// sentApply is one apply the kit sent: the configuration without its
// precondition, the precondition, and the API server's answer.
type sentApply struct {
	config          map[string]any
	resourceVersion string
	uid             string
	err             error
}

func (c *kitClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key == c.hide {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *kitClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	var s sentApply
	if u, ok := obj.(interface{ UnstructuredContent() map[string]any }); ok {
		s.config = runtime.DeepCopyJSON(u.UnstructuredContent())
		if md, ok := s.config["metadata"].(map[string]any); ok {
			s.resourceVersion, _ = md["resourceVersion"].(string)
			s.uid, _ = md["uid"].(string)
			delete(md, "resourceVersion")
			delete(md, "uid")
		}
	}
	s.err = c.Client.Apply(ctx, obj, opts...)
	c.sent = append(c.sent, s)
	return s.err
}

// String lists the applies sent, e.g. "create-only apply (Conflict), apply
// with uid precondition (ok)".
func (c *kitClient) String() string {
	var out []string
	for _, s := range c.sent {
		what := "apply without precondition"
		switch {
		case s.resourceVersion == ownership.CreateOnlyResourceVersion:
			what = "create-only apply"
		case s.uid != "":
			what = "apply with uid precondition"
		}
		answer := "ok"
		if s.err != nil {
			answer = cmp.Or(string(apierrors.ReasonForError(s.err)), s.err.Error())
		}
		out = append(out, what+" ("+answer+")")
	}
	return strings.Join(out, ", ")
}

// counts counts cases by a name.
type counts map[string]int

func (c counts) add(k string) { c[k]++ }

func (c counts) String() string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(c)) {
		out = append(out, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(out, ", ")
}

// The generated objects.

// coDiffKind is a kind the test applies, with its generator of random
// desired objects named name.
type coDiffKind struct {
	name string
	gvk  schema.GroupVersionKind
	gen  func(r *rand.Rand, name string) runtime.ApplyConfiguration
}

var coDiffKinds = []coDiffKind{
	{"ConfigMap", corev1.SchemeGroupVersion.WithKind("ConfigMap"), genConfigMap},
	{"Secret", corev1.SchemeGroupVersion.WithKind("Secret"), genSecret},
	{"Service", corev1.SchemeGroupVersion.WithKind("Service"), genService},
	{"Deployment", schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, genDeployment},
	{"Gadget", testv1.GroupVersion.WithKind("Gadget"), genGadget},
}

var (
	labelKeys        = []string{"app.kubernetes.io/name", "tier", "team", "example.com/role", "track"}
	labelValues      = []string{"web", "api", "blue", "green", "v1", ""}
	annotationKeys   = []string{"note", "example.com/owner", "example.com/checksum", "description"}
	annotationValues = []string{"", "x", "owned by the platform team", "ünïcödé ✓", `{"json": true}`, "line 1\nline 2"}
	dataKeys         = []string{"a", "b", "config.yaml", "key_1", "k.2", "-dash"}
	dataValues       = []string{"", "1", "blue", "some: yaml\nlist: [1, 2]", "ünïcödé"}
)

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// randMap has up to most entries drawn from keys and values.
func randMap(r *rand.Rand, keys, values []string, most int) map[string]string {
	m := map[string]string{}
	for range r.IntN(most + 1) {
		m[pick(r, keys...)] = pick(r, values...)
	}
	return m
}

func randBytes(r *rand.Rand) []byte {
	b := make([]byte, r.IntN(12))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// distinct returns up to most distinct elements of xs, in a random order.
func distinct[T any](r *rand.Rand, xs []T, most int) []T {
	out := slices.Clone(xs)
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:r.IntN(min(most, len(out))+1)]
}

func genConfigMap(r *rand.Rand, name string) runtime.ApplyConfiguration {
	cm := corev1ac.ConfigMap(name, "").
		WithLabels(randMap(r, labelKeys, labelValues, 3)).
		WithAnnotations(randMap(r, annotationKeys, annotationValues, 3)).
		WithData(randMap(r, dataKeys, dataValues, 4))
	if r.IntN(4) == 0 {
		cm.WithBinaryData(map[string][]byte{pick(r, "blob", "raw.bin"): randBytes(r)})
	}
	return cm
}

func genSecret(r *rand.Rand, name string) runtime.ApplyConfiguration {
	s := corev1ac.Secret(name, "").
		WithLabels(randMap(r, labelKeys, labelValues, 3)).
		WithAnnotations(randMap(r, annotationKeys, annotationValues, 2))
	if r.IntN(2) == 0 {
		s.WithType(corev1.SecretTypeOpaque)
	}
	data := map[string][]byte{}
	for range r.IntN(4) {
		data[pick(r, dataKeys...)] = randBytes(r)
	}
	s.WithData(data)
	if r.IntN(3) == 0 {
		s.WithStringData(randMap(r, dataKeys, dataValues, 2))
	}
	return s
}

func genService(r *rand.Rand, name string) runtime.ApplyConfiguration {
	spec := corev1ac.ServiceSpec().WithSelector(randMap(r, labelKeys[:3], labelValues[:5], 2))
	type key struct {
		port     int32
		protocol string
	}
	seen := map[key]bool{}
	for range 1 + r.IntN(3) {
		port, protocol := pick(r, int32(80), 443, 8080), pick(r, "", "TCP", "UDP")
		k := key{port, cmp.Or(protocol, "TCP")}
		if seen[k] {
			continue
		}
		seen[k] = true
		// Named by port and protocol, so that two writers' ports merged
		// into one list never share a name.
		p := corev1ac.ServicePort().WithPort(port).WithName(fmt.Sprintf("p%d-%s", port, strings.ToLower(k.protocol)))
		if protocol != "" {
			p.WithProtocol(corev1.Protocol(protocol))
		}
		switch r.IntN(3) {
		case 1:
			p.WithTargetPort(intstr.FromInt32(port + 1000))
		case 2:
			p.WithTargetPort(intstr.FromString("http"))
		}
		spec.WithPorts(p)
	}
	if r.IntN(4) == 0 {
		spec.WithSessionAffinity(pick(r, corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP))
	}
	if r.IntN(4) == 0 {
		spec.WithPublishNotReadyAddresses(r.IntN(2) == 0)
	}
	return corev1ac.Service(name, "").
		WithLabels(randMap(r, labelKeys, labelValues, 2)).
		WithAnnotations(randMap(r, annotationKeys, annotationValues, 2)).
		WithSpec(spec)
}

// genDeployment draws the selector's app from two values: a Deployment's
// selector is immutable, so a starting object with the other one makes
// both applies fail alike (Invalid).
func genDeployment(r *rand.Rand, name string) runtime.ApplyConfiguration {
	app := pick(r, "web", "api")
	podLabels := randMap(r, labelKeys, labelValues, 2)
	podLabels["app"] = app
	pod := corev1ac.PodSpec()
	for _, cname := range distinct(r, []string{"app", "sidecar", "proxy"}, 2) {
		c := corev1ac.Container().WithName(cname).WithImage(pick(r, "nginx:1.27", "busybox:1.36", "registry.example.com/app:v2"))
		for _, p := range distinct(r, []int32{8080, 9090, 15000}, 2) {
			c.WithPorts(corev1ac.ContainerPort().WithContainerPort(p))
		}
		for _, e := range distinct(r, []string{"MODE", "LEVEL", "REGION"}, 2) {
			c.WithEnv(corev1ac.EnvVar().WithName(e).WithValue(pick(r, "", "debug", "eu-west-1")))
		}
		if r.IntN(3) == 0 {
			c.WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(pick(r, "100m", "0.5", "1")),
				corev1.ResourceMemory: resource.MustParse(pick(r, "64Mi", "128974848", "1Gi")),
			}))
		}
		pod.WithContainers(c)
	}
	if len(pod.Containers) == 0 {
		pod.WithContainers(corev1ac.Container().WithName("app").WithImage("nginx:1.27"))
	}
	if r.IntN(4) == 0 {
		pod.WithTerminationGracePeriodSeconds(int64(r.IntN(60)))
	}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{"app": app})).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(podLabels).WithSpec(pod))
	if r.IntN(2) == 0 {
		spec.WithReplicas(int32(r.IntN(5)))
	}
	if r.IntN(4) == 0 {
		spec.WithMinReadySeconds(int32(r.IntN(30)))
	}
	if r.IntN(4) == 0 {
		spec.WithRevisionHistoryLimit(int32(r.IntN(10)))
	}
	return appsv1ac.Deployment(name, "").
		WithLabels(randMap(r, labelKeys, labelValues, 2)).
		WithAnnotations(randMap(r, annotationKeys, annotationValues, 2)).
		WithSpec(spec)
}

// genGadget builds the custom resource by hand, unstructured, as a
// controller without generated apply configurations does: a quantity may
// be non-canonical ("0.5", stored as sent) or a number, a port's protocol
// left to the CRD's default.
func genGadget(r *rand.Rand, name string) runtime.ApplyConfiguration {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(testv1.GroupVersion.WithKind("Gadget"))
	u.SetName(name)
	if l := randMap(r, labelKeys, labelValues, 2); len(l) > 0 {
		u.SetLabels(l)
	}
	if a := randMap(r, annotationKeys, annotationValues, 2); len(a) > 0 {
		u.SetAnnotations(a)
	}
	spec := map[string]any{}
	if r.IntN(2) == 0 {
		spec["enabled"] = r.IntN(2) == 0
	}
	if r.IntN(2) == 0 {
		spec["replicas"] = int64(r.IntN(5))
	}
	var ports []any
	seen := map[string]bool{}
	for range r.IntN(4) {
		port, protocol := pick(r, int64(80), 443, 8080), pick(r, "", "TCP", "UDP")
		k := fmt.Sprint(port, cmp.Or(protocol, "TCP"))
		if seen[k] {
			continue
		}
		seen[k] = true
		p := map[string]any{"port": port}
		if protocol != "" {
			p["protocol"] = protocol
		}
		if r.IntN(2) == 0 {
			p["name"] = pick(r, "http", "metrics", "")
		}
		ports = append(ports, p)
	}
	if len(ports) > 0 {
		spec["ports"] = ports
	}
	if tags := distinct(r, []any{"blue", "green", "fast", "small"}, 3); len(tags) > 0 {
		spec["tags"] = tags
	}
	if r.IntN(2) == 0 {
		spec["size"] = pick[any](r, "1Gi", "0.5", "500m", int64(2), "1024Mi")
	}
	if len(spec) > 0 || r.IntN(2) == 0 {
		u.Object["spec"] = spec
	}
	return client.ApplyConfigurationFromUnstructured(u)
}

// acToMap is an apply configuration's JSON as unstructured content.
func acToMap(t *testing.T, ac runtime.ApplyConfiguration) map[string]any {
	t.Helper()
	b, err := json.Marshal(ac)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, utiljson.Unmarshal(b, &m))
	return m
}
