package ownership

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// Applier applies desired owned objects with server-side apply under one
// field manager, writing only when the live object has drifted from what we
// want, and prunes owned objects that are no longer wanted. A pass over
// objects that already match makes no mutating request (but for the first
// over an object the API server has and the cache does not, whose
// create-only apply the server refuses); only the fields the
// desired object sets are applied or compared, so server defaults, other
// managers' fields and IgnoreFields are never overwritten; an object
// controlled by someone else is never modified or deleted. Reads may come
// from a cache, whose lag costs at most an extra read or a no-op re-apply
// (docs/ownership.md, "Caveats"). An object found matching is not compared
// again until its resourceVersion or what the caller asks for changes
// ("How drift is judged"). An Applier is safe for concurrent use if its
// clients are.
type Applier struct {
	// Client reads the live objects (reads may come from the manager's
	// cache) and writes them (writes always go to the apiserver).
	Client client.Client
	// APIReader reads from the API server, not from a cache
	// (mgr.GetAPIReader()). Required. Apply reads through it where a cached
	// copy cannot decide: an object the cache does not hold, or holds
	// without a controller, and an object replaced since it was read.
	APIReader client.Reader
	// Scheme maps the owner to its GroupVersionKind, and says which owned
	// kinds are read as typed objects (sharing the informer of an Owns()
	// watch) rather than unstructured.
	Scheme *runtime.Scheme
	// FieldManager is the server-side apply field manager, e.g.
	// "webapp-operator". Required. Keep it stable: renaming it leaves the
	// old manager owning fields that the new one can then not remove.
	FieldManager string
	// Schemas finds the schema of owned objects in the API server's
	// OpenAPI v3 documents. Custom resources need it; without it built-in
	// kinds use client-go's compiled-in schemas (see [SchemaCache]).
	Schemas *SchemaCache

	// seen is what Apply learned from earlier calls. A pointer, made on
	// first use, so that an Applier stays copyable.
	seen *learned
}

// learned is what an Applier keeps between calls.
type learned struct {
	// uncached holds the objects the API server has and the cache did
	// not (uncached.go), by desiredObject.id().
	uncached uncachedSet
	// namespaced caches whether a kind is namespaced (a scope never
	// changes while a kind exists): asking the RESTMapper costs more than
	// the rest of a converged Apply's preparation.
	namespaced sync.Map // schema.GroupVersionKind -> bool
	// verdicts spare comparing an object again that has not changed since
	// Apply found it matching (verdicts.go).
	verdicts verdicts
}

// WithClient returns a copy of a that reads and writes through c and
// shares what a learns and has learned across calls (the objects the cache
// did not have, the kinds' scopes, the objects found matching): for a
// client made per reconcile pass, such as one that counts a pass's
// requests, while the verdicts outlive the pass.
func (a *Applier) WithClient(c client.Client) *Applier {
	a.learned()
	cp := *a
	cp.Client = c
	return &cp
}

// learnedMu guards the first use of every Applier's seen.
var learnedMu sync.Mutex

// learned returns a.seen, made on first use.
func (a *Applier) learned() *learned {
	learnedMu.Lock()
	defer learnedMu.Unlock()
	if a.seen == nil {
		a.seen = &learned{}
	}
	return a.seen
}

// ApplyResult says what Apply did.
type ApplyResult string

const (
	// Created means the API server had no such object and the apply
	// created it.
	Created ApplyResult = "Created"
	// Updated means the live object had drifted (or the desired
	// configuration changed) and was applied.
	Updated ApplyResult = "Updated"
	// Unchanged means the live object already matched; nothing was written.
	Unchanged ApplyResult = "Unchanged"
)

// ApplyOption adjusts one Apply call: [IgnoreFields], [NotOwned], [Adopt], [OwnerLabel], [Into].
type ApplyOption func(*options)

type options struct {
	ignore   []string
	adopt    bool
	notOwned bool
	labels   map[string]string
	into     client.Object
}

// Apply makes the live object match desired in every field desired sets,
// as an object controlled by owner (in owner's namespace, the default), and
// says what it did: Unchanged when the live object already
// matched and no mutating request was made, Created when the API server had
// no such object, Updated otherwise. desired is an apply configuration,
// which holds exactly the fields the caller set: client-go's
// (appsv1ac.Deployment(name, namespace)), controller-gen's for custom
// resources, or client.ApplyConfigurationFromUnstructured of an object
// built by hand (never one converted from a typed object, whose zero values
// would be sent and force-owned); it is not changed. The live object is
// compared by the kind's schema ([Applier.Schemas]) and written with
// server-side apply, forcing ownership under FieldManager, only on drift or
// a changed configuration ([ConfigHashAnnotation]). An object controlled by
// another owner is a *ForeignControllerError; one without a controller is
// taken only if something on it ties it to owner's UID (see [Adopt]), or
// with Adopt, else an *AdoptionRefusedError; an object replaced since it was read is judged
// again, never written by mistake. docs/ownership.md has the guarantees
// and caveats.
func (a *Applier) Apply(ctx context.Context, owner client.Object, desired runtime.ApplyConfiguration, opts ...ApplyOption) (ApplyResult, error) {
	if err := a.validate(); err != nil {
		return "", err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	encoded, err := encode(desired)
	if err != nil {
		return "", fmt.Errorf("apply: %w", err)
	}
	var (
		asked fingerprint
		// cached is the cache's copy (nil: the cache has none), if
		// judgedBefore read it: the first apply of a new object reads the
		// cache once.
		cached *client.Object
		// judged says whether verdicts apply: to an owned object, unless
		// switched off (for the bench), when every Apply compares.
		judged = !o.notOwned && !fastpath.Off(fastpath.Verdicts)
	)
	if judged {
		asked = fingerprintOf(encoded, owner, o)
		live, read, same, err := a.judgedBefore(ctx, owner, desired, asked)
		switch {
		case err != nil:
			return "", err
		case same:
			return Unchanged, fillInto(o.into, live)
		case read:
			cached = &live
		}
	}
	d, err := a.buildDesired(ctx, owner, desired, encoded, o)
	if err != nil {
		return "", err
	}
	live, err := a.readLive(ctx, d, o.notOwned, cached)
	if err != nil {
		return "", err
	}
	op, after, err := a.write(ctx, d, live)
	again := replaced(err)
	if live == nil && err != nil && (again || a.refusedButExists(ctx, d)) {
		a.learned().uncached.add(d.id())
		again = true
	}
	if again {
		// The object we judged was deleted, or replaced by another with
		// the same name, since the read, or one the cache did not have
		// exists: judge what the API server has.
		if live, err = a.read(ctx, a.APIReader, d); err != nil {
			return "", fmt.Errorf("apply %s: reading live object from the API server: %w", d.desc, err)
		}
		op, after, err = a.write(ctx, d, live)
	}
	if err != nil {
		return "", err
	}
	if judged && after.matches {
		a.learned().verdicts.remember(after.obj, d.gvk.GroupKind(), asked, d.setsControllerAnnotation())
	}
	if err := fillInto(o.into, after.obj); err != nil {
		return "", fmt.Errorf("apply %s: %w", d.desc, err)
	}
	return op, nil
}

func (a *Applier) validate() error {
	switch {
	case fastpath.Err() != nil:
		return fmt.Errorf("ownership.Applier: %w", fastpath.Err())
	case a.Client == nil:
		return errors.New("ownership.Applier: Client is required")
	case a.APIReader == nil:
		return errors.New("ownership.Applier: APIReader is required (mgr.GetAPIReader(), or Client if it does not read from a cache)")
	case a.Scheme == nil:
		return errors.New("ownership.Applier: Scheme is required")
	case a.FieldManager == "":
		return errors.New("ownership.Applier: FieldManager is required")
	}
	return nil
}
