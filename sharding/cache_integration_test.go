package sharding_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/sharding"
)

// selectorsSeen records the shard selectors of the requests that reach the
// API server, and counts the full lists.
type selectorsSeen struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen map[string]bool // path with a shardSelector query
	// fullLists counts the lists of everything claimed: a plain list, or
	// a watch that starts by sending every object.
	fullLists int
}

func (s *selectorsSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	s.mu.Lock()
	if q.Get("shardSelector") != "" {
		s.seen[r.URL.Path] = true
	}
	if q.Get("sendInitialEvents") == "true" || (q.Get("watch") != "true" && q.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchExact)) {
		s.fullLists++
	}
	s.mu.Unlock()
	return s.next.RoundTrip(r)
}

// selectedCache starts a cache of Widgets (the reconciled kind) and
// ConfigMaps (an owned kind) in ns, selected by tm's claims.
func selectedCache(t *testing.T, tm *testMember, ns string, seen *selectorsSeen) cache.Cache {
	t.Helper()
	opts, err := tm.SelectCache(cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}},
		env.Scheme, &testv1.Widget{}, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { seen.next = rt; return seen })
	c, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, o := range []client.Object{&testv1.Widget{}, &corev1.ConfigMap{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache sync")
	}
	return c
}

// cached returns the names of the Widgets and ConfigMaps c holds in ns.
func cached(t *testing.T, c cache.Cache, ns string) (widgets, configMaps []string) {
	t.Helper()
	var wl testv1.WidgetList
	var cl corev1.ConfigMapList
	if err := c.List(t.Context(), &wl, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if err := c.List(t.Context(), &cl, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, w := range wl.Items {
		widgets = append(widgets, w.Name)
	}
	for _, cm := range cl.Items {
		configMaps = append(configMaps, cm.Name)
	}
	slices.Sort(widgets)
	slices.Sort(configMaps)
	return widgets, configMaps
}

// TestSelectedCachesSplitTheObjects: with SelectCache each replica's cache
// holds the Widgets of the ranges it claims (asked of the API server by
// shard selector), and the ConfigMaps labelled with those ranges plus the
// unlabelled ones; when a replica joins, the first one's cache gives up the
// ranges it hands over, and when it leaves, takes them back, each time
// without listing everything again (its watches switch ranges in place).
func TestSelectedCachesSplitTheObjects(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	const ranges = 16 // startMember's
	rangeOf := map[string]int{}
	for i := range 40 {
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%02d", i), Namespace: ns}}
		if err := env.Client.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		r := sharding.RangeOf(w.UID, ranges)
		rangeOf[w.Name] = r
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "of-" + w.Name, Namespace: ns,
			Labels: map[string]string{"sharding.reconcilekit.io/range-webapp": fmt.Sprint(r)}}} // startMember's group
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"unlabelled-1", "unlabelled-2"} {
		if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// want is what a cache holds when its replica owns owned (and claims
	// nothing more).
	want := func(owned []int) (widgets, configMaps []string) {
		configMaps = []string{"unlabelled-1", "unlabelled-2"}
		for name, r := range rangeOf {
			if slices.Contains(owned, r) {
				widgets = append(widgets, name)
				configMaps = append(configMaps, "of-"+name)
			}
		}
		slices.Sort(widgets)
		slices.Sort(configMaps)
		return widgets, configMaps
	}
	settled := func(tm *testMember, c cache.Cache) func() string {
		return func() string {
			owned := tm.Owned()
			ww, wc := want(owned)
			gw, gc := cached(t, c, ns)
			if !slices.Equal(gw, ww) || !slices.Equal(gc, wc) {
				return fmt.Sprintf("%s owns %v: caches %d Widgets and %d ConfigMaps, want %d and %d", tm.name, owned, len(gw), len(gc), len(ww), len(wc))
			}
			return ""
		}
	}
	eventually := func(what string, conds ...func() string) {
		t.Helper()
		deadline := time.Now().Add(settleTimeout)
		for {
			var failed []string
			for _, c := range conds {
				if msg := c(); msg != "" {
					failed = append(failed, msg)
				}
			}
			if len(failed) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v: %s", what, settleTimeout, strings.Join(failed, "; "))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ownsAll := func(tm *testMember) func() string {
		return func() string {
			if n := len(tm.Owned()); n != ranges {
				return fmt.Sprintf("%s owns %d ranges", tm.name, n)
			}
			return ""
		}
	}

	seenA := &selectorsSeen{seen: map[string]bool{}}
	a := startMember(t, ns, "a", leaseDuration)
	ca := selectedCache(t, a, ns, seenA)
	eventually("one replica", ownsAll(a), settled(a, ca))
	seenA.mu.Lock()
	initialLists := seenA.fullLists
	seenA.mu.Unlock()

	b := startMember(t, ns, "b", leaseDuration)
	cb := selectedCache(t, b, ns, &selectorsSeen{seen: map[string]bool{}})
	split := func() string {
		na, nb := len(a.Owned()), len(b.Owned())
		if na+nb != ranges || na == 0 || nb == 0 {
			return fmt.Sprintf("a owns %d ranges, b %d", na, nb)
		}
		return ""
	}
	eventually("two replicas", split, settled(a, ca), settled(b, cb))
	wa, _ := cached(t, ca, ns)
	wb, _ := cached(t, cb, ns)
	t.Logf("a caches %d Widgets, b %d", len(wa), len(wb))

	b.stop()
	<-b.done
	eventually("b left", ownsAll(a), settled(a, ca))

	seenA.mu.Lock()
	defer seenA.mu.Unlock()
	if seenA.fullLists != initialLists {
		t.Errorf("a's cache listed everything %d times after its first sync, want none: its watches switch ranges in place", seenA.fullLists-initialLists)
	}
	if !seenA.seen["/apis/test.reconcilekit.io/v1/namespaces/"+ns+"/widgets"] {
		t.Errorf("the Widgets were not asked for by shard selector: %v", seenA.seen)
	}
	for path := range seenA.seen {
		if strings.HasSuffix(path, "/configmaps") {
			t.Errorf("an owned kind was asked for by the shard selector of its own UID: %s", path)
		}
	}
}
