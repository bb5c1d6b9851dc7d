package sharding

import (
	"context"
	"fmt"
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

// testRangeLabel is testMember's Member.RangeLabel (group "g").
const testRangeLabel = "sharding.reconcilekit.io/range-g"

// labelledCM is a ConfigMap owned by an object of range r (-1: no label).
func labelledCM(name string, r int) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: "1"}}
	if r >= 0 {
		cm.Labels = map[string]string{testRangeLabel: strconv.Itoa(r)}
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
// the claims before the watch knows where it is (here: opened without a
// resourceVersion) ends it with Expired, so the informer lists again.
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
	rangeOf := sel.rangeFuncFor(&corev1.ConfigMap{})
	if rangeOf == nil {
		t.Fatal("ConfigMap is an owned kind")
	}
	s := m.selecting(lw, &corev1.ConfigMap{}, rangeOf, false)

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

// TestSelectedWatchDropsOtherReplicasUpdates: an update of an object of
// another replica's range that this informer never held is dropped, not
// passed on as a deletion (the handlers took it for the deletion of a live
// object: a pass, and a stale last state, on every other replica for each
// update of the fleet); one it held is still passed on as deleted.
func TestSelectedWatchDropsOtherReplicasUpdates(t *testing.T) {
	m := testMember(t, 4)
	setClaims(m, 0, 1)
	fw := watch.NewFake()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.ConfigMapList{Items: []corev1.ConfigMap{*labelledCM("held", 1), *labelledCM("elsewhere", 3)}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}
	sel := &cacheSelection{member: m, scheme: clientgoscheme.Scheme, owned: map[schema.GroupKind]bool{{Kind: "ConfigMap"}: true}}
	s := m.selecting(lw, &corev1.ConfigMap{}, sel.rangeFuncFor(&corev1.ConfigMap{}), false)
	if _, err := s.List(metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		fw.Modify(labelledCM("elsewhere", 3)) // another replica's object, updated
		fw.Modify(labelledCM("never-seen", 2))
		fw.Modify(labelledCM("held", 2)) // moved to another range: leaves this cache
		fw.Add(labelledCM("mine", 0))
	}()
	for _, want := range []struct {
		typ  watch.EventType
		name string
	}{{watch.Deleted, "held"}, {watch.Added, "mine"}} {
		e := next(t, w)
		if cm, ok := e.Object.(*corev1.ConfigMap); !ok || e.Type != want.typ || cm.Name != want.name {
			t.Fatalf("got %s %v, want %s %s (updates of objects this cache never held are dropped)", e.Type, e.Object, want.typ, want.name)
		}
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
	s := m.selecting(lw, &corev1.ConfigMap{}, sel.rangeFuncFor(&corev1.ConfigMap{}), sel.isReconciled(&corev1.ConfigMap{}))

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

// TestSelectedWatchSwitchesInPlace: when the claims change under a watch
// that knows its resourceVersion, the watch does not end (which would make
// the informer list everything after its backoff): it lists the acquired
// range's objects at exactly that resourceVersion and passes them on as
// added, passes on the released range's objects as deleted (the informer's
// copy when it has one), then a bookmark at that resourceVersion, and
// watches on from it with the new claims.
func TestSelectedWatchSwitchesInPlace(t *testing.T) {
	m := testMember(t, 4)
	setClaims(m, 0, 1)
	var lists []metav1.ListOptions
	var watches []metav1.ListOptions
	fakes := []*watch.FakeWatcher{watch.NewFake(), watch.NewFake()}
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
			lists = append(lists, o)
			// As a server that ignores the label selector would: the
			// watch filters again.
			return &corev1.ConfigMapList{Items: []corev1.ConfigMap{*labelledCM("r2", 2), *labelledCM("r3", 3), *labelledCM("r1", 1)}}, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
			watches = append(watches, o)
			return fakes[len(watches)-1], nil
		},
	}
	sel := &cacheSelection{member: m, scheme: clientgoscheme.Scheme, owned: map[schema.GroupKind]bool{{Kind: "ConfigMap"}: true}}
	s := m.selecting(lw, &corev1.ConfigMap{}, sel.rangeFuncFor(&corev1.ConfigMap{}), false)
	stored := labelledCM("r0-stored", 0)
	stored.Data = map[string]string{"k": "v"}
	s.store = toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	if err := s.store.Add(stored); err != nil {
		t.Fatal(err)
	}

	w, err := s.Watch(metav1.ListOptions{ResourceVersion: "10", AllowWatchBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	at := func(cm *corev1.ConfigMap, rv string) *corev1.ConfigMap { cm.ResourceVersion = rv; return cm }
	go func() {
		fakes[0].Add(at(labelledCM("r0-stored", 0), "11"))
		fakes[0].Add(at(labelledCM("r0-new", 0), "12"))
		fakes[0].Add(at(labelledCM("r1", 1), "13"))
	}()
	for range 3 {
		next(t, w)
	}

	setClaims(m, 1, 2) // 0 released, 2 acquired
	type got struct {
		typ      watch.EventType
		name, rv string
		hasData  bool
		rng      string
	}
	var events []got
	for range 4 {
		e := next(t, w)
		cm, ok := e.Object.(*corev1.ConfigMap)
		if !ok {
			t.Fatalf("%s %T, want a ConfigMap", e.Type, e.Object)
		}
		events = append(events, got{e.Type, cm.Name, cm.ResourceVersion, cm.Data != nil, cm.Labels[testRangeLabel]})
	}
	want := []got{
		{watch.Added, "r2", "1", false, "2"},
		{watch.Deleted, "r0-new", "13", false, "0"}, // not stored yet: namespace, name and range label
		{watch.Deleted, "r0-stored", "13", true, "0"},
		{watch.Bookmark, "", "13", false, ""},
	}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("after the claims changed:\n got  %v\n want %v", events, want)
	}
	if len(lists) != 1 || lists[0].ResourceVersion != "13" || lists[0].ResourceVersionMatch != metav1.ResourceVersionMatchExact ||
		lists[0].LabelSelector != testRangeLabel+" in (2)" {
		t.Errorf("lists %+v, want one of range 2 at exactly resourceVersion 13", lists)
	}
	if len(watches) != 2 || watches[1].ResourceVersion != "13" || !watches[1].AllowWatchBookmarks {
		t.Fatalf("watches %+v, want a second from resourceVersion 13", watches)
	}
	if !fakes[0].IsStopped() {
		t.Error("the first watch was not stopped")
	}
	go func() {
		fakes[1].Add(at(labelledCM("r0-late", 0), "14"))
		fakes[1].Add(at(labelledCM("r2-late", 2), "15"))
	}()
	if e := next(t, w); e.Type != watch.Added || e.Object.(*corev1.ConfigMap).Name != "r2-late" {
		t.Errorf("after the switch: %s %v, want r2-late added (range 0 released)", e.Type, e.Object)
	}
	if got := s.forget([]bool{true, true, true, true}); fmt.Sprint(got) != "[{ns/r1 1} {ns/r2 2} {ns/r2-late 2}]" {
		t.Errorf("known objects %v", got)
	}
}

// TestSelectedWatchExpiresWhenItCannotSwitch: a watch whose resourceVersion
// the API server refuses for the acquired range's list ends as expired, so
// the informer lists again, as it does for one still in its initial events.
func TestSelectedWatchExpiresWhenItCannotSwitch(t *testing.T) {
	m := testMember(t, 2)
	setClaims(m, 0)
	fw := watch.NewFake()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return nil, apierrors.NewResourceExpired("too old resource version: 10")
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}
	sel := &cacheSelection{member: m, scheme: clientgoscheme.Scheme, reconciled: schema.GroupKind{Kind: "ConfigMap"}}
	s := m.selecting(lw, &corev1.ConfigMap{}, sel.rangeFuncFor(&corev1.ConfigMap{}), true)
	w, err := s.Watch(metav1.ListOptions{ResourceVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	setClaims(m, 0, 1)
	e := next(t, w)
	if status, ok := e.Object.(*metav1.Status); e.Type != watch.Error || !ok || !apierrors.IsResourceExpired(apierrors.FromObject(status)) {
		t.Fatalf("%s %v, want an Expired error", e.Type, e.Object)
	}
	if _, ok := <-w.ResultChan(); ok {
		t.Error("the watch goes on after Expired")
	}
}
