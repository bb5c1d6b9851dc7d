package sharding

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestNewValidatesOptions(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	valid := Options{Group: "webapp", Identity: "webapp-7d9f-x2", Namespace: "ops", APIReader: c, Client: c}
	m, err := New(valid)
	if err != nil {
		t.Fatal(err)
	}
	if m.opts.Ranges != DefaultRanges || m.opts.LeaseDuration != 15*time.Second || m.opts.RenewDeadline != 10*time.Second ||
		m.opts.RetryPeriod != 2*time.Second || m.leaseName != "webapp-webapp-7d9f-x2" {
		t.Errorf("defaults: %+v, lease %s", m.opts, m.leaseName)
	}
	for name, tc := range map[string]struct {
		change func(*Options)
		want   string
	}{
		"no group":              {func(o *Options) { o.Group = "" }, "Group"},
		"group not a DNS label": {func(o *Options) { o.Group = "Web.App" }, "Group"},
		"no identity":           {func(o *Options) { o.Identity = "" }, "Identity"},
		"identity not DNS":      {func(o *Options) { o.Identity = "Pod_1" }, "lease name"},
		"no namespace":          {func(o *Options) { o.Namespace = "" }, "Namespace"},
		"no reader":             {func(o *Options) { o.APIReader = nil }, "APIReader"},
		"ranges not 2^k":        {func(o *Options) { o.Ranges = 48 }, "power of two"},
		"too many ranges":       {func(o *Options) { o.Ranges = 2048 }, "power of two"},
		"no grace":              {func(o *Options) { o.RenewDeadline = 14 * time.Second }, "RenewDeadline"},
		"deadline ≤ retry":      {func(o *Options) { o.RetryPeriod = 10 * time.Second; o.LeaseDuration = 40 * time.Second }, "RenewDeadline"},
	} {
		opts := valid
		tc.change(&opts)
		if _, err := New(opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, tc.want)
		}
	}
}

// One range function for the reconciled kind everywhere: Member.RangeOf
// (Begin, Owns, the event filter, the shard source) places an object by its
// UID, as the selected cache does, whatever range label it carries (its own
// group's, set by hand, or a stacked operator's, which applies it for an
// owner of its own); an owned object follows its owner by the group's own
// label only. Before, RangeOf read the label first: one replica cached such
// an object, another was allowed to pass it, none did.
func TestMemberRangeOfIsTheUIDsWhateverTheLabels(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	m, err := New(Options{Group: "g", Identity: "i", Namespace: "ops", APIReader: c, Client: c, Ranges: 16})
	if err != nil {
		t.Fatal(err)
	}
	if m.RangeLabel() != testRangeLabel {
		t.Fatalf("RangeLabel %q, want %q (scoped to the group)", m.RangeLabel(), testRangeLabel)
	}
	sel := &cacheSelection{member: m, scheme: clientgoscheme.Scheme, reconciled: schema.GroupKind{Kind: "ConfigMap"},
		owned: map[schema.GroupKind]bool{{Kind: "Secret"}: true}}
	cached := sel.rangeFuncFor(&corev1.ConfigMap{})
	owned := m.OwnedPredicate()
	uid := types.UID("0b7d1e0e-4f9a-4d7e-9f55-2c8e4c1f7a10")
	byUID := RangeOf(uid, 16)
	other := (byUID + 3) % 16
	for _, labels := range []map[string]string{
		nil,
		{testRangeLabel: strconv.Itoa(other)},
		{"sharding.reconcilekit.io/range-parent": strconv.Itoa(other)},
		{testRangeLabel: "x"},
	} {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: uid, Labels: labels}}
		if got := m.RangeOf(obj); got != byUID {
			t.Errorf("labels %v: RangeOf %d, want its UID's %d", labels, got, byUID)
		}
		if r, _ := cached(obj, 16); r != m.RangeOf(obj) {
			t.Errorf("labels %v: the selected cache places it in %d, RangeOf in %d", labels, r, m.RangeOf(obj))
		}
	}

	// Owned objects: this group's label is the owner's range; another
	// group's label, or none, leaves the object to its owner's pass.
	setClaims(m, other)
	m.mu.Lock()
	m.lease, m.renewedAt = &coordinationv1.Lease{}, m.clock.Now()
	m.mu.Unlock()
	for _, tt := range []struct {
		labels map[string]string
		keep   bool
	}{
		{map[string]string{testRangeLabel: strconv.Itoa(other)}, true},
		{map[string]string{testRangeLabel: strconv.Itoa(byUID)}, false},
		{map[string]string{"sharding.reconcilekit.io/range-parent": strconv.Itoa(byUID)}, true},
		{nil, true},
	} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{UID: uid, Labels: tt.labels}}
		if got := owned.Create(event.CreateEvent{Object: secret}); got != tt.keep {
			t.Errorf("owned object labelled %v: kept %v, want %v", tt.labels, got, tt.keep)
		}
	}
}

// A group whose name makes the range label too long is refused by New,
// naming the field.
func TestNewRefusesAGroupTooLongForTheRangeLabel(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	group := strings.Repeat("g", 60) // a DNS label, but range-<group> is 66 characters
	_, err := New(Options{Group: group, Identity: "i", Namespace: "ops", APIReader: c, Client: c})
	if err == nil || !strings.Contains(err.Error(), "Group") || !strings.Contains(err.Error(), "range label") {
		t.Fatalf("New: %v, want an error naming Group and the range label", err)
	}
}

// The predicate keeps the events of owned objects only.
func TestMemberPredicate(t *testing.T) {
	s := newSim(t, 20)
	a := s.add("a")
	s.settle(10*time.Second, 0)
	b := s.add("b") // not started: owns nothing
	p, q := a.Predicate(), b.Predicate()
	obj := s.objects[5]
	if !p.Create(event.CreateEvent{Object: obj}) || !p.Update(event.UpdateEvent{ObjectOld: obj, ObjectNew: obj}) ||
		!p.Delete(event.DeleteEvent{Object: obj}) || !p.Generic(event.GenericEvent{Object: obj}) {
		t.Error("a owns every range, its predicate dropped an event")
	}
	if q.Create(event.CreateEvent{Object: obj}) {
		t.Error("b owns nothing, its predicate kept an event")
	}
}

// A live lease that cuts the hash space differently (a rollout changing
// Ranges) freezes the group until it is gone: nothing is acquired, nothing
// owned is given up (it would stay unowned).
func TestForeignLeaseBlocksAcquisition(t *testing.T) {
	s := newSim(t, 21)
	a := s.add("a")
	s.settle(10*time.Second, 0)
	seconds := int32(15)
	holder := "other"
	foreign := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "sim-other", Namespace: "ops", Labels: map[string]string{GroupLabel: "sim"},
			Annotations: map[string]string{rangesAnnotation: "32", claimsAnnotation: ""}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds},
	}
	if err := s.api.Create(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	b := s.add("b")
	s.run(10*time.Second, 0)
	if owned := b.Owned(); len(owned) != 0 {
		t.Fatalf("b acquired %v while a lease with other ranges lives", owned)
	}
	if owned := a.Owned(); len(owned) != simRanges {
		t.Fatalf("a gave up ranges while frozen, owns %v", owned)
	}
	// The foreign lease is never renewed: it expires, is deleted, and the
	// group settles.
	s.settle(30*time.Second, 0)
}

// TestMemberGatesAPlainReconciler runs the reconciler of ExampleMember (read
// the object, Begin, write) against one fake API server, on a lone replica
// and then on two. Both replicas' reconcilers are asked about every object,
// as both replicas' watches see every event; each object is written only by
// the replica its range is assigned to, and by none before a replica has
// joined (a lone one owns every range from its third lease round).
func TestMemberGatesAPlainReconciler(t *testing.T) {
	s := newSim(t, 30)
	ctx := t.Context()
	var requests []reconcile.Request
	for _, o := range s.objects {
		cm := o.DeepCopyObject().(*corev1.ConfigMap)
		cm.Namespace = "default"
		if err := s.api.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cm)})
	}
	reconciler := func(member *Member, pod string) reconcile.Reconciler {
		c := s.api
		return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var obj corev1.ConfigMap
			if err := c.Get(ctx, req.NamespacedName, &obj); err != nil {
				return reconcile.Result{}, err
			}
			ctx, end, ok := member.Begin(ctx, &obj)
			if !ok {
				return reconcile.Result{}, nil // another replica owns it
			}
			defer end()
			obj.Annotations = map[string]string{"seen-by": pod}
			return reconcile.Result{}, c.Update(ctx, &obj)
		})
	}
	var replicas []reconcile.Reconciler
	reconcileAll := func() {
		t.Helper()
		for _, req := range requests {
			for _, r := range replicas {
				if _, err := r.Reconcile(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	// seenBy returns, per range, the replica that last wrote its object.
	seenBy := func() []string {
		t.Helper()
		got := make([]string, simRanges)
		for _, req := range requests {
			var obj corev1.ConfigMap
			if err := s.api.Get(ctx, req.NamespacedName, &obj); err != nil {
				t.Fatal(err)
			}
			got[RangeOf(obj.UID, simRanges)] = obj.Annotations["seen-by"]
		}
		return got
	}

	a := s.add("a")
	replicas = append(replicas, reconciler(a.Member, "a"))
	for round := 1; round <= 3; round++ {
		reconcileAll()
		if got, want := seenBy(), slices.Repeat([]string{""}, simRanges); !slices.Equal(got, want) {
			t.Fatalf("before round %d of a lone replica: objects written by %q", round, got)
		}
		a.round(ctx)
	}
	reconcileAll()
	if got, want := seenBy(), Assign(simRanges, []string{"a"}); !slices.Equal(got, want) {
		t.Fatalf("a lone replica after three rounds: objects written by %q, want %q", got, want)
	}

	b := s.add("b")
	replicas = append(replicas, reconciler(b.Member, "b"))
	s.settle(30*time.Second, 0)
	reconcileAll()
	want := Assign(simRanges, []string{"a", "b"})
	if got := seenBy(); !slices.Equal(got, want) {
		t.Fatalf("two replicas: objects written by %q, want %q", got, want)
	}
	if !slices.Contains(want, "a") || !slices.Contains(want, "b") {
		t.Fatalf("the assignment %q leaves a replica without ranges", want)
	}
}
