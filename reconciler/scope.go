package reconciler

import (
	"context"
	"fmt"
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
	// its status, labels and annotations; the reconciler writes them at
	// the end of the pass: the labels and annotations that changed in one
	// patch, then the status.
	Object T
	// Client counts its mutating requests into the
	// reconcilekit_mutating_requests_per_reconcile metric. Reads may be
	// served by the manager's cache, with this pass's own writes laid over
	// it: a Get or List after a write in the same pass returns the written
	// copy when it is newer than the cached one, so a later step never
	// judges an object by a version older than the one this pass applied.
	// Across passes the cache is the source (every write is followed by a
	// watch event, hence by another pass); writes through other clients
	// and deletions are not tracked.
	Client client.Client
	// APIReader reads from the API server, never from a cache
	// (Options.APIReader, the manager's GetAPIReader): for the server's
	// truth, at the cost of a request each read. Use it where a cached
	// or stale answer would be wrong (whether an object outside the
	// controller's watches exists, or is gone); prefer Client otherwise.
	APIReader client.Reader
	// Recorder emits events as the controller.
	Recorder events.EventRecorder

	applier *ownership.Applier
	owned   ownedKinds
	// waits are the objects Rollout judged InProgress in the running
	// step (see Options.EveryRolloutEvent).
	waits []waited
}

// Apply applies desired, an apply configuration such as
// appsv1ac.Deployment(name, namespace), as an object owned (controlled) by
// s.Object with server-side apply, writing nothing when the live object
// already matches. Later reads through s.Client in this pass return what
// it wrote. See ownership.Applier.Apply. A step that returns its
// *ownership.AdoptionRefusedError as Retry stalls the pass (Terminal, reason
// ReasonAdoptionRefused): no retry makes the object adoptable. A kind that
// Options.Owns does not declare is an *UndeclaredKindError, and is never
// read or written.
func (s *Scope[T]) Apply(ctx context.Context, desired runtime.ApplyConfiguration, opts ...ownership.ApplyOption) (ownership.ApplyResult, error) {
	gvk, _, err := identify(desired, s.Object)
	if err != nil {
		return "", err
	}
	if err := s.owned.check(gvk.GroupKind()); err != nil {
		return "", err
	}
	return s.applier.Apply(ctx, s.Object, desired, opts...)
}

// Prune deletes the objects of list's type controlled by s.Object whose
// names are not in keep. See ownership.Applier.Prune. A kind that
// Options.Owns does not declare is an *UndeclaredKindError, and is never
// listed.
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
