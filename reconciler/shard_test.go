package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/sharding"
)

const shardRanges = 16

// The replicas' lease timings. The test checks who reconciles each Widget
// against who owns its range, so no range may move but where the test
// moves it (c's graceful leave, which deletes c's lease: no expiry is
// waited for anywhere). With a renew deadline of 2 s, as the test had, a
// replica whose lease rounds stalled 2 s on a loaded machine fenced itself
// and its ranges moved mid-assertion; a replica now fences itself only
// after 30 s without a renewal (60 rounds of 500 ms failing or late), and
// its ranges move to another 40 s after its last renewal. The retry period
// stays short: it paces every handoff the test does make.
const (
	shardLease         = 40 * time.Second
	shardRenewDeadline = 30 * time.Second
	shardRetryPeriod   = 500 * time.Millisecond
	// shardTimeout is a safety net for a handoff (a few retry periods)
	// and for convergence, not a timing assertion.
	shardTimeout = 2 * time.Minute
)

// passLedger records the passes in flight by Widget and member, and every
// pass that began while another member's pass of the same Widget was in
// flight.
type passLedger struct {
	mu       sync.Mutex
	inFlight map[types.NamespacedName]string
	by       map[types.NamespacedName]map[string]int
	overlaps []string
	// holds blocks the passes of a member over a Widget (key: member and
	// Widget) until the channel is closed.
	holds map[string]chan struct{}
}

func newPassLedger() *passLedger {
	return &passLedger{inFlight: map[types.NamespacedName]string{}, by: map[types.NamespacedName]map[string]int{}, holds: map[string]chan struct{}{}}
}

// hold makes member's passes over key block until the returned function
// is called.
func (l *passLedger) hold(member string, key types.NamespacedName) (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	l.holds[member+" "+key.String()] = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// held returns the channel member's pass over key waits on, nil if none.
func (l *passLedger) held(member string, key types.NamespacedName) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holds[member+" "+key.String()]
}

// inFlightBy returns the member whose pass over key is in flight, "" if none.
func (l *passLedger) inFlightBy(key types.NamespacedName) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight[key]
}

func (l *passLedger) enter(key types.NamespacedName, member string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if other, busy := l.inFlight[key]; busy {
		l.overlaps = append(l.overlaps, fmt.Sprintf("%s: %s began a pass while %s's was in flight", key, member, other))
	}
	l.inFlight[key] = member
	if l.by[key] == nil {
		l.by[key] = map[string]int{}
	}
	l.by[key][member]++
}

func (l *passLedger) exit(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inFlight, key)
}

// members returns who passed over key.
func (l *passLedger) members(key types.NamespacedName) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for m := range l.by[key] {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// shardedReplica is one replica of a sharded operator: a manager with a
// Member and the Widget reconciler, stopped by stop.
type shardedReplica struct {
	name   string
	member *sharding.Member
	stop   func()
}

func startShardedReplica(t *testing.T, ns, name string, l *passLedger) *shardedReplica {
	t.Helper()
	leases, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	member, err := sharding.New(sharding.Options{
		Group: "widgets", Identity: name, Namespace: ns, APIReader: leases, Client: leases,
		Ranges: shardRanges, LeaseDuration: shardLease, RenewDeadline: shardRenewDeadline, RetryPeriod: shardRetryPeriod,
		Logger: logr.Discard(),
	})
	require.NoError(t, err)
	// The cache holds only the Widgets and ConfigMaps of the ranges the
	// replica claims: a range acquired arrives by a new list, and its
	// objects must still be reconciled.
	cacheOpts, err := member.SelectCache(cache.Options{}, env.Scheme, &testv1.Widget{}, &corev1.ConfigMap{})
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cacheOpts,
		Controller: config.Controller{SkipNameValidation: new(true)},
	})
	require.NoError(t, err)
	require.NoError(t, mgr.Add(member))
	step := widgetStep{Name: "config", Condition: "ConfigReady", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
		key := client.ObjectKeyFromObject(s.Object)
		l.enter(key, name)
		defer l.exit(key)
		if held := l.held(name, key); held != nil {
			select {
			case <-held:
			case <-ctx.Done():
				return reconciler.Retry(ctx.Err())
			}
		}
		time.Sleep(5 * time.Millisecond) // widen the window an overlap would show in
		cm := corev1ac.ConfigMap(s.Object.Name, s.Object.Namespace).WithData(map[string]string{"size": strconv.Itoa(int(s.Object.Spec.Size))})
		if _, err := s.Apply(ctx, cm); err != nil {
			return reconciler.Retry(err)
		}
		return reconciler.Continue()
	}}
	r, err := reconciler.New(mgr, reconciler.Options[*testv1.Widget]{Name: "sharded-widgets", Steps: []widgetStep{step},
		Owns: []client.Object{&corev1.ConfigMap{}}, Shard: member})
	require.NoError(t, err)
	require.NoError(t, r.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err, "%s stopped with an error", name)
			case <-time.After(time.Minute):
				t.Errorf("%s did not stop within a minute", name)
			}
		})
	}
	t.Cleanup(stop)
	return &shardedReplica{name: name, member: member, stop: stop}
}

// converged reports whether every Widget is Ready for its generation with
// its ConfigMap labelled with its range.
func converged(ctx context.Context, ns string, names []string) (string, bool) {
	for _, n := range names {
		w := &testv1.Widget{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, w); err != nil {
			return err.Error(), false
		}
		if !conditions.IsTrue(w, conditions.Ready) || w.Status.ObservedGeneration != w.Generation {
			return n + " is not Ready for its generation", false
		}
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, cm); err != nil {
			return err.Error(), false
		}
		if want := strconv.Itoa(sharding.RangeOf(w.UID, shardRanges)); cm.Labels["sharding.reconcilekit.io/range-widgets"] != want {
			return fmt.Sprintf("ConfigMap %s has range label %q, want %s", n, cm.Labels["sharding.reconcilekit.io/range-widgets"], want), false
		}
	}
	return "", true
}

// waitFor polls cond until it holds, failing with its last reason after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() (string, bool)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why, ok := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// owners returns, for every range, the replicas that own it now.
func owners(replicas []*shardedReplica) map[int][]string {
	out := map[int][]string{}
	for _, r := range replicas {
		for _, rng := range r.member.Owned() {
			out[rng] = append(out[rng], r.name)
		}
	}
	return out
}

// Three replicas share 50 Widgets: each is reconciled by one replica at a
// time, by the replica owning its range, and all converge; when one
// replica stops, the others take its ranges and a new Widget in one of
// them converges.
func TestShardedReplicasShareTheWidgets(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	l := newPassLedger()
	replicas := []*shardedReplica{
		startShardedReplica(t, ns, "a", l), startShardedReplica(t, ns, "b", l), startShardedReplica(t, ns, "c", l),
	}
	// Settled: every range owned by the replica the assignment gives it.
	assigned := sharding.Assign(shardRanges, []string{"a", "b", "c"})
	waitFor(t, shardTimeout, func() (string, bool) {
		o := owners(replicas)
		for rng, want := range assigned {
			if !slices.Equal(o[rng], []string{want}) {
				return fmt.Sprintf("range %d owned by %v, assigned to %s", rng, o[rng], want), false
			}
		}
		return "", true
	})
	var names []string
	for i := range 50 {
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%02d", i), Namespace: ns}, Spec: testv1.WidgetSpec{Size: 1}}
		require.NoError(t, env.Client.Create(ctx, w))
		names = append(names, w.Name)
	}
	waitFor(t, shardTimeout, func() (string, bool) { return converged(ctx, ns, names) })

	owner := owners(replicas)
	require.Len(t, owner, shardRanges, "every range is owned")
	// Who reconciled each Widget is compared with who owns its range now:
	// that holds only if no range moved since the replicas settled.
	for rng, want := range assigned {
		require.Equal(t, []string{want}, owner[rng],
			"range %d moved after the replicas settled: a replica missed its renew deadline (%v) and fenced itself", rng, shardRenewDeadline)
	}
	perReplica := map[string]int{}
	for _, n := range names {
		w := &testv1.Widget{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, w))
		rng := sharding.RangeOf(w.UID, shardRanges)
		require.Len(t, owner[rng], 1, "range %d has one owner", rng)
		assert.Equal(t, owner[rng], l.members(client.ObjectKeyFromObject(w)), "%s (range %d) was reconciled by its range's owner only", n, rng)
		perReplica[owner[rng][0]]++
	}
	t.Logf("Widgets per replica: %v", perReplica)
	assert.Len(t, perReplica, 3, "every replica reconciled some Widgets")

	// c leaves: a and b take its ranges.
	moved := replicas[2].member.Owned()
	require.NotEmpty(t, moved)
	replicas[2].stop()
	survivors := replicas[:2]
	// Changed while no replica owns them (c has left, a and b not yet
	// acquired): a and b drop these events, and pass over the Widgets
	// when they acquire the ranges.
	bumped := 0
	for _, n := range names {
		w := &testv1.Widget{}
		require.NoError(t, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: n}, w))
		if slices.Contains(moved, sharding.RangeOf(w.UID, shardRanges)) {
			base := w.DeepCopy()
			w.Spec.Size = 2
			require.NoError(t, env.Client.Patch(ctx, w, client.MergeFrom(base)))
			bumped++
		}
	}
	t.Logf("changed %d Widgets of c's ranges %v while unowned (a and b own %v)", bumped, moved, owners(survivors))
	waitFor(t, shardTimeout, func() (string, bool) {
		o := owners(survivors)
		return fmt.Sprintf("a and b own %d of %d ranges: %v", len(o), shardRanges, o), len(o) == shardRanges
	})
	var inMoved *testv1.Widget
	for i := 0; inMoved == nil; i++ {
		require.Less(t, i, 200, "no new Widget landed in c's ranges %v", moved)
		w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("new-%03d", i), Namespace: ns}, Spec: testv1.WidgetSpec{Size: 1}}
		require.NoError(t, env.Client.Create(ctx, w))
		names = append(names, w.Name)
		if slices.Contains(moved, sharding.RangeOf(w.UID, shardRanges)) {
			inMoved = w
		}
	}
	waitFor(t, shardTimeout, func() (string, bool) { return converged(ctx, ns, names) })
	newOwner := owners(survivors)[sharding.RangeOf(inMoved.UID, shardRanges)]
	assert.Equal(t, newOwner, l.members(client.ObjectKeyFromObject(inMoved)), "%s, in a moved range, was reconciled by its new owner", inMoved.Name)

	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Empty(t, l.overlaps, "passes of one Widget overlapped across replicas")
}

// A range is handed over while its old owner's pass over a Widget of it is
// in flight (the step blocked on a channel): the new owner does not own the
// range, and starts no pass over the Widget, until that pass has ended,
// however many lease rounds it waits; once the pass ends, the range moves
// and the new owner reconciles the Widget's change made meanwhile.
func TestRangeHandedOverMidPassWaitsForThePass(t *testing.T) {
	testenv.Require(t)
	ctx := t.Context()
	ns := env.Namespace(t)
	l := newPassLedger()
	a := startShardedReplica(t, ns, "a", l)
	waitFor(t, shardTimeout, func() (string, bool) {
		return fmt.Sprintf("a owns %d of %d ranges", len(a.member.Owned()), shardRanges), len(a.member.Owned()) == shardRanges
	})
	// A Widget in a range that the assignment gives b once it joins.
	assigned := sharding.Assign(shardRanges, []string{"a", "b"})
	var w *testv1.Widget
	for i := 0; w == nil; i++ {
		require.Less(t, i, 200, "no Widget landed in b's ranges")
		c := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%03d", i), Namespace: ns}, Spec: testv1.WidgetSpec{Size: 1}}
		require.NoError(t, env.Client.Create(ctx, c))
		if assigned[sharding.RangeOf(c.UID, shardRanges)] == "b" {
			w = c
		}
	}
	key, rng := client.ObjectKeyFromObject(w), sharding.RangeOf(w.UID, shardRanges)
	waitFor(t, shardTimeout, func() (string, bool) { return converged(ctx, ns, []string{w.Name}) })

	// a's next pass over the Widget blocks.
	release := a.hold(l, key)
	defer release()
	bump := func(size int32) {
		t.Helper()
		live := &testv1.Widget{}
		require.NoError(t, env.Client.Get(ctx, key, live))
		base := live.DeepCopy()
		live.Spec.Size = size
		require.NoError(t, env.Client.Patch(ctx, live, client.MergeFrom(base)))
	}
	bump(2)
	waitFor(t, shardTimeout, func() (string, bool) { return "a's pass is not in flight", l.inFlightBy(key) == "a" })

	b := startShardedReplica(t, ns, "b", l)
	replicas := []*shardedReplica{a, b}
	// b takes every range assigned to it but the blocked one.
	waitFor(t, shardTimeout, func() (string, bool) {
		o := owners(replicas)
		for r, want := range assigned {
			if r != rng && !slices.Equal(o[r], []string{want}) {
				return fmt.Sprintf("range %d owned by %v, assigned to %s", r, o[r], want), false
			}
		}
		return "", true
	})
	// Changed again while a's pass is blocked: an event b would act on if
	// it owned the range. Then b renews its Lease four more times (each
	// round could have acquired the range): still not b's.
	bump(3)
	renewals := leaseRenewals(ctx, t, ns, "widgets-b")
	waitFor(t, shardTimeout, func() (string, bool) {
		n := renewals()
		return fmt.Sprintf("b renewed its Lease %d times", n), n >= 4
	})
	assert.NotContains(t, b.member.Owned(), rng, "b owns range %d while a's pass over %s is in flight", rng, key)
	assert.Equal(t, "a", l.inFlightBy(key), "a's pass is still in flight")
	assert.Equal(t, []string{"a"}, l.members(key), "only a passed over %s", key)

	release()
	waitFor(t, shardTimeout, func() (string, bool) {
		return fmt.Sprintf("range %d owned by %v", rng, owners(replicas)[rng]), slices.Equal(owners(replicas)[rng], []string{"b"})
	})
	waitFor(t, shardTimeout, func() (string, bool) { return converged(ctx, ns, []string{w.Name}) })
	live := &testv1.Widget{}
	require.NoError(t, env.Client.Get(ctx, key, live))
	assert.EqualValues(t, 3, live.Spec.Size)
	assert.Equal(t, []string{"a", "b"}, l.members(key), "b reconciled the change made during the handover")
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Empty(t, l.overlaps, "passes of one Widget overlapped across replicas")
}

// hold blocks the replica's passes over key (passLedger.hold).
func (r *shardedReplica) hold(l *passLedger, key types.NamespacedName) func() {
	return l.hold(r.name, key)
}

// leaseRenewals returns a function that reports how many times the Lease
// has been renewed since leaseRenewals was called (distinct renewTimes
// seen, polled by the caller).
func leaseRenewals(ctx context.Context, t *testing.T, ns, name string) func() int {
	t.Helper()
	seen := map[string]bool{}
	read := func() string {
		lease := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, lease); err != nil || lease.Spec.RenewTime == nil {
			return ""
		}
		return lease.Spec.RenewTime.Format(time.RFC3339Nano)
	}
	first := read()
	return func() int {
		if v := read(); v != "" && v != first {
			seen[v] = true
		}
		return len(seen)
	}
}
