package sharding_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/sharding"
)

// The inputs of TestSelectedCacheMatchesAFilteredInformer; the defaults
// keep a run well under a minute, and larger values run it longer, e.g.
//
//	go test ./sharding -run TestSelectedCacheMatchesAFilteredInformer -cachewatch.sequences=50 -cachewatch.seed=1000
var (
	diffSequences = flag.Int("cachewatch.sequences", 4, "TestSelectedCacheMatchesAFilteredInformer: random sequences per variant")
	diffSegments  = flag.Int("cachewatch.segments", 12, "TestSelectedCacheMatchesAFilteredInformer: segments per sequence, each ending at a compared quiescent point")
	diffSeed      = flag.Uint64("cachewatch.seed", 1, "TestSelectedCacheMatchesAFilteredInformer: the first sequence's seed (sequence i uses seed+i)")
)

const (
	diffRanges     = 4
	diffGroup      = "diff"
	diffRangeLabel = "sharding.reconcilekit.io/range-" + diffGroup
	diffFinalizer  = "test.reconcilekit.io/hold"
	diffSync       = "test.reconcilekit.io/sync"
	diffNote       = "test.reconcilekit.io/note"
	// diffMaxOps is the most writes in a segment, diffMaxLive the most
	// live generated objects.
	diffMaxOps  = 12
	diffMaxLive = 14
	// diffSettle bounds each wait for a quiescent point: a safety net
	// that turns a hang into a failure naming what was missing, not a
	// timed assertion (a point is reached in milliseconds).
	diffSettle = time.Minute
	// unrangedKey is the range of an object that has none, in the
	// test's bookkeeping (an owned object without a valid range label).
	unrangedKey = -1
)

// TestSelectedCacheMatchesAFilteredInformer is the differential test of the
// sharded cache watch (cachewatch.go: selectingLW, selectedWatch) against
// the upstream code it replaces. On the envtest API server, two informers
// watch one kind in one namespace: the kit's, of a cache that SelectCache
// restricts to the ranges a Member claims (the test sets the claims), and the
// reference, a plain controller-runtime informer of every object whose
// handler passes on only the events of the objects whose range is claimed at
// that moment, and applies a claim change as its own additions of the objects
// it has in an acquired range and deletions of those it passed on in a
// released one, as a handler of an informer restarted with the new selector
// would see them. The inputs are random sequences (seeded; the API server
// picks the UIDs, so the reconciled kind's objects land in other ranges on
// each run) of creates, updates of the spec, labels (the range label too: it
// moves an owned object and must not move a reconciled one), annotations and
// finalizers, and deletes with and without a finalizer (so deletion updates
// happen), interleaved with claim changes (acquire or release a range, up to
// two in a segment) that the kit applies while writes are in flight. Each
// segment ends at a quiescent point: the kit has switched to the claims (it
// holds the range markers, one object per range, of exactly the claimed
// ranges) and both handlers got the write of a marker made after everything
// else, waited for on their events, no sleeps. There the test compares what a
// handler can rely on: (1) both hold the same objects in the same last state,
// and the reference holds what the API server lists in the claimed ranges;
// (2) an object whose range stayed claimed through the segment got exactly
// the same events, type and resourceVersion, from both (nothing coalesced or
// replayed, no deletion of a live kept object); (3) an object whose range was
// not claimed at any time in the segment got no event at all from the kit,
// and no handler got a deletion or an update of an object it did not hold,
// or an addition of one it held (the defect of passing on another range's
// updates as deletions). Event sequences are not compared for an object whose
// range was acquired or released in the segment: the kit lists an acquired
// range at the resourceVersion where it switches and replays from there, the
// reference adds what it has when the claims change, so the two split one
// history differently and only the last state is compared; nor in a segment
// where either informer listed everything again (a relist replaces, it does
// not replay), which the log counts. It runs three variants: the reconciled
// kind (Widget) filtered by the API server's shard selector; the same with
// the selector stripped from the kit's requests, as an API server without
// the ShardedListAndWatch gate ignores it, so the kit drops the other
// ranges' objects as they arrive; an owned kind (ConfigMap) placed by its
// range label, always dropped on arrival (half of its range-label writes
// move an object across the border of the claimed ranges). A default run,
// 4 sequences of 12 segments per variant, makes about 1,100 writes and 150
// claim changes and compares about 1,150 handler events of the kit's with
// the reference's, in about 10 s here; -cachewatch.sequences,
// -cachewatch.segments and -cachewatch.seed run more, or other, sequences
// (40 sequences of 20 segments per variant: 13,700 writes, 2,400 claim
// changes, 2.5 minutes). With the kit passing on another range's updates as
// deletions again, or dropping a held object's move out of the claimed
// ranges, or resuming a switched watch without its resourceVersion, this
// test fails.
func TestSelectedCacheMatchesAFilteredInformer(t *testing.T) {
	testenv.Require(t)
	for v, kind := range diffKinds() {
		t.Run(kind.name, func(t *testing.T) {
			var stats diffStats
			start := time.Now()
			for i := range *diffSequences {
				seed := *diffSeed + uint64(i)
				if !t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
					runDiffSequence(t, kind, rand.New(rand.NewPCG(seed, uint64(v))), &stats)
				}) {
					return
				}
			}
			t.Logf("%d sequences, %d segments in %v: %d writes, %d claim changes; handler events: %d of the kit's, %d of the reference's",
				stats.sequences, stats.segments, time.Since(start).Round(time.Millisecond), stats.writes, stats.claimChanges, stats.kitEvents, stats.refEvents)
			t.Logf("events compared exactly for %d objects in segments that kept their range claimed throughout (%d segments not compared so: a relist); "+
				"%d objects in segments where no range of theirs was claimed, %d objects never in a claimed range; %d writes moved an object out of the claimed ranges, %d into them; "+
				"%d deletions the kit made up (no UID)",
				stats.stable, stats.relisted, stats.outOfView, stats.neverKept, stats.movedOut, stats.movedIn, stats.madeUp)
		})
	}
}

// diffStats counts what one variant ran and compared.
type diffStats struct {
	sequences, segments, writes, claimChanges int
	kitEvents, refEvents                      int
	stable, relisted, outOfView, neverKept    int
	madeUp                                    int
	// movedOut and movedIn count the writes that moved an object out of
	// the claimed ranges, or into them (an owned object's range label).
	movedOut, movedIn int
}

// diffKind is one variant: a kind, how its objects are ranged, and whether
// the API server filters the kit's requests.
type diffKind struct {
	name string
	// byLabel: an object's range is its range label's (an owned kind);
	// otherwise its UID's (the reconciled kind).
	byLabel bool
	// strip removes the shard selector from the kit's requests.
	strip bool
	// resource ends the path of the kind's requests.
	resource string
	empty    func() client.Object
	create   func(name string, rng *rand.Rand) client.Object
	// change changes the spec (or the data).
	change func(o client.Object, rng *rand.Rand)
	list   func(ctx context.Context, ns string) ([]client.Object, error)
}

func diffKinds() []diffKind {
	widgets := diffKind{
		resource: "/widgets",
		empty:    func() client.Object { return &testv1.Widget{} },
		create: func(name string, rng *rand.Rand) client.Object {
			return &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: testv1.WidgetSpec{Size: 1 + rng.Int32N(9)}}
		},
		change: func(o client.Object, rng *rand.Rand) {
			w := o.(*testv1.Widget)
			w.Spec.Size = w.Spec.Size%9 + 1
			w.Spec.Color = fmt.Sprintf("c%d", rng.IntN(100))
		},
		list: func(ctx context.Context, ns string) ([]client.Object, error) {
			var l testv1.WidgetList
			if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
				return nil, err
			}
			out := make([]client.Object, 0, len(l.Items))
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			return out, nil
		},
	}
	filtered, stripped := widgets, widgets
	filtered.name = "reconciled kind filtered by the API server"
	stripped.name, stripped.strip = "reconciled kind filtered on arrival", true
	owned := diffKind{
		name: "owned kind by range label", byLabel: true, resource: "/configmaps",
		empty: func() client.Object { return &corev1.ConfigMap{} },
		create: func(name string, rng *rand.Rand) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": strconv.Itoa(rng.IntN(100))}}
		},
		change: func(o client.Object, _ *rand.Rand) {
			cm := o.(*corev1.ConfigMap)
			n, _ := strconv.Atoi(cm.Data["v"])
			cm.Data = map[string]string{"v": strconv.Itoa(n + 1)}
		},
		list: func(ctx context.Context, ns string) ([]client.Object, error) {
			var l corev1.ConfigMapList
			if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
				return nil, err
			}
			out := make([]client.Object, 0, len(l.Items))
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			return out, nil
		},
	}
	return []diffKind{filtered, stripped, owned}
}

// rangeOf is the reference's own range function: Member.RangeOf (the UID's
// range) for the reconciled kind, the range label for an owned kind (none
// without a label naming a range in decimal).
func (k diffKind) rangeOf(o client.Object) (r int, ranged bool) {
	if !k.byLabel {
		return sharding.RangeOf(o.GetUID(), diffRanges), true
	}
	v, ok := o.GetLabels()[diffRangeLabel]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= diffRanges || strconv.Itoa(n) != v {
		return 0, false
	}
	return n, true
}

func (k diffKind) rangeKey(o client.Object) int {
	if r, ranged := k.rangeOf(o); ranged {
		return r
	}
	return unrangedKey
}

// Handler event types.
const (
	evAdd    = "add"
	evUpdate = "update"
	evDelete = "delete"
)

// diffEvent is one handler event of one object.
type diffEvent struct{ typ, rv string }

func (e diffEvent) String() string { return e.typ + "@" + e.rv }

// handlerLog records what one handler got: the objects it holds (added or
// updated, not deleted since), and its events by segment and object.
type handlerLog struct {
	name       string
	mu         sync.Mutex
	segment    int
	held       map[string]client.Object
	events     map[int]map[string][]diffEvent
	violations []string
	total      int
	// madeUp counts the deletions of an object without a UID: a last
	// state the kit made up for an object its informer had not stored.
	madeUp int
	// changed is closed, and replaced, on every event.
	changed chan struct{}
}

func newHandlerLog(name string) *handlerLog {
	return &handlerLog{name: name, held: map[string]client.Object{}, events: map[int]map[string][]diffEvent{}, changed: make(chan struct{})}
}

func (l *handlerLog) setSegment(seg int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.segment = seg
}

func (l *handlerLog) holds(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[key]
	return ok
}

// record logs an event of type typ for obj, as a handler got it, and
// notes what no informer ever delivers: a deletion or an update of an
// object the handler does not hold, an addition of one it holds.
func (l *handlerLog) record(typ string, obj any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer func() {
		close(l.changed)
		l.changed = make(chan struct{})
	}()
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		l.violations = append(l.violations, fmt.Sprintf("segment %d: %s of a %T", l.segment, typ, obj))
		return
	}
	key := client.ObjectKeyFromObject(o).String()
	e := diffEvent{typ, o.GetResourceVersion()}
	_, held := l.held[key]
	switch {
	case typ == evAdd && held:
		l.violations = append(l.violations, fmt.Sprintf("segment %d: %s of %s, which the handler held already", l.segment, e, key))
	case typ != evAdd && !held:
		l.violations = append(l.violations, fmt.Sprintf("segment %d: %s of %s, which the handler did not hold: never passed on, or deleted already", l.segment, e, key))
	}
	if typ == evDelete {
		delete(l.held, key)
		if o.GetUID() == "" {
			l.madeUp++
		}
	} else {
		l.held[key] = o.DeepCopyObject().(client.Object)
	}
	if l.events[l.segment] == nil {
		l.events[l.segment] = map[string][]diffEvent{}
	}
	l.events[l.segment][key] = append(l.events[l.segment][key], e)
	l.total++
}

// waitFor returns once cond, asked under l.mu after each event, answers
// ""; after diffSettle it fails the test with cond's last answer.
func (l *handlerLog) waitFor(t *testing.T, what string, cond func(held map[string]client.Object) string) {
	t.Helper()
	timeout := time.NewTimer(diffSettle)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		msg, changed := cond(l.held), l.changed
		l.mu.Unlock()
		if msg == "" {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("waiting for %s: not within %v: %s", what, diffSettle, msg)
		}
	}
}

// logSnapshot is a handlerLog at a quiescent point.
type logSnapshot struct {
	held       map[string]client.Object
	events     map[string][]diffEvent // the segment's
	violations []string
	total      int
	madeUp     int
}

func (l *handlerLog) snapshot(seg int) logSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return logSnapshot{held: maps.Clone(l.held), events: maps.Clone(l.events[seg]), violations: slices.Clone(l.violations), total: l.total, madeUp: l.madeUp}
}

// logHandler is the kit's informer's handler: it records what it gets.
type logHandler struct{ log *handlerLog }

func (h logHandler) OnAdd(obj any, _ bool) { h.log.record(evAdd, obj) }
func (h logHandler) OnUpdate(_, obj any)   { h.log.record(evUpdate, obj) }
func (h logHandler) OnDelete(obj any)      { h.log.record(evDelete, obj) }

// reference is the handler of the plain informer: it passes on to its log
// the events of the objects of the claimed ranges (and the unranged ones),
// an update of an object that enters them as an addition and one of an
// object that leaves them as a deletion; a claim change adds what it has in
// an acquired range and deletes what it passed on in a released one.
type reference struct {
	mu      sync.Mutex
	kind    diffKind
	claimed []bool
	// all is every live object the informer delivered, by key.
	all map[string]client.Object
	log *handlerLog
}

func (f *reference) OnAdd(obj any, _ bool) { f.observe(obj, false) }
func (f *reference) OnUpdate(_, obj any)   { f.observe(obj, false) }
func (f *reference) OnDelete(obj any)      { f.observe(obj, true) }

func (f *reference) observe(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		f.log.record(evUpdate, obj) // a violation
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := client.ObjectKeyFromObject(o).String()
	if deleted {
		delete(f.all, key)
	} else {
		f.all[key] = o
	}
	f.pass(key, o, !deleted && f.keeps(o))
}

func (f *reference) keeps(o client.Object) bool {
	r, ranged := f.kind.rangeOf(o)
	return !ranged || f.claimed[r]
}

// pass logs what a handler of the filtered informer gets for o (under f.mu).
func (f *reference) pass(key string, o client.Object, keep bool) {
	held := f.log.holds(key)
	switch {
	case keep && held:
		f.log.record(evUpdate, o)
	case keep:
		f.log.record(evAdd, o)
	case held:
		f.log.record(evDelete, o)
	}
}

func (f *reference) setClaims(claimed []bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claimed = slices.Clone(claimed)
	for _, key := range slices.Sorted(maps.Keys(f.all)) {
		if o := f.all[key]; f.keeps(o) != f.log.holds(key) {
			f.pass(key, o, f.keeps(o))
		}
	}
}

// listCounter counts the requests that list every object of a kind (a
// list, or a watch that starts with every object), the first sync's and
// the relists, and strips the shard selector when asked.
type listCounter struct {
	next     http.RoundTripper
	resource string
	strip    bool
	lists    atomic.Int64
}

func (c *listCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if c.strip && q.Has("shardSelector") {
		q.Del("shardSelector")
		r = r.Clone(r.Context())
		r.URL.RawQuery = q.Encode()
	}
	if strings.HasSuffix(r.URL.Path, c.resource) &&
		(q.Get("sendInitialEvents") == "true" || (q.Get("watch") != "true" && q.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchExact))) {
		c.lists.Add(1)
	}
	return c.next.RoundTrip(r)
}

// diffObject is an object the test wrote: its last state.
type diffObject struct {
	obj  client.Object
	gone bool
	// marker: one of the range markers, written only to mark a
	// quiescent point.
	marker bool
}

// diffRun is one sequence.
type diffRun struct {
	t     *testing.T
	ctx   context.Context
	kind  diffKind
	rng   *rand.Rand
	ns    string
	stats *diffStats

	member  *sharding.Member
	claimed []bool

	kit, ref           *handlerLog
	refFilter          *reference
	kitLists, refLists *listCounter

	objects map[string]*diffObject // by name
	names   []string               // in the order of creation
	// markers names the marker of each range: an object of that range
	// that no generated write touches.
	markers []string
	created int
	syncs   int

	// The segment's bookkeeping: the ranges each object had at some time
	// in it (unrangedKey for none), and the claims it went through.
	seen      map[string]map[int]bool
	segClaims [][]bool
	// everInView: the objects that were in a claimed range in some
	// segment.
	everInView map[string]bool
}

func runDiffSequence(t *testing.T, kind diffKind, rng *rand.Rand, stats *diffStats) {
	d := &diffRun{
		t: t, ctx: t.Context(), kind: kind, rng: rng, ns: env.Namespace(t), stats: stats,
		kit: newHandlerLog("kit"), ref: newHandlerLog("reference"),
		objects: map[string]*diffObject{}, markers: make([]string, diffRanges), everInView: map[string]bool{},
	}
	m, err := sharding.New(sharding.Options{Group: diffGroup, Identity: "a", Namespace: d.ns,
		APIReader: env.Client, Client: env.Client, Ranges: diffRanges, Logger: logr.Discard()})
	require.NoError(t, err)
	require.Equal(t, diffRangeLabel, m.RangeLabel())
	d.member = m
	d.claimed = make([]bool, diffRanges)
	for r := range d.claimed {
		d.claimed[r] = rng.IntN(2) == 0
	}
	if !slices.Contains(d.claimed, true) {
		d.claimed[rng.IntN(diffRanges)] = true
	}
	m.SetClaimsForTest(rangesOf(d.claimed)...)

	d.createMarkers()
	for range 3 + rng.IntN(4) {
		d.create()
	}
	d.startCaches()
	// Segment 0 compares the initial lists; the others write.
	for seg := range *diffSegments + 1 {
		d.segment(seg)
	}

	kit, ref := d.kit.snapshot(0), d.ref.snapshot(0)
	stats.sequences++
	stats.kitEvents += kit.total
	stats.refEvents += ref.total
	stats.madeUp += kit.madeUp
	for _, name := range d.names {
		if !d.everInView[d.key(name)] {
			stats.neverKept++
		}
	}
}

func (d *diffRun) key(name string) string { return d.ns + "/" + name }

// createMarkers creates an object in each range: for the reconciled kind,
// objects until their UIDs cover every range (the others stay, as
// generated objects); for an owned kind, one labelled with each range.
func (d *diffRun) createMarkers() {
	if d.kind.byLabel {
		for r := range diffRanges {
			o := d.kind.create(fmt.Sprintf("m-%d", r), d.rng)
			setLabel(o, diffRangeLabel, strconv.Itoa(r))
			d.markers[r] = d.add(o).obj.GetName()
			d.objects[d.markers[r]].marker = true
		}
		return
	}
	for i := 0; slices.Contains(d.markers, ""); i++ {
		require.Less(d.t, i, 200, "no UID of range %d in 200 objects", slices.Index(d.markers, ""))
		o := d.add(d.kind.create(fmt.Sprintf("m-%d", i), d.rng))
		if r := d.kind.rangeKey(o.obj); d.markers[r] == "" {
			d.markers[r] = o.obj.GetName()
			o.marker = true
		}
	}
}

// startCaches starts the kit's cache, selected by the Member, and the
// reference's, plain, with an informer of the kind each.
func (d *diffRun) startCaches() {
	kitOpts, err := d.member.SelectCache(cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{d.ns: {}}},
		env.Scheme, &testv1.Widget{}, &corev1.ConfigMap{})
	require.NoError(d.t, err)
	d.kitLists = &listCounter{resource: d.kind.resource, strip: d.kind.strip}
	d.refLists = &listCounter{resource: d.kind.resource}
	d.refFilter = &reference{kind: d.kind, claimed: slices.Clone(d.claimed), all: map[string]client.Object{}, log: d.ref}
	d.startCache(kitOpts, d.kitLists, logHandler{d.kit})
	d.startCache(cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{d.ns: {}}}, d.refLists, d.refFilter)
}

func (d *diffRun) startCache(opts cache.Options, lists *listCounter, h toolscache.ResourceEventHandler) {
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { lists.next = rt; return lists })
	c, err := cache.New(cfg, opts)
	require.NoError(d.t, err)
	inf, err := c.GetInformer(d.ctx, d.kind.empty())
	require.NoError(d.t, err)
	_, err = inf.AddEventHandler(h)
	require.NoError(d.t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Start(d.ctx)
	}()
	d.t.Cleanup(func() { <-done }) // t.Context is done by then
	require.True(d.t, c.WaitForCacheSync(d.ctx), "the caches sync")
}

// segment runs one segment: writes and claim changes (none in segment 0),
// then a quiescent point and the comparison.
func (d *diffRun) segment(seg int) {
	d.kit.setSegment(seg)
	d.ref.setSegment(seg)
	d.seen = map[string]map[int]bool{}
	for _, name := range d.names {
		if o := d.objects[name]; !o.gone {
			d.saw(o.obj)
		}
	}
	before := slices.Clone(d.claimed)
	d.segClaims = [][]bool{before}
	kitLists, refLists := d.kitLists.lists.Load(), d.refLists.lists.Load()
	ops, changes := 0, 0
	if seg > 0 {
		ops = d.rng.IntN(diffMaxOps + 1)
		changes = [...]int{0, 1, 1, 1, 2}[d.rng.IntN(5)]
	}
	at := make([]int, changes)
	for i := range at {
		at[i] = d.rng.IntN(ops + 1)
	}
	slices.Sort(at)
	changed := -1
	for i := 0; i <= ops; i++ {
		for len(at) > 0 && at[0] == i {
			at = at[1:]
			changed = d.changeClaims(changed)
		}
		if i < ops {
			d.write()
		}
	}
	d.quiesce(before)
	relisted := d.kitLists.lists.Load() != kitLists || d.refLists.lists.Load() != refLists
	d.check(seg, relisted)
	d.stats.segments++
}

// changeClaims acquires or releases one range other than not, never the
// last one claimed, and returns it. Two changes in a segment touch two
// ranges, so that the segment changes the claims: quiesce relies on it.
func (d *diffRun) changeClaims(not int) int {
	n := 0
	for _, c := range d.claimed {
		if c {
			n++
		}
	}
	var options []int
	for r, c := range d.claimed {
		if r != not && (!c || n > 1) {
			options = append(options, r)
		}
	}
	r := options[d.rng.IntN(len(options))]
	claimed := slices.Clone(d.claimed)
	claimed[r] = !claimed[r]
	d.claimed = claimed
	d.member.SetClaimsForTest(rangesOf(claimed)...)
	d.refFilter.setClaims(claimed)
	d.segClaims = append(d.segClaims, claimed)
	d.stats.claimChanges++
	return r
}

// write makes one random write: a create, an update of the spec, the
// labels, the annotations or the finalizer, or a delete.
func (d *diffRun) write() {
	var live []string
	for _, name := range d.names {
		if o := d.objects[name]; !o.gone && !o.marker {
			live = append(live, name)
		}
	}
	if len(live) == 0 || (len(live) < diffMaxLive && d.rng.IntN(5) == 0) {
		d.create()
		return
	}
	o := d.objects[live[d.rng.IntN(len(live))]]
	terminating := o.obj.GetDeletionTimestamp() != nil
	finalized := controllerutil.ContainsFinalizer(o.obj, diffFinalizer)
	switch p := d.rng.IntN(100); {
	case p < 20:
		d.update(o, func(c client.Object) { d.kind.change(c, d.rng) })
	case p < 45:
		d.update(o, func(c client.Object) {
			switch q := d.rng.IntN(4); {
			case q == 0:
				setLabel(c, "app", fmt.Sprintf("a%d", d.rng.IntN(4)))
			case q == 1 && d.kind.byLabel:
				// Across the border of the claimed ranges, the
				// path of the fix of known: out of them for an
				// object held, into them for one that is not.
				setLabel(c, diffRangeLabel, d.across(c))
			default:
				setLabel(c, diffRangeLabel, d.rangeLabelValue())
			}
		})
	case p < 53:
		d.update(o, func(c client.Object) { setAnnotation(c, diffNote, strconv.Itoa(d.rng.IntN(1000))) })
	case p < 63 && !finalized && !terminating:
		d.update(o, func(c client.Object) { controllerutil.AddFinalizer(c, diffFinalizer) })
	case (p < 73 && finalized) || terminating:
		d.update(o, func(c client.Object) { controllerutil.RemoveFinalizer(c, diffFinalizer) })
	default:
		d.remove(o)
	}
}

// rangeLabelValue is a random value of the range label: a range, none
// (""), or a value that names no range.
func (d *diffRun) rangeLabelValue() string {
	switch p := d.rng.IntN(10); {
	case p < 6:
		return strconv.Itoa(d.rng.IntN(diffRanges))
	case p < 8:
		return ""
	default:
		return [...]string{"x", "9", "01"}[d.rng.IntN(3)]
	}
}

// across is a range label value that moves an owned object o out of the
// claimed ranges if it is in one (or in none), into one if not.
func (d *diffRun) across(o client.Object) string {
	in := d.inClaimed(o)
	var ranges []int
	for r, c := range d.claimed {
		if c != in {
			ranges = append(ranges, r)
		}
	}
	if len(ranges) == 0 { // every range claimed
		return d.rangeLabelValue()
	}
	return strconv.Itoa(ranges[d.rng.IntN(len(ranges))])
}

// create creates a generated object: maybe with a range label (which moves
// only an owned object), maybe with a finalizer.
func (d *diffRun) create() {
	o := d.kind.create(fmt.Sprintf("o-%d", d.created), d.rng)
	d.created++
	if d.kind.byLabel || d.rng.IntN(2) == 0 {
		setLabel(o, diffRangeLabel, d.rangeLabelValue())
	}
	if d.rng.IntN(5) < 2 {
		controllerutil.AddFinalizer(o, diffFinalizer)
	}
	d.add(o)
}

func (d *diffRun) add(o client.Object) *diffObject {
	o.SetNamespace(d.ns)
	require.NoError(d.t, env.Client.Create(d.ctx, o), "creating %s", o.GetName())
	d.stats.writes++
	obj := &diffObject{obj: o}
	d.objects[o.GetName()] = obj
	d.names = append(d.names, o.GetName())
	if d.seen != nil {
		d.saw(o)
	}
	return obj
}

func (d *diffRun) update(o *diffObject, mutate func(client.Object)) {
	c := o.obj.DeepCopyObject().(client.Object)
	mutate(c)
	require.NoError(d.t, env.Client.Update(d.ctx, c), "updating %s", c.GetName())
	d.stats.writes++
	switch was, is := d.inClaimed(o.obj), d.inClaimed(c); {
	case was && !is:
		d.stats.movedOut++
	case is && !was:
		d.stats.movedIn++
	}
	o.obj = c
	if c.GetDeletionTimestamp() != nil && len(c.GetFinalizers()) == 0 {
		o.gone = true // its last finalizer removed
	}
	d.saw(c)
}

// remove deletes o: it is gone, or, with a finalizer, terminating.
func (d *diffRun) remove(o *diffObject) {
	require.NoError(d.t, env.Client.Delete(d.ctx, o.obj), "deleting %s", o.obj.GetName())
	d.stats.writes++
	if !controllerutil.ContainsFinalizer(o.obj, diffFinalizer) {
		o.gone = true
		return
	}
	c := d.kind.empty()
	require.NoError(d.t, env.Client.Get(d.ctx, client.ObjectKeyFromObject(o.obj), c))
	o.obj = c
	d.saw(c)
}

// inClaimed reports whether o is in a claimed range, or in none.
func (d *diffRun) inClaimed(o client.Object) bool {
	r, ranged := d.kind.rangeOf(o)
	return !ranged || d.claimed[r]
}

// saw notes o's range as one of its ranges in the segment.
func (d *diffRun) saw(o client.Object) {
	key := d.key(o.GetName())
	if d.seen[key] == nil {
		d.seen[key] = map[int]bool{}
	}
	d.seen[key][d.kind.rangeKey(o)] = true
}

// quiesce returns at a quiescent point: the kit's watch has switched to
// the claims, and both handlers got every event of the segment.
//
// The kit switches asynchronously. When the segment changed the claims, it
// waits until the kit holds the markers of exactly the claimed ranges. Each
// claim change flips one range and two changes in a segment flip two, so no
// mix of the claims before and in between has the markers of the claims
// after: only a switch to those claims (maybe still sending) gets there.
// Then it writes the marker of a claimed range, which reaches the kit's
// watch after that switch has sent everything, and waits until both
// handlers hold it at that write's resourceVersion: each informer delivers
// its events in order.
func (d *diffRun) quiesce(before []bool) {
	if !slices.Equal(before, d.claimed) {
		d.kit.waitFor(d.t, fmt.Sprintf("the kit's switch from claims %s to %s", fmtClaims(before), fmtClaims(d.claimed)),
			func(held map[string]client.Object) string {
				var off []string
				for r, name := range d.markers {
					if _, ok := held[d.key(name)]; ok != d.claimed[r] {
						off = append(off, fmt.Sprintf("range %d's marker %s held: %v", r, name, ok))
					}
				}
				return strings.Join(off, "; ")
			})
	}
	m := d.objects[d.markers[slices.Index(d.claimed, true)]]
	d.syncs++
	d.update(m, func(c client.Object) { setAnnotation(c, diffSync, strconv.Itoa(d.syncs)) })
	key, rv := d.key(m.obj.GetName()), m.obj.GetResourceVersion()
	for _, l := range []*handlerLog{d.kit, d.ref} {
		l.waitFor(d.t, fmt.Sprintf("the %s's handler to get %s at resourceVersion %s", l.name, key, rv),
			func(held map[string]client.Object) string {
				o, ok := held[key]
				switch {
				case !ok:
					return "not held"
				case o.GetResourceVersion() != rv:
					return "held at resourceVersion " + o.GetResourceVersion()
				}
				return ""
			})
	}
}

// check compares the kit's handler with the reference's at a quiescent
// point; relisted: an informer listed everything in the segment.
func (d *diffRun) check(seg int, relisted bool) {
	t := d.t
	kit, ref := d.kit.snapshot(seg), d.ref.snapshot(seg)
	if len(ref.violations) > 0 {
		require.Fail(t, "the reference's handler got what no informer delivers: a bug in the test", strings.Join(ref.violations, "\n"))
	}
	if len(kit.violations) > 0 {
		assert.Fail(t, "the kit's handler got what no informer delivers", strings.Join(kit.violations, "\n"))
	}

	// (1) The same objects in the same last state, the API server's.
	assert.Equal(t, slices.Sorted(maps.Keys(ref.held)), slices.Sorted(maps.Keys(kit.held)),
		"segment %d, claims %s: the objects held by the reference's handler (expected) and the kit's (actual)", seg, fmtClaims(d.claimed))
	for _, key := range slices.Sorted(maps.Keys(ref.held)) {
		r, k := diffState(ref.held[key]), kit.held[key]
		if k != nil && !equality.Semantic.DeepEqual(r, diffState(k)) {
			assert.Equal(t, r, diffState(k), "segment %d: the last state of %s, the reference's (expected) and the kit's (actual)", seg, key)
		}
	}
	objs, err := d.kind.list(d.ctx, d.ns)
	require.NoError(t, err)
	truth, refRVs := map[string]string{}, map[string]string{}
	for _, o := range objs {
		if r, ranged := d.kind.rangeOf(o); !ranged || d.claimed[r] {
			truth[client.ObjectKeyFromObject(o).String()] = o.GetResourceVersion()
		}
	}
	for key, o := range ref.held {
		refRVs[key] = o.GetResourceVersion()
	}
	require.Equal(t, truth, refRVs, "segment %d: the API server's objects in the claimed ranges (expected) and the reference's (actual): a bug in the test", seg)

	// (2) and (3), object by object.
	inter, union := slices.Clone(d.segClaims[0]), slices.Clone(d.segClaims[0])
	for _, c := range d.segClaims[1:] {
		for r := range c {
			inter[r] = inter[r] && c[r]
			union[r] = union[r] || c[r]
		}
	}
	for _, key := range slices.Sorted(maps.Keys(d.seen)) {
		stable, inView := true, false
		for r := range d.seen[key] {
			if r == unrangedKey {
				inView = true
				continue
			}
			stable = stable && inter[r]
			inView = inView || union[r]
		}
		ranges := slices.Sorted(maps.Keys(d.seen[key]))
		switch {
		case !inView:
			d.stats.outOfView++
			assert.Empty(t, kit.events[key], "segment %d: the kit's handler got events of %s, whose range %v was not claimed at any time in the segment (claims %s)",
				seg, key, ranges, fmtClaimsSeq(d.segClaims))
		case stable && !relisted:
			d.stats.stable++
			assert.Equal(t, ref.events[key], kit.events[key], "segment %d: the events of %s, whose range %v stayed claimed (claims %s): the reference's (expected) and the kit's (actual)",
				seg, key, ranges, fmtClaimsSeq(d.segClaims))
		}
		if inView {
			d.everInView[key] = true
		}
	}
	if relisted {
		d.stats.relisted++
		t.Logf("segment %d: an informer listed everything again (kit %d lists, reference %d): its events are not compared one by one",
			seg, d.kitLists.lists.Load(), d.refLists.lists.Load())
	}
	for _, key := range slices.Sorted(maps.Keys(kit.events)) {
		if _, ok := d.seen[key]; !ok {
			assert.Fail(t, "an event of an object that was gone", "segment %d: the kit's handler got %v for %s, deleted before the segment", seg, kit.events[key], key)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// diffState is o as compared: without its managed fields and type meta,
// which the two informers' decoders may fill differently.
func diffState(o client.Object) client.Object {
	c := o.DeepCopyObject().(client.Object)
	c.SetManagedFields(nil)
	c.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return c
}

func setLabel(o client.Object, key, value string) {
	labels := o.GetLabels()
	if value == "" {
		delete(labels, key)
	} else {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[key] = value
	}
	o.SetLabels(labels)
}

func setAnnotation(o client.Object, key, value string) {
	annotations := o.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = value
	o.SetAnnotations(annotations)
}

func rangesOf(claimed []bool) []int {
	var ranges []int
	for r, c := range claimed {
		if c {
			ranges = append(ranges, r)
		}
	}
	return ranges
}

func fmtClaims(claimed []bool) string { return fmt.Sprint(rangesOf(claimed)) }

func fmtClaimsSeq(seq [][]bool) string {
	parts := make([]string, len(seq))
	for i, c := range seq {
		parts[i] = fmtClaims(c)
	}
	return strings.Join(parts, " → ")
}
