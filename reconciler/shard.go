package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/reconcilekit/reconcilekit/ownership"
)

// beginShard asks Options.Shard whether this replica may run a pass for
// obj now. When it may, the pass runs under the returned context (ended if
// the replica stops renewing its lease) and must call end when it is done;
// when it may not, another replica owns, or will own, obj, and the pass
// does nothing. Without Options.Shard every pass may run.
func (r *Reconciler[T]) beginShard(ctx context.Context, obj client.Object) (passCtx context.Context, end func(), ok bool) {
	if r.opts.Shard == nil {
		return ctx, func() {}, true
	}
	return r.opts.Shard.Begin(ctx, obj)
}

// rangeLabel is the ownership.OwnerLabel Scope.Apply writes on the objects
// obj owns: its range under the group's Member.RangeLabel, so that they
// follow it. nil without Options.Shard.
func (r *Reconciler[T]) rangeLabel(obj client.Object) ownership.ApplyOption {
	if r.opts.Shard == nil {
		return nil
	}
	return ownership.OwnerLabel(r.opts.Shard.RangeLabel(), strconv.Itoa(r.opts.Shard.RangeOf(obj)))
}

// shardFilter returns the predicate that keeps the events of the objects
// this replica owns, for the watch of T (owned false: by its UID's range)
// or of an owned kind (by its owner's range label; one without it, applied
// before sharding was on, is kept, for Member.Begin to judge by its owner).
// None without Options.Shard.
func (r *Reconciler[T]) shardFilter(owned bool) []predicate.Predicate {
	m := r.opts.Shard
	if m == nil {
		return nil
	}
	if !owned {
		return []predicate.Predicate{m.Predicate()}
	}
	return []predicate.Predicate{m.OwnedPredicate()}
}

// shardSource queues the objects of T in the ranges the Member acquires:
// their events may have been dropped while another replica owned them.
// The informer cache holds them (it is not selected by range), and the
// informer stores an object before it hands out its event, so an event
// dropped before the acquisition is of an object the list after it finds.
type shardSource[T Object] struct{ r *Reconciler[T] }

// Start watches the Member's owned ranges until ctx ends.
func (s shardSource[T]) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	gvk, err := apiutil.GVKForObject(s.r.newObject(), s.r.opts.Scheme)
	if err != nil {
		return fmt.Errorf("reconciler: sharding: %w", err)
	}
	newList := func() (client.ObjectList, error) {
		o, err := s.r.opts.Scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err != nil {
			return nil, err
		}
		l, ok := o.(client.ObjectList)
		if !ok {
			return nil, fmt.Errorf("%T is not a client.ObjectList", o)
		}
		return l, nil
	}
	if _, err := newList(); err != nil {
		return fmt.Errorf("reconciler: sharding needs the list type of %s in the scheme: %w", gvk.Kind, err)
	}
	changed := make(chan struct{}, 1)
	s.r.opts.Shard.OnChange(func([]int) {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	go s.run(ctx, q, newList, changed)
	return nil
}

// run queues, each time the owned ranges change, the objects of the
// ranges owned now and not before; a failed list is tried again a second
// later.
func (s shardSource[T]) run(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], newList func() (client.ObjectList, error), changed <-chan struct{}) {
	log := logf.FromContext(ctx).WithName("sharding").WithValues("controller", s.r.opts.Name)
	var had []int
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-retry.C:
		}
		owned := s.r.opts.Shard.Owned()
		var acquired []int
		for _, rng := range owned {
			if !slices.Contains(had, rng) {
				acquired = append(acquired, rng)
			}
		}
		if len(acquired) == 0 {
			had = owned
			continue
		}
		n, err := s.queue(ctx, q, newList, acquired)
		if err != nil {
			log.Error(err, "listing the objects of the ranges acquired; trying again", "ranges", acquired)
			retry.Reset(time.Second)
			continue
		}
		had = owned
		log.V(1).Info("queued the objects of the ranges acquired", "ranges", acquired, "objects", n)
	}
}

// queue lists T from the cache and queues the objects in ranges.
func (s shardSource[T]) queue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], newList func() (client.ObjectList, error), ranges []int) (int, error) {
	list, err := newList()
	if err != nil {
		return 0, err
	}
	if err := s.r.opts.Client.List(ctx, list); err != nil {
		return 0, err
	}
	n := 0
	err = meta.EachListItem(list, func(item runtime.Object) error {
		o, ok := item.(client.Object)
		if ok && slices.Contains(ranges, s.r.opts.Shard.RangeOf(o)) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
			n++
		}
		return nil
	})
	return n, err
}

var _ source.Source = shardSource[Object]{}
