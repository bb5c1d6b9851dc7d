package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/ownership"
	"github.com/reconcilekit/reconcilekit/sharding"
)

// Object is what the reconciler works on: a pointer to an API struct with
// a Status struct field (the only part a pass writes), whose conditions
// SetConditions stores and GetConditions returns, and, if Status has a
// field serialized as observedGeneration, an int64 or *int64 named
// ObservedGeneration, which every pass sets to the generation it
// reconciled. New checks all of it and fails naming the field or method;
// the RBAC the reconciler needs is in docs/reconciler.md, "The contract".
type Object interface {
	client.Object
	conditions.Setter
}

// Step is one phase of a reconcile pass.
type Step[T Object] struct {
	// Name appears in logs ("step"), metrics ("step" label) and error
	// messages. Required, unique within a reconciler.
	Name string
	// Condition, if set, is the condition type this step owns: True when the
	// step continues, False with the step's reason when it waits or fails.
	// Owned conditions are Ready's dependents unless Options.ReadyDependsOn says
	// otherwise.
	Condition string
	// Run does the step's work. It may change s.Object's status, labels and
	// annotations only (any other change stalls the pass with
	// ReasonInvalidStep), and must be idempotent: it runs on every pass.
	Run func(ctx context.Context, s *Scope[T]) Outcome

	// reference is set by WaitFor; New gives the step its Run.
	reference *reference[T]
}

// Options configure a [Reconciler].
type Options[T Object] struct {
	// Name names the controller in logs, metrics, events (reporting
	// controller) and, unless FieldManager is set, the server-side apply
	// field manager. Required; a Kubernetes qualified name.
	Name string
	// Steps run in order on every pass over a live object.
	Steps []Step[T]
	// Owns lists the kinds the steps apply and prune, as empty objects
	// (&appsv1.Deployment{}). SetupWithManager watches each, so a change
	// to an owned object starts a pass for its owner. Scope's apply and
	// prune methods refuse any other kind with an *UndeclaredKindError,
	// which stalls the pass (ReasonInvalidStep).
	Owns []client.Object
	// ReadyDependsOn lists the conditions Ready depends on, in the order a user
	// should fix them. Default: every step's Condition, in step order.
	// Whatever it lists, a pass that a step stopped is not Ready: a step
	// that must not hold Ready back returns ContinueWith, not Wait or Retry.
	ReadyDependsOn []string
	// ReadyReason and ReadyMessage, if ReadyReason is set, are Ready's
	// reason and message when every condition it depends on is True
	// (default: those of the last one). New checks that ReadyReason is a
	// valid condition reason.
	ReadyReason, ReadyMessage string
	// Finalizer names the finalizer that guards Cleanup (for example
	// "apps.example.com/cleanup"). Required when Cleanup is set, and an
	// error without it.
	Finalizer string
	// RetiredFinalizers names finalizers that earlier releases added and
	// this one no longer uses (Cleanup dropped, or Finalizer renamed). The
	// reconciler removes them from a live object on its next pass, after
	// ensuring Finalizer (when Cleanup is set). From a deleting object:
	// without Cleanup at once, as they guard nothing; with Cleanup they
	// still guard it, as Finalizer does (a renamed finalizer: an object
	// deleted before this release gave it the new name lists only the
	// old), so an object listing Finalizer or any of them has the Cleanup
	// steps run, and then all of them are removed in one patch. Each must
	// be a qualified name other than Finalizer. See docs/finalizer.md.
	RetiredFinalizers []string
	// Cleanup steps run, in order, when the object is being deleted; the
	// finalizer is removed once all of them continue in one pass. They own
	// no condition (Condition must be empty: Ready=False says why cleanup
	// is stopped) and must be idempotent: every pass starts again from the
	// first.
	Cleanup []Step[T]
	// CleanupDeadline, if set, makes stuck cleanup warn (CleanupOverdue) on
	// every pass once the object has been deleting for this long.
	CleanupDeadline time.Duration
	// RemoveFinalizerAfterDeadline removes the finalizer once
	// CleanupDeadline has passed although cleanup has not succeeded
	// (FinalizerForceRemoved), leaking what the failing step manages.
	RemoveFinalizerAfterDeadline bool
	// DeriveStatus, if set, runs at the end of every pass over a live
	// object, after Ready, Reconciling and Stalled are computed, whatever
	// the steps returned: for status fields derived from the conditions.
	DeriveStatus func(obj T)
	// RolloutProgressInterval is the most often an owner waiting on an
	// owned object's rollout is run again for that object's progress.
	// controller-runtime starts a pass for every status update of an owned
	// object, and a rollout makes several (the Deployment controller
	// writes one each time a replica is updated, ready or available), each
	// waking a pass that can only wait again. The watches Builder sets up
	// (and so SetupWithManager) hold back a status-only update that leaves
	// the rollout in progress (a step returned Scope.Rollout's or
	// Scope.ApplyAndWait's Wait with ReasonInProgress, and kstatus still
	// judges the object InProgress): the updates held back start one pass
	// this long after the first of them, unless a pass starts sooner. The
	// update that ends the rollout (Current or Failed), a change of the
	// object's spec or metadata, and its deletion start a pass at once, so
	// Ready is as prompt as without it; a status that mirrors the rollout's
	// progress ("Updated: 2/3") is at most this old. Default
	// DefaultRolloutProgressInterval; negative: every update starts a pass,
	// as in plain controller-runtime. docs/reconciler.md, "Wake-ups that
	// find nothing to do".
	RolloutProgressInterval time.Duration
	// Shard, if set, makes this replica one of several that share the
	// objects (experimental, docs/sharding.md): a pass runs only for an
	// object whose range the Member owns (Member.Begin around the pass; the
	// pass's context ends if the replica stops renewing its lease), the
	// watches Builder sets up drop the events of the others' objects,
	// Scope.Apply labels every owned object with its owner's range
	// (sharding.Member.RangeLabel) so that it follows its owner, and the objects
	// of a range this replica acquires are queued. The controller then runs
	// on every replica, without leader election; add the Member to the
	// manager (mgr.Add). Each replica's cache still holds every object:
	// the work splits, the memory does not yet.
	Shard *sharding.Member

	// Client, APIReader, Scheme and Recorder default to the manager's.
	// Set Client to a reconcilertest.Client in tests.
	Client    client.Client
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// FieldManager is the server-side apply field manager for owned
	// objects. Default: Name.
	FieldManager string
	// Schemas finds the schemas of owned custom resources for Scope.Apply
	// (built-in kinds never need it). Default: read from the manager's API
	// server, on first use.
	Schemas *ownership.SchemaCache
}

// validateReady checks the conditions at New rather than on every pass:
// each condition has one owning step, and Ready depends only on conditions
// a step owns (anything else would never be set, so Ready would never be
// True) and never on itself or the kstatus conditions.
func validateReady[T Object](opts Options[T], ready []string) error {
	var errs []error
	owner := map[string]string{}
	for i, s := range opts.Steps {
		if s.Condition == "" {
			continue
		}
		if prev, dup := owner[s.Condition]; dup {
			errs = append(errs, fmt.Errorf("reconciler: Options.Steps[%d].Condition %q is already owned by step %q", i, s.Condition, prev))
		}
		owner[s.Condition] = s.Name
	}
	if opts.ReadyReason != "" {
		if err := conditions.ValidateReason(opts.ReadyReason); err != nil {
			errs = append(errs, fmt.Errorf("reconciler: Options.ReadyReason: %w", err))
		}
	}
	for i, c := range ready {
		switch {
		case c == conditions.Ready || c == conditions.Reconciling || c == conditions.Stalled:
			errs = append(errs, fmt.Errorf("reconciler: Options.ReadyDependsOn[%d]: %q cannot be a dependent of Ready", i, c))
		case owner[c] == "":
			errs = append(errs, fmt.Errorf("reconciler: Options.ReadyDependsOn[%d]: no step owns condition %q", i, c))
		}
	}
	return errors.Join(errs...)
}

func validate[T Object](opts Options[T]) error {
	var errs []error
	if opts.Name == "" {
		errs = append(errs, errors.New("reconciler: Options.Name is required"))
	}
	if opts.Client == nil || opts.APIReader == nil || opts.Scheme == nil {
		errs = append(errs, errors.New("reconciler: Options.Client, APIReader and Scheme are required (or pass a manager)"))
	}
	// Step names are one namespace: they label the same metrics and logs.
	seen := map[string]bool{}
	for _, l := range []struct {
		list  string
		steps []Step[T]
	}{{"Steps", opts.Steps}, {"Cleanup", opts.Cleanup}} {
		list := l.list
		for i, s := range l.steps {
			switch {
			case s.Name == "":
				errs = append(errs, fmt.Errorf("reconciler: Options.%s[%d].Name is required", list, i))
			case seen[s.Name]:
				errs = append(errs, fmt.Errorf("reconciler: Options.%s[%d].Name %q is not unique", list, i, s.Name))
			}
			seen[s.Name] = true
			if s.Run == nil && s.reference == nil {
				errs = append(errs, fmt.Errorf("reconciler: Options.%s[%d].Run (%q) is nil", list, i, s.Name))
			}
			if list == "Cleanup" && s.Condition != "" {
				errs = append(errs, fmt.Errorf("reconciler: Options.Cleanup[%d].Condition: cleanup steps own no condition (Ready says why cleanup is stopped)", i))
			}
		}
	}
	errs = append(errs, validateFinalizers(opts)...)
	return errors.Join(errs...)
}
