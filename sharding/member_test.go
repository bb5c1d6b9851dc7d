package sharding

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// An owned object follows its owner: RangeLabel wins over the UID, unless
// it is not a valid range.
func TestMemberRangeOfReadsTheLabel(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	m, err := New(Options{Group: "g", Identity: "i", Namespace: "ops", APIReader: c, Client: c, Ranges: 16})
	if err != nil {
		t.Fatal(err)
	}
	uid := types.UID("0b7d1e0e-4f9a-4d7e-9f55-2c8e4c1f7a10")
	for label, want := range map[string]int{"3": 3, "15": 15, "16": RangeOf(uid, 16), "x": RangeOf(uid, 16), "": RangeOf(uid, 16)} {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: uid}}
		if label != "" {
			obj.Labels = map[string]string{RangeLabel: label}
		}
		if got := m.RangeOf(obj); got != want {
			t.Errorf("label %q: range %d, want %d", label, got, want)
		}
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
