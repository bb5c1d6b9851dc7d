package sharding

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// The simulation runs several Members against one fake API server (the
// fake client is linearizable, like the real one) on one fake clock, in
// steps of simStep. A running member has a lease round every RetryPeriod; a
// paused one does nothing (no rounds, its passes stand still); a dead one
// never comes back; a partitioned one runs but every request fails.
const (
	simRanges = 16
	simStep   = 250 * time.Millisecond
)

var errPartitioned = errors.New("partitioned from the API server")

type simMember struct {
	*Member
	name        string
	paused      bool
	dead        bool
	partitioned bool
	// lossy members lose the answer to a third of their writes: the
	// write is applied, the member gets an error.
	lossy     bool
	nextRound time.Time
	passes    []*simPass
}

type simPass struct {
	rng   int
	ctx   context.Context
	end   func()
	until time.Time
}

type sim struct {
	t       *testing.T
	rng     *rand.Rand
	clock   *clocktesting.FakeClock
	api     client.WithWatch
	members []*simMember
	// objects holds one object per range, to begin passes on.
	objects []client.Object
}

func newSim(t *testing.T, seed uint64) *sim {
	s := &sim{
		t:     t,
		rng:   rand.New(rand.NewPCG(seed, seed+1)),
		clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		// The plain tracker: the default one tracks managed fields at a
		// cost that would make this test ten times slower.
		api: fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
			WithObjectTracker(clienttesting.NewObjectTracker(clientgoscheme.Scheme, clientgoscheme.Codecs.UniversalDecoder())).Build(),
	}
	s.objects = make([]client.Object, simRanges)
	for found := 0; found < simRanges; {
		uid := randomUID(s.rng)
		if r := RangeOf(uid, simRanges); s.objects[r] == nil {
			s.objects[r] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(r), UID: uid}}
			found++
		}
	}
	return s
}

func (s *sim) add(name string) *simMember {
	sm := &simMember{name: name, nextRound: s.clock.Now()}
	c := interceptor.NewClient(s.api, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if sm.partitioned {
				return errPartitioned
			}
			return c.List(ctx, l, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			if sm.partitioned {
				return errPartitioned
			}
			return s.lose(sm, c.Create(ctx, o, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			if sm.partitioned {
				return errPartitioned
			}
			return s.lose(sm, c.Update(ctx, o, opts...))
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			if sm.partitioned {
				return errPartitioned
			}
			return c.Delete(ctx, o, opts...)
		},
	})
	m, err := New(Options{Group: "sim", Identity: name, Namespace: "ops", APIReader: c, Client: c, Ranges: simRanges,
		Logger: logr.Discard()})
	if err != nil {
		s.t.Fatal(err)
	}
	m.clock = s.clock
	sm.Member = m
	s.members = append(s.members, sm)
	return sm
}

// lose turns a third of a lossy member's successful writes into errors.
func (s *sim) lose(sm *simMember, err error) error {
	if err == nil && sm.lossy && s.rng.IntN(3) == 0 {
		return errors.New("the answer was lost")
	}
	return err
}

// active reports whether sm may act on range r now: it would start a pass,
// or it runs one whose context is not cancelled. A paused member acts on
// nothing until it resumes.
func (sm *simMember) active(r int, now time.Time) bool {
	if sm.paused || sm.dead {
		return false
	}
	sm.mu.Lock()
	may := sm.mayStart(r, now)
	sm.mu.Unlock()
	if may {
		return true
	}
	for _, p := range sm.passes {
		if p.rng == r && p.ctx.Err() == nil {
			return true
		}
	}
	return false
}

// check fails the test if two members may act on one range.
func (s *sim) check(when string) {
	s.t.Helper()
	now := s.clock.Now()
	for r := range simRanges {
		var who []string
		for _, sm := range s.members {
			if sm.active(r, now) {
				who = append(who, sm.name)
			}
		}
		if len(who) > 1 {
			for _, sm := range s.members {
				s.t.Logf("%s paused=%v dead=%v partitioned=%v states=%v renewedAt=%v", sm.name, sm.paused, sm.dead, sm.partitioned,
					sm.table.state, sm.renewedAt.Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
			}
			s.t.Fatalf("%s (t=%v): range %d is acted on by %v", when, now.Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), r, who)
		}
	}
}

// step advances the clock by simStep and runs what is due, in random
// order: rounds, the end of passes (at once if cancelled), new passes.
func (s *sim) step(passRate float64) {
	s.clock.Step(simStep)
	now := s.clock.Now()
	order := s.rng.Perm(len(s.members))
	for _, i := range order {
		sm := s.members[i]
		if sm.paused || sm.dead {
			continue
		}
		kept := sm.passes[:0]
		for _, p := range sm.passes {
			if p.ctx.Err() != nil || !now.Before(p.until) {
				p.end()
				s.check("after a pass ended")
				continue
			}
			kept = append(kept, p)
		}
		sm.passes = kept
		if !now.Before(sm.nextRound) {
			sm.round(context.Background())
			sm.nextRound = now.Add(sm.opts.RetryPeriod)
			s.check("after a round of " + sm.name)
		}
		if s.rng.Float64() < passRate {
			r := s.rng.IntN(simRanges)
			if ctx, end, ok := sm.Begin(context.Background(), s.objects[r]); ok {
				sm.passes = append(sm.passes, &simPass{rng: r, ctx: ctx, end: end,
					until: now.Add(time.Duration(1+s.rng.IntN(12)) * simStep)})
				s.check("after a pass began")
			}
		}
	}
}

func (s *sim) run(d time.Duration, passRate float64) {
	for end := s.clock.Now().Add(d); s.clock.Now().Before(end); {
		s.step(passRate)
	}
}

// settled reports whether the live members own every range, balanced.
func (s *sim) settled() bool {
	var live []string
	owners := make([]int, simRanges)
	for _, sm := range s.members {
		if sm.paused || sm.dead || sm.partitioned {
			continue
		}
		live = append(live, sm.name)
		for _, r := range sm.Owned() {
			owners[r]++
		}
	}
	for _, n := range owners {
		if n != 1 {
			return false
		}
	}
	want := Assign(simRanges, live)
	for _, sm := range s.members {
		if sm.paused || sm.dead || sm.partitioned {
			continue
		}
		for _, r := range sm.Owned() {
			if want[r] != sm.name {
				return false
			}
		}
	}
	return true
}

// settle runs until settled, failing after limit.
func (s *sim) settle(limit time.Duration, passRate float64) time.Duration {
	s.t.Helper()
	start := s.clock.Now()
	for !s.settled() {
		if s.clock.Since(start) > limit {
			for _, sm := range s.members {
				s.t.Logf("%s paused=%v dead=%v partitioned=%v owned=%v states=%v", sm.name, sm.paused, sm.dead, sm.partitioned, sm.Owned(), sm.table.state)
			}
			s.t.Fatalf("not settled after %v", limit)
		}
		s.step(passRate)
	}
	return s.clock.Since(start)
}

func TestMembersJoinAndSplitTheRanges(t *testing.T) {
	s := newSim(t, 1)
	a := s.add("a")
	s.settle(10*time.Second, 0.3)
	if got := len(a.Owned()); got != simRanges {
		t.Fatalf("alone, a owns %d ranges", got)
	}
	s.add("b")
	s.add("c")
	took := s.settle(30*time.Second, 0.3)
	t.Logf("1 → 3 members settled in %v", took)
	for _, sm := range s.members {
		if n := len(sm.Owned()); n > (simRanges+2)/3 {
			t.Errorf("%s owns %d ranges, more than its bound %d", sm.name, n, (simRanges+2)/3)
		}
	}
}

// A member dies while it drains a range (a long pass keeps the range
// claimed): nobody takes the range until the member's lease expired, and
// then somebody does.
func TestMemberDiesMidDrain(t *testing.T) {
	s := newSim(t, 2)
	a := s.add("a")
	s.settle(10*time.Second, 0)
	// A long pass on every range: whatever moves to b must drain first.
	for r := range simRanges {
		ctx, end, ok := a.Begin(context.Background(), s.objects[r])
		if !ok {
			t.Fatalf("a does not own range %d", r)
		}
		a.passes = append(a.passes, &simPass{rng: r, ctx: ctx, end: end, until: s.clock.Now().Add(time.Hour)})
	}
	s.add("b")
	s.run(6*time.Second, 0)
	var stuck []int
	a.mu.Lock()
	for r, st := range a.table.state {
		if st == draining {
			stuck = append(stuck, r)
		}
	}
	a.mu.Unlock()
	if len(stuck) == 0 {
		t.Fatal("no range is draining on a")
	}
	if owned := s.members[1].Owned(); len(owned) != 0 {
		t.Fatalf("b owns %v while a drains them", owned)
	}
	a.dead = true
	died := s.clock.Now()
	a.mu.Lock()
	expires := a.renewedAt.Add(a.opts.LeaseDuration)
	a.mu.Unlock()
	for len(s.members[1].Owned()) < simRanges {
		if s.clock.Since(died) > 30*time.Second {
			t.Fatalf("b owns %v 30s after a died", s.members[1].Owned())
		}
		s.step(0)
		if owned := s.members[1].Owned(); len(owned) > 0 && s.clock.Now().Before(expires) {
			t.Fatalf("b owns %v %v before a's lease expired", owned, expires.Sub(s.clock.Now()))
		}
	}
	t.Logf("b owns every range %v after a died (lease duration %v)", s.clock.Since(died), a.opts.LeaseDuration)
}

// A paused process (a stopped-the-world pause, a frozen VM) loses its
// ranges when its lease expires; when it resumes, its first act is to
// cancel its passes, and it rejoins without ever overlapping.
func TestPausedMemberResumes(t *testing.T) {
	s := newSim(t, 3)
	a, _ := s.add("a"), s.add("b")
	s.settle(30*time.Second, 0.5)
	a.paused = true
	s.settle(40*time.Second, 0.5) // b alone
	a.paused = false
	s.settle(60*time.Second, 0.5)
}

// A member partitioned from the API server keeps running: it stops taking
// passes and cancels its in-flight ones by its renew deadline, before its
// lease expires for the others.
func TestPartitionedMember(t *testing.T) {
	s := newSim(t, 4)
	a, _, _ := s.add("a"), s.add("b"), s.add("c")
	s.settle(30*time.Second, 0.5)
	a.partitioned = true
	s.settle(40*time.Second, 0.5)
	if owned := a.Owned(); len(owned) != 0 {
		t.Fatalf("partitioned a still owns %v", owned)
	}
	a.partitioned = false
	s.settle(60*time.Second, 0.5)
}

// Random joins, pauses, partitions, lost answers and deaths; the check after every
// action is the guarantee, the final settle the liveness.
func TestMembersChaos(t *testing.T) {
	seeds := uint64(32)
	if testing.Short() {
		seeds = 4
	}
	for seed := uint64(10); seed < 10+seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			s := newSim(t, seed)
			for i := range 3 {
				s.add(fmt.Sprintf("m%d", i))
			}
			next := 3
			for range 40 {
				s.run(time.Duration(1+s.rng.IntN(20))*time.Second, 0.5)
				sm := s.members[s.rng.IntN(len(s.members))]
				switch s.rng.IntN(6) {
				case 0:
					s.add(fmt.Sprintf("m%d", next))
					next++
				case 1:
					sm.paused = !sm.paused
				case 2:
					sm.partitioned = !sm.partitioned
				case 4:
					sm.lossy = !sm.lossy
				case 3:
					if !sm.dead {
						sm.dead = true
						// Its replacement, as a Deployment would start.
						s.add(fmt.Sprintf("m%d", next))
						next++
					}
				}
			}
			for _, sm := range s.members {
				sm.paused, sm.partitioned, sm.lossy = false, false, false
			}
			s.settle(2*time.Minute, 0.5)
		})
	}
}
