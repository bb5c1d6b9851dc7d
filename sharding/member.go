package sharding

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// GroupLabel is the label on every Lease of a group of replicas; its value
// is [Options].Group. `kubectl get leases -l sharding.reconcilekit.io/group`
// lists the members and, in their annotations, the ranges they claim.
const GroupLabel = "sharding.reconcilekit.io/group"

// The lease annotations are the protocol between replicas (docs/sharding.md).
const (
	// rangesAnnotation is the member's number of ranges: claims of a
	// member that cuts the hash space differently cannot be compared.
	rangesAnnotation = "sharding.reconcilekit.io/ranges"
	// claimsAnnotation lists the ranges the member acquires, owns or
	// drains, as "0-3,7".
	claimsAnnotation = "sharding.reconcilekit.io/claims"
	// incarnationAnnotation tells this process's lease from one an
	// earlier process of the same identity left behind.
	incarnationAnnotation = "sharding.reconcilekit.io/incarnation"
)

// Options configure a [Member]. Group, Identity, Namespace, APIReader and
// Client are required; the durations default to those of controller-runtime's
// leader election (15 s, 10 s, 2 s).
type Options struct {
	// Group names the replicas that share the objects: the operator's
	// name. It labels their Leases ([GroupLabel]) and prefixes their names.
	Group string
	// Identity is this replica's name, unique among the live replicas of
	// the group: the pod name. Its Lease is named Group-Identity.
	Identity string
	// Namespace holds the group's Leases: the operator's namespace.
	Namespace string
	// APIReader reads the Leases straight from the API server
	// (manager.GetAPIReader()). It must not be a cache: a stale read could
	// miss another replica's claim, and two replicas would own a range.
	APIReader client.Reader
	// Client writes this replica's Lease (manager.GetClient()).
	Client client.Writer
	// Ranges is the number of equal ranges the hash space is cut into, a
	// power of two up to [MaxRanges]; 0 means [DefaultRanges]. Every
	// replica of a group must use the same number: a replica that sees
	// another number in a live Lease acquires nothing until it is gone.
	Ranges int
	// LeaseDuration is how long the others wait, after they last saw this
	// replica's Lease change, before they take its ranges. It is written
	// to the Lease rounded up to whole seconds.
	LeaseDuration time.Duration
	// RenewDeadline is how long after the start of its last successful
	// renewal a replica keeps taking passes. Less than LeaseDuration by at
	// least two RetryPeriods: the rest is the time its in-flight passes
	// have to see their context cancelled.
	RenewDeadline time.Duration
	// RetryPeriod is the time between two lease rounds (read every Lease
	// of the group, step the state machine, renew this replica's Lease).
	RetryPeriod time.Duration
	// Logger receives handoffs and lease errors; the zero Logger means
	// controller-runtime's log.Log.
	Logger logr.Logger
}

// Member is one replica's membership in a group: it announces the replica
// with a Lease, computes the assignment of ranges from the live Leases with
// [Assign], and moves ranges through the handoff state machine (free →
// acquiring → owned → draining → free) so that no two replicas ever own the
// same range. A controller asks [Member.Begin] (or [Member.Owns], as an
// event filter) before a pass. docs/sharding.md gives the protocol and its
// failure cases.
//
// A Member is a manager.Runnable that runs on every replica
// (NeedLeaderElection is false): add it with mgr.Add.
type Member struct {
	opts        Options
	leaseName   string
	rangeLabel  string
	incarnation string
	clock       clock.WithTickerAndDelayedExecution
	log         logr.Logger

	mu    sync.Mutex
	table *table
	// lease is this replica's Lease as last written or read back; nil
	// until it exists.
	lease *coordinationv1.Lease
	// renewedAt is when the last successful write of lease was sent.
	renewedAt time.Time
	// watchdog cancels the passes at the renew deadline, should the
	// next renewal not come in time (or the process be paused).
	watchdog  clock.Timer
	leaving   bool
	peers     map[string]observation
	passes    map[uint64]*pass
	nextPass  uint64
	lastOwned []int
	onChange  []func(owned []int)
	// lastClaims and onClaims: the claimed ranges as last reported, and
	// the caches to tell when they change (SelectCache).
	lastClaims []bool
	onClaims   []func()
	// selected is set by SelectCache: Start then reports how the cache
	// is filtered.
	selected atomic.Bool
	// passEnded wakes a leaving replica when a pass ends.
	passEnded chan struct{}
}

// observation is what this replica knows of another Lease: the version it
// last saw and when it first saw that version, on its own clock. A Lease
// is live until it has not changed for its leaseDurationSeconds; comparing
// local times only, the expiry does not depend on the writer's clock.
type observation struct {
	resourceVersion string
	seen            time.Time
	duration        time.Duration
	identity        string
	claims          []bool
	// foreign is set when the Lease cuts the hash space into another
	// number of ranges or its claims do not parse.
	foreign bool
}

type pass struct {
	rng    int
	cancel context.CancelFunc
}

// New validates opts and returns a Member that has not joined yet: it
// joins when started.
func New(opts Options) (*Member, error) {
	if opts.Ranges == 0 {
		opts.Ranges = DefaultRanges
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = 15 * time.Second
	}
	if opts.RenewDeadline == 0 {
		opts.RenewDeadline = 10 * time.Second
	}
	if opts.RetryPeriod == 0 {
		opts.RetryPeriod = 2 * time.Second
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = log.Log
	}
	var errs []error
	if msgs := validation.IsDNS1123Label(opts.Group); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("sharding: Group %q: %v", opts.Group, msgs))
	}
	leaseName := opts.Group + "-" + opts.Identity
	if opts.Identity == "" {
		errs = append(errs, errors.New("sharding: Identity is required (the pod name)"))
	} else if msgs := validation.IsDNS1123Subdomain(leaseName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("sharding: lease name %q (Group-Identity): %v", leaseName, msgs))
	}
	rangeLabel := rangeLabelPrefix + opts.Group
	if msgs := validation.IsQualifiedName(rangeLabel); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("sharding: Group %q makes the range label %q: %v", opts.Group, rangeLabel, msgs))
	}
	if opts.Namespace == "" {
		errs = append(errs, errors.New("sharding: Namespace is required"))
	}
	if opts.APIReader == nil || opts.Client == nil {
		errs = append(errs, errors.New("sharding: APIReader and Client are required"))
	}
	if err := ValidateRanges(opts.Ranges); err != nil {
		errs = append(errs, err)
	}
	if opts.LeaseDuration < time.Second || opts.RetryPeriod <= 0 ||
		opts.LeaseDuration-opts.RenewDeadline < 2*opts.RetryPeriod || opts.RenewDeadline <= opts.RetryPeriod {
		errs = append(errs, fmt.Errorf("sharding: want RetryPeriod < RenewDeadline ≤ LeaseDuration - 2×RetryPeriod and LeaseDuration ≥ 1s, got %v, %v, %v",
			opts.RetryPeriod, opts.RenewDeadline, opts.LeaseDuration))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &Member{
		opts:        opts,
		leaseName:   leaseName,
		rangeLabel:  rangeLabel,
		incarnation: hex.EncodeToString(b),
		clock:       clock.RealClock{},
		log:         opts.Logger.WithValues("group", opts.Group, "identity", opts.Identity),
		table:       newTable(opts.Ranges),
		lastClaims:  make([]bool, opts.Ranges),
		peers:       map[string]observation{},
		passes:      map[uint64]*pass{},
		passEnded:   make(chan struct{}, 1),
	}, nil
}

// Start runs lease rounds every RetryPeriod until ctx ends, then leaves the
// group: it stops taking passes, waits up to LeaseDuration for the
// in-flight ones, releases its ranges and deletes its Lease, so that the
// others take the ranges at once instead of after the lease expires.
func (m *Member) Start(ctx context.Context) error {
	if m.selected.Load() {
		go m.reportFiltering(ctx)
	}
	ticker := m.clock.NewTicker(m.opts.RetryPeriod)
	defer ticker.Stop()
	for {
		m.round(ctx)
		select {
		case <-ctx.Done():
			m.leave()
			return nil
		case <-ticker.C():
		}
	}
}

// reportFiltering logs, and exports as reconcilekit_shard_server_filtering,
// whether the API server filters the selected cache by shard or the cache
// drops the other ranges' objects itself (SelectCache works either way).
func (m *Member) reportFiltering(ctx context.Context) {
	serverSide, err := ServerFilters(ctx, m.opts.APIReader, m.opts.Namespace)
	switch {
	case err != nil:
		m.log.Error(err, "probing the API server's shard filter (feature gate ShardedListAndWatch)")
		return
	case serverSide:
		serverFiltering.WithLabelValues(m.opts.Group).Set(1)
		m.log.Info("the API server filters this replica's cache by shard: it lists and watches only the objects of its ranges")
	default:
		serverFiltering.WithLabelValues(m.opts.Group).Set(0)
		m.log.Info("the API server does not filter by shard (feature gate ShardedListAndWatch off): this replica's cache " +
			"drops the other ranges' objects as they arrive, so memory splits across the replicas and the watch traffic does not")
	}
}

// NeedLeaderElection is false, so that the manager starts the Member on
// every replica, not only on a leader: sharding replaces leader election
// for the sharded controllers (each replica is a member of the group).
func (m *Member) NeedLeaderElection() bool { return false }

// RangeOf returns the range of obj, an object of the reconciled kind: the
// range of its UID, as the selected cache and the API server's shard
// selector place it. A label on obj does not move it: an operator that
// applies obj for an owner of its own, sharded too, labels it with that
// owner's range ([Member.RangeLabel] of its own group), and a replica that
// routed obj by such a label passed it while another one cached it.
func (m *Member) RangeOf(obj client.Object) int {
	return RangeOf(obj.GetUID(), m.opts.Ranges)
}

// RangeLabel is the label that carries an owner's range on the objects it
// owns (its Deployments, Services), as a decimal range index:
// "sharding.reconcilekit.io/range-" followed by [Options].Group, so that the
// label of one group never moves the objects of another (two sharded
// operators stacked: the parent's owned objects are the child's reconciled
// ones). A replica selects the owned objects of its ranges with
// [Member.LabelSelector], so that they follow their owner instead of being
// hashed on their own UID.
func (m *Member) RangeLabel() string { return m.rangeLabel }

// labelledRange reads o's range from [Member.RangeLabel]; labelled is false
// without a valid one. The selected cache and [Member.OwnedPredicate] place
// an owned object with it.
func (m *Member) labelledRange(o metav1.Object, ranges int) (r int, labelled bool) {
	v, ok := o.GetLabels()[m.rangeLabel]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n >= ranges || strconv.Itoa(n) != v {
		return 0, false
	}
	return n, true
}

// Owns reports whether this replica may start a pass for obj now: its range
// is owned and this replica's lease is fresh. Use it to filter events
// ([Member.Predicate]); use [Member.Begin] around the pass itself.
func (m *Member) Owns(obj client.Object) bool {
	r, now := m.RangeOf(obj), m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mayStart(r, now)
}

// Begin starts a pass for obj if this replica owns its range now, and
// returns a context for the pass and the function that ends it (call it
// exactly once; later calls do nothing). A range is released only after its
// passes have ended, so the pass must end promptly. The context is
// cancelled if this replica stops renewing its lease; the pass must then
// stop writing. When the range is not owned, ok is false and the pass must
// not run: another replica owns, or will own, the object.
func (m *Member) Begin(ctx context.Context, obj client.Object) (passCtx context.Context, end func(), ok bool) {
	r, now := m.RangeOf(obj), m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mayStart(r, now) {
		return ctx, func() {}, false
	}
	passCtx, cancel := context.WithCancel(ctx)
	id := m.nextPass
	m.nextPass++
	m.passes[id] = &pass{rng: r, cancel: cancel}
	m.table.inflight[r]++
	var once sync.Once
	return passCtx, func() {
		once.Do(func() {
			cancel()
			m.mu.Lock()
			delete(m.passes, id)
			m.table.inflight[r]--
			m.mu.Unlock()
			select {
			case m.passEnded <- struct{}{}:
			default:
			}
		})
	}, true
}

// OnChange registers f to be called, from the Member's goroutine, with the
// owned ranges each time they change: to queue the objects of a range just
// acquired, or to re-select a cache. f must return promptly (hand the work
// to another goroutine); it misses the changes made before it was
// registered, so a caller compares [Member.Owned] with what it knew.
func (m *Member) OnChange(f func(owned []int)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onChange = append(m.onChange, f)
}

// onClaimsChange registers f to be called, from the Member's goroutine,
// each time the claimed ranges change (SelectCache's informers list again).
func (m *Member) onClaimsChange(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onClaims = append(m.onClaims, f)
}

// claimed returns the ranges this replica claims (acquiring, owned or
// draining) as a set: what its selected cache holds.
func (m *Member) claimed() []bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.table.claims()
}

// Owned returns the ranges this replica owns, in order.
func (m *Member) Owned() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.table.ownedRanges()
}

// Predicate is an event filter that keeps the events of the objects this
// replica owns ([Member.Owns]). It filters work, not memory: the cache
// holds every object unless it is selected ([Member.SelectCache]).
func (m *Member) Predicate() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return m.Owns(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return m.Owns(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return m.Owns(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return m.Owns(e.Object) },
	}
}

// OwnedPredicate keeps the events of the objects owned by the owners in
// this replica's ranges, for the watch of an owned kind: an object is judged
// by its [Member.RangeLabel], as [Member.Owns] judges its owner; one without
// a valid label (applied before sharding was on) is kept, for the pass to
// judge by its owner.
func (m *Member) OwnedPredicate() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(o client.Object) bool {
		r, labelled := m.labelledRange(o, m.opts.Ranges)
		if !labelled {
			return true
		}
		now := m.clock.Now()
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.mayStart(r, now)
	})
}

// mayStart is Owns under m.mu.
func (m *Member) mayStart(r int, now time.Time) bool {
	return m.table.state[r] == owned && m.fresh(now)
}

// renewed reports whether this replica's lease was renewed within the
// renew deadline: past it, the others may soon see it expired.
func (m *Member) renewed(now time.Time) bool {
	return m.lease != nil && !m.renewedAt.IsZero() && now.Sub(m.renewedAt) < m.opts.RenewDeadline
}

// fresh reports whether this replica may own ranges: renewed and not
// leaving.
func (m *Member) fresh(now time.Time) bool { return m.renewed(now) && !m.leaving }

// round is one lease round: read the group's Leases, step the state
// machine, write this replica's Lease. A claim becomes ownership only in a
// later round, whose read started after the write that persisted it.
func (m *Member) round(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, m.opts.RetryPeriod)
	defer cancel()
	var list coordinationv1.LeaseList
	readErr := m.opts.APIReader.List(rctx, &list, client.InNamespace(m.opts.Namespace),
		client.MatchingLabels{GroupLabel: m.opts.Group})
	// Observations are stamped after the read: a version seen then was
	// written before, so its writer's deadline is no later than ours.
	now := m.clock.Now()

	m.mu.Lock()
	var rd round
	var expired []coordinationv1.Lease
	if readErr != nil {
		m.log.Error(readErr, "reading the group's leases; acquiring nothing this round")
		rd = m.blindRound(now)
	} else {
		expired = m.observe(list.Items, now)
		rd = m.viewRound(now)
	}
	changes := m.table.step(rd)
	if !m.renewed(now) {
		// Fenced: the others may take our ranges once our lease expires.
		m.cancelPasses()
	}
	claims := m.table.claims()
	desired := m.desiredLease(claims, now)
	create := m.lease == nil
	_, blocked := m.peers[m.leaseName] // an earlier process's lease of our name, not yet expired
	ownedNow := m.table.ownedRanges()
	var claimListeners []func()
	if !slices.Equal(claims, m.lastClaims) {
		m.lastClaims = claims
		claimListeners = m.onClaims
	}
	m.mu.Unlock()

	for _, f := range claimListeners {
		f()
	}
	m.report(changes, ownedNow)
	for i := range expired {
		// Any member may delete a lease it saw expire: its claims are void
		// already. The precondition spares a lease renewed meanwhile.
		l := &expired[i]
		err := m.opts.Client.Delete(rctx, l, client.Preconditions{ResourceVersion: &l.ResourceVersion})
		if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			m.log.Error(err, "deleting an expired lease", "lease", l.Name)
		}
	}
	if create && blocked {
		return
	}
	sent := m.clock.Now()
	var err error
	if create {
		err = m.opts.Client.Create(rctx, desired)
	} else {
		err = m.opts.Client.Update(rctx, desired)
	}
	if err != nil {
		m.log.Error(err, "writing this replica's lease", "lease", m.leaseName)
		return
	}
	m.mu.Lock()
	m.lease = desired
	m.renewedAt = sent
	m.table.persisted = claims
	m.mu.Unlock()
	m.armWatchdog(sent)
}

// armWatchdog (re)starts the timer that cancels every pass at the renew
// deadline of the renewal sent at sent, unless a later renewal succeeded.
// The lease rounds fence too, but a round can be late (a slow request, a
// pause); the timer fires on the first scheduling after the deadline.
func (m *Member) armWatchdog(sent time.Time) {
	if m.watchdog != nil {
		m.watchdog.Stop()
	}
	m.watchdog = m.clock.AfterFunc(sent.Add(m.opts.RenewDeadline).Sub(m.clock.Now()), func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.renewedAt.Equal(sent) {
			m.cancelPasses()
		}
	})
}

// cancelPasses cancels the context of every pass in flight (under m.mu).
func (m *Member) cancelPasses() {
	for _, p := range m.passes {
		p.cancel()
	}
}

// observe records the group's Leases (under m.mu), adopts this replica's
// own, and returns the Leases that expired.
func (m *Member) observe(leases []coordinationv1.Lease, now time.Time) (expired []coordinationv1.Lease) {
	var own *coordinationv1.Lease
	seen := map[string]bool{}
	for i := range leases {
		l := &leases[i]
		if l.Name == m.leaseName && l.Annotations[incarnationAnnotation] == m.incarnation {
			own = l
			continue
		}
		seen[l.Name] = true
		o, known := m.peers[l.Name]
		if !known || o.resourceVersion != l.ResourceVersion {
			o = m.observation(l, now)
			m.peers[l.Name] = o
		}
		if now.Sub(o.seen) >= o.duration {
			expired = append(expired, *l)
		}
	}
	for name := range m.peers {
		if !seen[name] {
			delete(m.peers, name)
		}
	}
	switch {
	case own != nil:
		// Also covers a write whose answer was lost: what the server has is
		// what we claim.
		m.lease = own.DeepCopy()
		serverClaims, err := parseSet(own.Annotations[claimsAnnotation], m.opts.Ranges)
		if err != nil {
			serverClaims = make([]bool, m.opts.Ranges)
		}
		for r := range m.table.persisted {
			m.table.persisted[r] = serverClaims[r] && m.table.state[r] != free
		}
	case m.lease != nil:
		m.log.Info("this replica's lease is gone or was taken over; fencing and rejoining", "lease", m.leaseName)
		m.lease = nil
		m.renewedAt = time.Time{}
		clear(m.table.persisted)
	}
	return expired
}

func (m *Member) observation(l *coordinationv1.Lease, now time.Time) observation {
	o := observation{resourceVersion: l.ResourceVersion, seen: now, duration: m.opts.LeaseDuration}
	if l.Spec.LeaseDurationSeconds != nil {
		o.duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if l.Spec.HolderIdentity != nil {
		o.identity = *l.Spec.HolderIdentity
	}
	claims, err := parseSet(l.Annotations[claimsAnnotation], m.opts.Ranges)
	if err != nil || l.Annotations[rangesAnnotation] != strconv.Itoa(m.opts.Ranges) {
		m.log.Error(err, "a live lease of the group uses other ranges; acquiring nothing while it lives", "lease", l.Name,
			"ranges", l.Annotations[rangesAnnotation])
		o.foreign = true
	}
	o.claims = claims
	return o
}

// viewRound builds the round from the observed Leases (under m.mu).
func (m *Member) viewRound(now time.Time) round {
	rd := round{fresh: m.fresh(now), now: now, claimedElsewhere: make([]bool, m.opts.Ranges)}
	var members []string
	for _, o := range m.peers {
		if now.Sub(o.seen) >= o.duration {
			continue
		}
		if o.foreign {
			// Its claims cannot be compared with ours: freeze, as
			// when blind.
			return m.blindRound(now)
		}
		members = append(members, o.identity)
		for r, c := range o.claims {
			rd.claimedElsewhere[r] = rd.claimedElsewhere[r] || c
		}
	}
	if rd.fresh {
		members = append(members, m.opts.Identity)
	}
	liveMembers.WithLabelValues(m.opts.Group).Set(float64(len(members)))
	owners := Assign(m.opts.Ranges, members)
	rd.assigned = make([]bool, m.opts.Ranges)
	for r, o := range owners {
		rd.assigned[r] = o == m.opts.Identity
	}
	return rd
}

// blindRound is the round of a failed read, or of a view with a foreign
// lease in it: keep what is owned while fresh, acquire and release nothing
// (a draining range still goes once its passes end).
func (m *Member) blindRound(now time.Time) round {
	rd := round{fresh: m.fresh(now), now: now,
		assigned: make([]bool, m.opts.Ranges), claimedElsewhere: make([]bool, m.opts.Ranges)}
	for r, s := range m.table.state {
		rd.assigned[r] = s == owned
		rd.claimedElsewhere[r] = true
	}
	return rd
}

// desiredLease is this replica's Lease renewed now with the given claims
// (under m.mu).
func (m *Member) desiredLease(claims []bool, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: m.leaseName, Namespace: m.opts.Namespace}}
	if m.lease != nil {
		l = m.lease.DeepCopy()
	}
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Labels[GroupLabel] = m.opts.Group
	l.Annotations[rangesAnnotation] = strconv.Itoa(m.opts.Ranges)
	l.Annotations[claimsAnnotation] = formatSet(claims)
	l.Annotations[incarnationAnnotation] = m.incarnation
	seconds := int32(math.Ceil(m.opts.LeaseDuration.Seconds()))
	l.Spec.HolderIdentity = &m.opts.Identity
	l.Spec.LeaseDurationSeconds = &seconds
	t := metav1.NewMicroTime(now)
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &t
	}
	l.Spec.RenewTime = &t
	return l
}

// report logs and counts a round's transitions and calls OnChange.
func (m *Member) report(changes []transition, ownedNow []int) {
	for _, c := range changes {
		switch c.to {
		case owned:
			handoffs.WithLabelValues(m.opts.Group, "acquired").Inc()
			handoffWait.WithLabelValues(m.opts.Group).Observe(c.waited.Seconds())
			// ownedSince is when the round that acquired the range began
			// its step: no pass of the range began before it, while the
			// line itself is written after the passes may have begun.
			m.log.Info("range acquired", "range", c.rng, "waited", c.waited, "ownedSince", c.at.UTC().Format(time.RFC3339Nano))
		case free:
			if c.from == draining {
				handoffs.WithLabelValues(m.opts.Group, "released").Inc()
				m.log.Info("range released", "range", c.rng)
			}
		case draining:
			m.log.V(1).Info("range draining", "range", c.rng)
		}
	}
	rangesOwned.WithLabelValues(m.opts.Group).Set(float64(len(ownedNow)))
	m.mu.Lock()
	changed := !slices.Equal(ownedNow, m.lastOwned)
	m.lastOwned = ownedNow
	listeners := m.onChange
	m.mu.Unlock()
	if changed {
		for _, f := range listeners {
			f(slices.Clone(ownedNow))
		}
	}
}

// leave drains and unclaims every range, then deletes the Lease. It gives
// up after LeaseDuration (cancelling what is still in flight): the lease
// then expires on its own.
func (m *Member) leave() {
	m.mu.Lock()
	m.leaving = true
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.LeaseDuration)
	defer cancel()
	ticker := m.clock.NewTicker(m.opts.RetryPeriod)
	defer ticker.Stop()
	for {
		m.round(ctx)
		m.mu.Lock()
		idle, lease := m.table.idle(), m.lease
		m.mu.Unlock()
		if idle && lease == nil {
			return
		}
		if idle && lease.Annotations[claimsAnnotation] == "" {
			err := m.opts.Client.Delete(ctx, lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion})
			if client.IgnoreNotFound(err) != nil {
				m.log.Error(err, "deleting this replica's lease on leaving; it will expire", "lease", m.leaseName)
			}
			return
		}
		select {
		case <-ctx.Done():
			m.mu.Lock()
			m.cancelPasses()
			m.mu.Unlock()
			m.log.Info("left with passes still in flight; the lease will expire", "lease", m.leaseName)
			return
		case <-m.passEnded:
		case <-ticker.C():
		}
	}
}
