package sharding_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/sharding"
)

var env *testenv.Env

// The API server runs with the alpha gate of server-side sharded list and
// watch (KEP-5866) on, to check ShardSelector against the real filter.
func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, &env, testenv.Options{FeatureGates: []string{"ShardedListAndWatch=true"}}))
}

// ShardSelector's expression is accepted by the API server and selects, by
// its own hash, exactly the objects RangeOf puts in the owned ranges.
func TestShardSelectorOnTheAPIServer(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	const ranges = 8
	want := map[int][]string{}
	for i := range 80 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i), Namespace: ns}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		r := sharding.RangeOf(cm.UID, ranges)
		want[r] = append(want[r], cm.Name)
	}
	for _, owned := range [][]int{{0}, {0, 1, 2, 3}, {4, 5, 6, 7}, {1, 3, 6}, {0, 1, 2, 3, 4, 5, 6, 7}} {
		sel, err := sharding.ShardSelector(ranges, owned)
		if err != nil {
			t.Fatal(err)
		}
		var list corev1.ConfigMapList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ShardSelector: sel}}); err != nil {
			t.Fatalf("listing with %s: %v", sel, err)
		}
		if list.ShardInfo == nil || list.ShardInfo.Selector != sel {
			t.Fatalf("the API server did not shard the list (gate off?): shardInfo %+v", list.ShardInfo)
		}
		var got, expected []string
		for _, cm := range list.Items {
			got = append(got, cm.Name)
		}
		for _, r := range owned {
			expected = append(expected, want[r]...)
		}
		slices.Sort(got)
		slices.Sort(expected)
		if !slices.Equal(got, expected) {
			t.Errorf("ranges %v: the API server selected %v, RangeOf says %v", owned, got, expected)
		}
	}
}

func TestServerFiltersOnTheAPIServer(t *testing.T) {
	testenv.Require(t)
	ok, err := sharding.ServerFilters(t.Context(), env.Client, "default")
	if err != nil || !ok {
		t.Fatalf("the API server has the gate on: got %v, %v", ok, err)
	}
}

// A custom resource is filtered too, but its list carries no ShardInfo: the
// API server serves custom resources as unstructured lists, which have no
// place for it. So the gate is detected on a built-in kind, not on the
// operator's own.
func TestShardSelectorOnACustomResource(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	const ranges = 2
	var inRange0 []string
	for i := range 30 {
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%02d", i), Namespace: ns}}
		if err := env.Client.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		if sharding.RangeOf(w.UID, ranges) == 0 {
			inRange0 = append(inRange0, w.Name)
		}
	}
	sel, _ := sharding.ShardSelector(ranges, []int{0})
	var list testv1.WidgetList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ShardSelector: sel}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range list.Items {
		got = append(got, w.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, inRange0) {
		t.Errorf("the API server selected %v, RangeOf says %v", got, inRange0)
	}
	if list.ShardInfo != nil {
		t.Errorf("a custom resource list now carries ShardInfo %+v: gate detection may use the operator's own kind", list.ShardInfo)
	}
}

// testMember is a Member run by the test, with a switch that cuts it off
// the API server.
type testMember struct {
	*sharding.Member
	name        string
	partitioned atomic.Bool
	stop        context.CancelFunc
	done        chan struct{}
}

// The members' lease timings: a lease of 3 s renewed every 500 ms, a
// member fenced 2 s after its last renewal. A member started with
// longLease keeps the renew deadline and retry period but announces a lease
// of a minute: the others wait that long before they take its ranges
// without its help.
const (
	leaseDuration = 3 * time.Second
	longLease     = time.Minute
	renewDeadline = 2 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// settleTimeout is only a safety net: a change settles in a few
	// retry periods, or in a lease duration and a few retry periods when
	// a member must expire; the test fails with the owners it last saw.
	settleTimeout = 2 * time.Minute
)

func startMember(t *testing.T, ns, name string, lease time.Duration) *testMember {
	t.Helper()
	tm := &testMember{name: name, done: make(chan struct{})}
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cut := func() error {
		if tm.partitioned.Load() {
			return errors.New("partitioned")
		}
		return nil
	}
	c := interceptor.NewClient(base, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			if err := cut(); err != nil {
				return err
			}
			return c.List(ctx, l, o...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.CreateOption) error {
			if err := cut(); err != nil {
				return err
			}
			return c.Create(ctx, obj, o...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.UpdateOption) error {
			if err := cut(); err != nil {
				return err
			}
			return c.Update(ctx, obj, o...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, o ...client.DeleteOption) error {
			if err := cut(); err != nil {
				return err
			}
			return c.Delete(ctx, obj, o...)
		},
	})
	m, err := sharding.New(sharding.Options{
		Group: "webapp", Identity: name, Namespace: ns, APIReader: c, Client: c, Ranges: 16,
		LeaseDuration: lease, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		Logger: logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	tm.Member = m
	ctx, cancel := context.WithCancel(context.Background())
	tm.stop = cancel
	go func() {
		defer close(tm.done)
		if err := m.Start(ctx); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}()
	t.Cleanup(func() { tm.stop(); <-tm.done })
	return tm
}

// ledger records the passes in flight, by range, and every overlap.
type ledger struct {
	mu       sync.Mutex
	inFlight map[int]map[*testMember]context.Context
	overlaps []string
	passes   int
}

func (l *ledger) begin(tm *testMember, r int, ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for other, octx := range l.inFlight[r] {
		if other != tm && octx.Err() == nil {
			l.overlaps = append(l.overlaps, fmt.Sprintf("range %d: %s began a pass while %s had one in flight", r, tm.name, other.name))
		}
	}
	if l.inFlight[r] == nil {
		l.inFlight[r] = map[*testMember]context.Context{}
	}
	l.inFlight[r][tm] = ctx
	l.passes++
}

func (l *ledger) end(tm *testMember, r int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inFlight[r], tm)
}

// Three members in one process share Leases on a real API server while
// membership changes (joins, a graceful leave, a partition and its end):
// at no time do two of them own a range or run passes of one, and each
// change settles to an assignment that covers every range.
func TestMembersNeverOverlapOnTheAPIServer(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	rng := rand.New(rand.NewPCG(1, 1))
	objects := make([]client.Object, 16)
	for found := 0; found < 16; {
		uid := types.UID(fmt.Sprintf("%016x", rng.Uint64()))
		if r := sharding.RangeOf(uid, 16); objects[r] == nil {
			objects[r] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(r), UID: uid}}
			found++
		}
	}

	var mu sync.Mutex
	var members []*testMember
	l := &ledger{inFlight: map[int]map[*testMember]context.Context{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	// The monitor samples who may start a pass, range by range.
	wg.Go(func() {
		for ctx.Err() == nil {
			mu.Lock()
			ms := slices.Clone(members)
			mu.Unlock()
			for r, obj := range objects {
				var owners []*testMember
				for _, tm := range ms {
					if tm.Owns(obj) {
						owners = append(owners, tm)
					}
				}
				// The members are asked one after the other, and the
				// monitor may be descheduled between two questions for
				// longer than a handoff takes on a loaded machine: the
				// earlier owners are asked again, after the last one said
				// yes. A range owned by two members at once is still owned
				// by both then; a handoff seen half before and half after
				// is not.
				var who []string
				for i, tm := range owners {
					if i == len(owners)-1 || tm.Owns(obj) {
						who = append(who, tm.name)
					}
				}
				if len(who) > 1 {
					l.mu.Lock()
					l.overlaps = append(l.overlaps, fmt.Sprintf("range %d owned by %v", r, who))
					l.mu.Unlock()
				}
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	// Each member runs passes on random ranges with four workers, as a
	// controller with MaxConcurrentReconciles 4 would.
	run := func(tm *testMember) {
		mu.Lock()
		members = append(members, tm)
		mu.Unlock()
		for range 4 {
			wg.Go(func() {
				prng := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
				for ctx.Err() == nil {
					select {
					case <-tm.done:
						return
					default:
					}
					r := prng.IntN(16)
					pctx, end, ok := tm.Begin(ctx, objects[r])
					if !ok {
						time.Sleep(time.Millisecond)
						continue
					}
					l.begin(tm, r, pctx)
					// Mostly short passes, and some long enough that a
					// drain outlasts a round trip of claims.
					d := time.Duration(5+prng.IntN(60)) * time.Millisecond
					if prng.IntN(4) == 0 {
						d = time.Duration(300+prng.IntN(1200)) * time.Millisecond
					}
					select {
					case <-pctx.Done():
					case <-time.After(d):
					}
					l.end(tm, r)
					end()
				}
			})
		}
	}
	settle := func(what string, live ...*testMember) time.Duration {
		t.Helper()
		start := time.Now()
		var names []string
		for _, tm := range live {
			names = append(names, tm.name)
		}
		want := sharding.Assign(16, names)
		for {
			got := make([]string, 16)
			for _, tm := range live {
				for _, r := range tm.Owned() {
					got[r] = tm.name
				}
			}
			if slices.Equal(got, want) {
				t.Logf("%s: settled in %v", what, time.Since(start).Round(10*time.Millisecond))
				return time.Since(start)
			}
			if time.Since(start) > settleTimeout {
				t.Fatalf("%s: the owners did not reach the assignment within %v: owners %v, want %v", what, settleTimeout, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	a := startMember(t, ns, "a", leaseDuration)
	run(a)
	settle("a alone", a)
	// A 2 s pass on every range: the ranges that move to b and c drain
	// for that long, past their new owners' first chance to acquire them.
	for r, obj := range objects {
		pctx, end, ok := a.Begin(ctx, obj)
		if !ok {
			t.Fatalf("a does not own range %d", r)
		}
		l.begin(a, r, pctx)
		wg.Go(func() {
			select {
			case <-pctx.Done():
			case <-time.After(2 * time.Second):
			}
			l.end(a, r)
			end()
		})
	}
	// b announces a long lease: were its graceful leave to leave the
	// others waiting for its lease to expire, they would wait a minute.
	b, c := startMember(t, ns, "b", longLease), startMember(t, ns, "c", leaseDuration)
	run(b)
	run(c)
	settle("b and c join", a, b, c)

	b.stop()
	<-b.done
	// The bound under test: a and c take b's ranges because b deleted its
	// lease, not because it expired. b's lease was renewed last just
	// before it left (its leave renews it in every round until its passes
	// have drained), so an expiry could come no sooner than about longLease
	// (a minute) from here. Taking the ranges after a deletion is seeing
	// it (a retry period), claiming them and owning them in the next
	// round (another): 0.7 to 1 s measured here beside a CI run. The bound
	// is half of b's lease: 30 s under the expiry path's minimum, 30 times
	// the measured leave. With b's leave made to keep its lease, the test
	// fails here (the others took b's ranges after 61 s).
	if took := settle("b leaves", a, c); took > longLease/2 {
		t.Errorf("a graceful leave took %v to settle, more than half of b's lease (%v): the others waited for its lease to expire", took, longLease)
	}
	var leases coordinationv1.LeaseList
	if err := env.Client.List(context.Background(), &leases, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, lease := range leases.Items {
		if lease.Name == "webapp-b" {
			t.Errorf("b left its lease behind")
		}
	}

	c.partitioned.Store(true)
	settle("c is partitioned", a)
	if owned := c.Owned(); len(owned) != 0 {
		t.Errorf("partitioned c still owns %v", owned)
	}
	c.partitioned.Store(false)
	settle("c is back", a, c)

	// Enough passes for the overlap checks to mean something: run until
	// they have been made, however slowly this machine makes them, rather
	// than counting what a fixed window held.
	const enoughPasses = 100
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		l.mu.Lock()
		n := l.passes
		l.mu.Unlock()
		if n >= enoughPasses {
			break
		}
		if time.Since(start) > settleTimeout {
			t.Fatalf("only %d passes ran within %v after the last change, want %d: the members do not start passes", n, settleTimeout, enoughPasses)
		}
	}
	cancel()
	wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.overlaps {
		t.Error(o)
	}
	t.Logf("%d passes, %d overlaps", l.passes, len(l.overlaps))
}
