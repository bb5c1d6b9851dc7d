package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/reconcilekit/reconcilekit/ownership"
)

// Scope is what a step works with during one pass.
type Scope[T Object] struct {
	// Object is this pass's private deep copy of the object. Steps change
	// its status, labels and annotations; the pass writes the changes once
	// the steps are done.
	Object T
	// Client is the pass's client. Reads may come from the manager's cache,
	// but never from a copy older than a write or delete this pass made
	// through Client (docs/reconciler.md, "Reading your own writes"), nor,
	// for a Get of the object a WaitFor step of this pass found, older than
	// what that step found (see WaitFor). Its mutating requests are counted
	// in reconcilekit_mutating_requests_per_reconcile.
	Client client.Client
	// APIReader reads from the API server, never from a cache
	// (Options.APIReader): for the server's truth where a cached answer
	// would be wrong, at the cost of a request each read.
	APIReader client.Reader
	// Recorder emits events as the controller.
	Recorder events.EventRecorder

	applier *ownership.Applier
	owned   ownedKinds
	// controller is Options.Name, for reconcilekit_applies_total.
	controller string
	// rangeLabel is the owner's shard range that Apply writes on what it
	// applies (sharding.Member.RangeLabel), nil without Options.Shard.
	rangeLabel ownership.ApplyOption
	// waits are the objects Rollout judged InProgress in the running
	// step (see Options.RolloutProgressInterval).
	waits []waited
}

// Apply applies desired, an apply configuration such as
// appsv1ac.Deployment(name, namespace), with server-side apply as an object
// controlled by s.Object, and writes nothing when the live object already
// matches (ownership.Applier.Apply). With Options.Shard, the object is
// labelled with the owner's range (ownership.OwnerLabel,
// sharding.Member.RangeLabel), unless it is applied NotOwned. A kind Options.Owns does not declare
// is an *UndeclaredKindError, never read or written. An
// *ownership.AdoptionRefusedError returned as Retry stalls the pass
// (ReasonAdoptionRefused).
func (s *Scope[T]) Apply(ctx context.Context, desired runtime.ApplyConfiguration, opts ...ownership.ApplyOption) (ownership.ApplyResult, error) {
	gvk, _, err := identify(desired, s.Object)
	if err != nil {
		return "", err
	}
	if err := s.owned.check(gvk.GroupKind()); err != nil {
		return "", err
	}
	if s.rangeLabel != nil {
		opts = append(slices.Clip(opts), s.rangeLabel)
	}
	res, err := s.applier.Apply(ctx, s.Object, desired, opts...)
	if err == nil {
		applies.WithLabelValues(s.controller, gvk.Kind, strings.ToLower(string(res))).Inc()
	}
	return res, err
}

// Prune deletes the objects of list's type controlled by s.Object whose
// names are not in keep (ownership.Applier.Prune). A kind Options.Owns does
// not declare is an *UndeclaredKindError, never listed.
func (s *Scope[T]) Prune(ctx context.Context, list client.ObjectList, keep ...string) ([]string, error) {
	gvk, err := apiutil.GVKForObject(list, s.applier.Scheme)
	if err != nil {
		return nil, fmt.Errorf("prune: %T: %w", list, err)
	}
	if err := s.owned.check(schema.GroupKind{Group: gvk.Group, Kind: strings.TrimSuffix(gvk.Kind, "List")}); err != nil {
		return nil, err
	}
	return s.applier.Prune(ctx, s.Object, list, keep...)
}
