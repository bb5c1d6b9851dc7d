package sharding

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// labelledCM is a ConfigMap owned by an object of range r (-1: no label).
func labelledCM(name string, r int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "1"}}
	if r >= 0 {
		cm.Labels = map[string]string{RangeLabel: strconv.Itoa(r)}
	}
	return cm
}

func testMember(t *testing.T, ranges int) *Member {
	t.Helper()
	c := fake.NewClientBuilder().Build()
	m, err := New(Options{Group: "g", Identity: "a", Namespace: "ops", APIReader: c, Client: c, Ranges: ranges})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// setClaims puts the ranges in claims in state owned, the others free, and
// tells the selected caches, as a lease round does.
func setClaims(m *Member, claims ...int) {
	m.mu.Lock()
	for r := range m.table.state {
		m.table.state[r] = free
	}
	for _, r := range claims {
		m.table.state[r] = owned
	}
	listeners := m.onClaims
	m.mu.Unlock()
	for _, f := range listeners {
		f()
	}
}

func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10 s")
	}
	return watch.Event{}
}

// TestSelectedOwnedObjects: the cache of an owned kind holds the objects
// labelled with a claimed range and the unlabelled ones; one that is
// labelled with another range later is passed on as deleted; a change of
// the claims ends the watch with Expired, so the informer lists again.
func TestSelectedOwnedObjects(t *testing.T) {
	m := testMember(t, 4)
	setClaims(m, 0, 1)
	fw := watch.NewFake()
	var listed metav1.ListOptions
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			listed = o
			return &corev1.ConfigMapList{Items: []corev1.ConfigMap{
				*labelledCM("r0", 0), *labelledCM("r2", 2), *labelledCM("none", -1), *labelledCM("r1", 1), *labelledCM("bad", 9),
			}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}
	sel := &cacheSelection{member: m, scheme: clientgoscheme.Scheme, owned: map[schema.GroupKind]bool{{Kind: "ConfigMap"}: true}}
	keep := sel.filterFor(&corev1.ConfigMap{})
	if keep == nil {
		t.Fatal("ConfigMap is an owned kind")
	}
	s := m.selecting(lw, keep, false)

	list, err := s.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cm := range list.(*corev1.ConfigMapList).Items {
		names = append(names, cm.Name)
	}
	if want := "[r0 none r1 bad]"; fmtNames(names) != want {
		t.Errorf("listed %v, want %s (claimed 0 and 1, and the unlabelled or badly labelled)", names, want)
	}
	if listed.ShardSelector != "" {
		t.Errorf("an owned kind is not selected by its own UID: %q", listed.ShardSelector)
	}

	w, err := s.Watch(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		fw.Add(labelledCM("other", 3))
		fw.Add(labelledCM("mine", 1))
		fw.Modify(labelledCM("none", 2)) // its owner's pass labelled it: another replica's
		fw.Delete(labelledCM("other", 3))
		fw.Delete(labelledCM("mine", 1))
	}()
	for _, want := range []struct {
		typ  watch.EventType
		name string
	}{{watch.Added, "mine"}, {watch.Deleted, "none"}, {watch.Deleted, "mine"}} {
		e := next(t, w)
		if cm, ok := e.Object.(*corev1.ConfigMap); !ok || e.Type != want.typ || cm.Name != want.name {
			t.Fatalf("got %s %v, want %s %s", e.Type, e.Object, want.typ, want.name)
		}
	}

	setClaims(m, 0, 1, 2)
	e := next(t, w)
	if status, ok := e.Object.(*metav1.Status); e.Type != watch.Error || !ok || !apierrors.IsResourceExpired(apierrors.FromObject(status)) {
		t.Fatalf("after the claims changed: %s %v, want an Expired error", e.Type, e.Object)
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Error("the watch goes on after Expired")
	}
	if !fw.IsStopped() {
		t.Error("the API server's watch was not stopped")
	}
}

// TestSelectedReconciledObjects: the reconciled kind is selected by the
// range of its UID, server-side (ShardSelector) and again as it arrives
// (for an API server without the feature gate); with no range claimed the
// selector names the single hash 0, since the API server refuses an empty
// range.
func TestSelectedReconciledObjects(t *testing.T) {
	m := testMember(t, 2)
	var uids [2][]types.UID
	for i := 0; len(uids[0]) < 2 || len(uids[1]) < 2; i++ {
		uid := types.UID("uid-" + strconv.Itoa(i))
		uids[RangeOf(uid, 2)] = append(uids[RangeOf(uid, 2)], uid)
	}
	var listed []string
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			listed = append(listed, o.ShardSelector)
			var l corev1.ConfigMapList // every object, as without the gate
			for r := range uids {
				for _, uid := range uids[r] {
					l.Items = append(l.Items, corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: string(uid), UID: uid}})
				}
			}
			return &l, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
	sel := &cacheSelection{member: m, scheme: clientgoscheme.Scheme, reconciled: schema.GroupKind{Kind: "ConfigMap"}}
	s := m.selecting(lw, sel.filterFor(&corev1.ConfigMap{}), sel.isReconciled(&corev1.ConfigMap{}))

	count := func() int {
		l, err := s.ListWithContext(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(l.(*corev1.ConfigMapList).Items)
	}
	if n := count(); n != 0 {
		t.Errorf("nothing claimed: %d objects kept", n)
	}
	setClaims(m, 1)
	if n := count(); n != len(uids[1]) {
		t.Errorf("range 1 claimed: %d objects kept, want %d", n, len(uids[1]))
	}
	want := []string{
		"shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')",
		"shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
	}
	if fmtNames(listed) != fmtNames(want) {
		t.Errorf("selectors %q, want %q", listed, want)
	}
}

func fmtNames(s []string) string {
	out := "["
	for i, n := range s {
		if i > 0 {
			out += " "
		}
		out += n
	}
	return out + "]"
}
