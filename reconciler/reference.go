package reconciler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// ReasonNotConfigured is the reason of a [WaitFor] step's condition when
// the object names nothing to wait for.
const ReasonNotConfigured = "NotConfigured"

// WaitFor returns a step, named name and owning condition, that waits
// until the object of kind's type that ref names exists, in the
// namespace of the reconciled object. ref returning "" means nothing is
// configured: the step continues with reason NotConfigured. A missing
// object makes the step Wait with reason <Name>NotFound, an existing one
// continue with reason <Name>Found, where <Name> is the step's name in
// CamelCase ("database" gives DatabaseNotFound).
//
// kind is an empty object of the referenced type (&corev1.Service{}), or
// a metav1.PartialObjectMetadata with its GroupVersionKind set for a type
// the scheme does not know. The step judges only the object's existence,
// and caches none of its content.
//
// A later step that follows what the object says (a Deployment's template,
// a ConfigMap's data) reads it with s.Client.Get, typed, unstructured or
// metadata-only. In that pass the read answers neither a copy older than
// the one this step found (the version whose event woke the pass, or a
// newer one) nor NotFound: when the cache s.Client reads (the manager's)
// has not caught up with that version yet, the read goes to
// Options.APIReader instead (one GET, only then, kept for the rest of the
// pass). The wake-up itself is not held back until a typed cache catches
// up: the kit does not know which cache, if any, a step reads. Every
// change of the object wakes the objects naming it, so such a step follows
// each change. Not covered: a List of the kind, and reads in steps before
// this one.
//
// With a manager, [New] keeps the referenced objects in a metadata-only
// cache of their own that keeps of each one its name, namespace and
// resourceVersion (labels, annotations, spec and status are dropped before
// they are stored), indexes the reconciled objects by the name ref
// returns, and offers the watch that wakes the objects naming an object
// when it appears, changes or goes: [Reconciler.ReferenceSources]. That
// watch is a raw source, so builder.WithEventFilter predicates do not
// filter it. The cache lists and watches kind only from the first pass
// that finds a name to wait for (that pass waits for the list): an
// operator whose objects name nothing caches nothing of kind. Its RBAC:
// list and watch of kind, in every namespace the reconciled objects live
// in. Without a manager, the step reads through Options.APIReader.
func WaitFor[T Object](name, condition string, kind client.Object, ref func(T) string) Step[T] {
	return Step[T]{Name: name, Condition: condition, reference: &reference[T]{kind: kind, name: ref}}
}

// reference is what [WaitFor] declares: the referenced kind and how to
// find the referenced name in a T.
type reference[T Object] struct {
	kind client.Object
	name func(T) string
}

// references is what [New] built for the WaitFor steps: the watches on
// the metadata-only cache (none without a manager).
type references struct {
	cache   cache.Cache
	sources []source.Source
}

// lazyWatch is the watch of a WaitFor step's referenced kind: its informer
// and its event source start at the first pass that has a name to wait
// for ([lazyWatch.need]), so that a fleet whose objects name nothing costs
// no list, no watch and no memory. It is the source the controller starts
// ([Reconciler.ReferenceSources]); until it is needed, starting it only
// remembers the controller's queue.
type lazyWatch struct {
	objects cache.Cache
	obj     *metav1.PartialObjectMetadata
	kind    source.Source // source.Kind of obj on objects

	mu       sync.Mutex
	needed   bool // the informer is synced
	ctx      context.Context
	queue    workqueue.TypedRateLimitingInterface[reconcile.Request]
	watching bool
}

// referenceSyncTimeout bounds a pass's wait for a referenced kind's first
// list (controller-runtime's CacheSyncTimeout default); the next pass
// waits again for the same informer.
const referenceSyncTimeout = 2 * time.Minute

// Start is called by the controller: it starts the watch if a pass already
// needed it, and remembers ctx and queue otherwise.
func (l *lazyWatch) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ctx, l.queue = ctx, queue
	return l.watch()
}

// need starts the informer, waits until it has listed every object of
// its kind, and starts the watch if the controller started this source.
// Each pass waits for the same list on its own context, not behind
// another's: a list that cannot finish (no RBAC to list the kind) holds
// back only the passes that name an object, each for at most
// referenceSyncTimeout.
func (l *lazyWatch) need(ctx context.Context) error {
	l.mu.Lock()
	needed := l.needed
	l.mu.Unlock()
	if needed {
		return nil
	}
	inf, err := l.objects.GetInformer(ctx, l.obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("starting the metadata-only informer of %s: %w", l.obj.Kind, err)
	}
	wait, cancel := context.WithTimeout(ctx, referenceSyncTimeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
		return fmt.Errorf("the first object naming a %s waits until every %s is listed (metadata only; RBAC: list and watch): not done within %s",
			l.obj.Kind, l.obj.Kind, referenceSyncTimeout)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.needed {
		logf.FromContext(ctx).Info("a reconciled object names a referenced object: watching them", "kind", l.obj.Kind)
		l.needed = true
	}
	return l.watch()
}

// watch starts the event source once both the controller and a pass have
// asked for it. The informer has synced: registering the handler replays
// every object as a create, so none that came meanwhile is missed.
func (l *lazyWatch) watch() error {
	if !l.needed || l.queue == nil || l.watching {
		return nil
	}
	l.watching = true
	return l.kind.Start(l.ctx, l.queue)
}

// ReferenceSources returns the watches of the objects that the
// reconciler's [WaitFor] steps wait for: an event of such an object
// enqueues every reconciled object that names it. Register each with the
// controller that runs r (builder.WatchesRawSource). Empty without
// WaitFor steps, and when r was built without a manager.
//
// The sources carry no predicate, and builder.WithEventFilter does not
// reach them: controller-runtime adds its predicates to the sources of
// For, Owns and Watches only, never to a WatchesRawSource source. Every
// event of a referenced object (create, update, delete, and the create of
// each existing object when the cache starts) enqueues the objects naming
// it, whatever filter the builder has.
func (r *Reconciler[T]) ReferenceSources() []source.Source {
	if r.references == nil {
		return nil
	}
	return r.references.sources
}

// reasonPrefix is a step name's CamelCase form, the prefix of a WaitFor
// step's reasons.
func reasonPrefix(step string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(step, func(c rune) bool {
		return (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9')
	}) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// resolveReferences gives the WaitFor steps of opts their Run, reading
// through a metadata-only cache added to mgr (or through opts.APIReader
// without one), and builds their index and watches. It returns nil when
// there is no WaitFor step.
func resolveReferences[T Object](mgr manager.Manager, opts *Options[T], newObject func() T) (*references, error) {
	var refs *references
	var objects cache.Cache
	for _, list := range []struct {
		name  string
		steps *[]Step[T]
	}{{"Steps", &opts.Steps}, {"Cleanup", &opts.Cleanup}} {
		resolved := false
		for i, step := range *list.steps {
			ref := step.reference
			if ref == nil {
				continue
			}
			field := fmt.Sprintf("reconciler: Options.%s[%d] (WaitFor %q)", list.name, i, step.Name)
			if ref.kind == nil || ref.name == nil {
				return nil, fmt.Errorf("%s: the kind and the name function are required", field)
			}
			prefix := reasonPrefix(step.Name)
			if prefix == "" || prefix[0] < 'A' || prefix[0] > 'Z' {
				return nil, fmt.Errorf("%s: the step name must start with a letter: it makes the reasons %sNotFound and %sFound", field, prefix, prefix)
			}
			gvk, err := apiutil.GVKForObject(ref.kind, opts.Scheme)
			if err != nil {
				return nil, fmt.Errorf("%s: kind: %w", field, err)
			}
			if refs == nil {
				refs = &references{}
			}
			reader := opts.APIReader
			need := func(context.Context) error { return nil }
			if mgr != nil {
				if objects == nil {
					if objects, err = newReferenceCache(mgr); err != nil {
						return nil, fmt.Errorf("%s: %w", field, err)
					}
					refs.cache = objects
				}
				reader = objects
				src, err := watchReference(mgr, objects, opts, step.Name, gvk, ref, newObject)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", field, err)
				}
				refs.sources = append(refs.sources, src)
				need = src.need
			}
			if !resolved {
				// The caller's slice is not ours to change.
				*list.steps = append([]Step[T](nil), *list.steps...)
				resolved = true
			}
			(*list.steps)[i].Run = waitForReference(reader, need, step.Name, prefix, gvk, ref)
		}
	}
	return refs, nil
}

// waitForReference is the Run of a WaitFor step: need makes reader ready
// to answer.
func waitForReference[T Object](reader client.Reader, need func(context.Context) error, step, prefix string, gvk schema.GroupVersionKind, ref *reference[T]) func(context.Context, *Scope[T]) Outcome {
	return func(ctx context.Context, s *Scope[T]) Outcome {
		name := ref.name(s.Object)
		if name == "" {
			return ContinueWith(ReasonNotConfigured, "no %s configured", step)
		}
		if err := need(ctx); err != nil {
			return Retry(err)
		}
		key := client.ObjectKey{Namespace: s.Object.GetNamespace(), Name: name}
		found := partialObject(gvk)
		err := reader.Get(ctx, key, found)
		switch {
		case apierrors.IsNotFound(err):
			if key.Namespace == "" {
				return Wait(prefix+"NotFound", "%s %s %q not found", step, gvk.Kind, name)
			}
			return Wait(prefix+"NotFound", "%s %s %q not found in namespace %q", step, gvk.Kind, name, key.Namespace)
		case err != nil:
			return Retry(fmt.Errorf("getting %s %s %q: %w", step, gvk.Kind, name, err))
		}
		// A later step that reads the object through s.Client gets this
		// version or a newer one, even when the manager's cache trails.
		if pc, ok := s.Client.(*passClient); ok {
			pc.atLeast(gvk.GroupKind(), key, found.GetResourceVersion())
		}
		return ContinueWith(prefix+"Found", "%s %s %q found", step, gvk.Kind, name)
	}
}

// watchReference indexes the reconciled objects by the name ref returns
// and returns the source that maps an event of a referenced object to the
// reconciled objects in its namespace that name it.
func watchReference[T Object](mgr manager.Manager, objects cache.Cache, opts *Options[T], step string, gvk schema.GroupVersionKind, ref *reference[T], newObject func() T) (*lazyWatch, error) {
	// The informer starts later (lazyWatch.need): a kind the API server
	// does not serve is refused now, not at the first pass.
	if _, err := mgr.GetRESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return nil, fmt.Errorf("the referenced kind %s: %w", gvk, err)
	}
	owner, err := apiutil.GVKForObject(newObject(), opts.Scheme)
	if err != nil {
		return nil, fmt.Errorf("reconciled type: %w", err)
	}
	listGVK := owner.GroupVersion().WithKind(owner.Kind + "List")
	if _, err := opts.Scheme.New(listGVK); err != nil {
		return nil, fmt.Errorf("listing %s to find the ones naming a %s: %w", owner.Kind, gvk.Kind, err)
	}
	index := "reconcilekit.io/" + opts.Name + "/" + step
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), newObject(), index, func(o client.Object) []string {
		if name := ref.name(o.(T)); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("indexing %s by the %s it names: %w", owner.Kind, gvk.Kind, err)
	}
	lister := mgr.GetClient()
	kind := source.Kind(objects, partialObject(gvk), handler.TypedEnqueueRequestsFromMapFunc(
		func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
			list, _ := opts.Scheme.New(listGVK)
			owners := list.(client.ObjectList)
			if err := lister.List(ctx, owners, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
				logf.FromContext(ctx).Error(err, "listing the objects naming a referenced object", "step", step, "kind", gvk.Kind, "name", o.GetName())
				return nil
			}
			var reqs []reconcile.Request
			_ = meta.EachListItem(owners, func(item runtime.Object) error {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(item.(client.Object))})
				return nil
			})
			return reqs
		}))
	return &lazyWatch{objects: objects, obj: partialObject(gvk), kind: kind}, nil
}

// partialObject is an empty metadata-only object of gvk.
func partialObject(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(gvk)
	return o
}

// referenceCache is the metadata-only cache of the referenced objects, a
// manager runnable that the manager starts with its own caches (GetCache)
// and waits for before it starts the controllers. It has a cache of its
// own because a cache's per-object settings are keyed by kind: the
// manager's cache may select the owned objects of the same kind by label.
type referenceCache struct {
	cache.Cache
}

// GetCache makes the manager start the cache with its own caches.
func (c referenceCache) GetCache() cache.Cache { return c.Cache }

// newReferenceCache builds the metadata-only cache on mgr's connection
// and adds it to mgr. A read of a kind it was not told to watch fails
// instead of starting an informer.
func newReferenceCache(mgr manager.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      mgr.GetRESTMapper(),
		DefaultTransform:            keepIdentity(),
		ReaderFailOnMissingInformer: true,
		NewInformer:                 NewInformer,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the metadata-only cache of referenced objects: %w", err)
	}
	if err := mgr.Add(referenceCache{c}); err != nil {
		return nil, fmt.Errorf("adding the metadata-only cache of referenced objects to the manager: %w", err)
	}
	return c, nil
}

// keepIdentity keeps of a metadata-only object its name, namespace and
// resourceVersion (reads set the type again): labels, annotations (a kubectl
// last-applied-configuration can be kilobytes), owner references, UID and
// managedFields of objects the operator only needs to know exist are
// dropped before they are stored. The namespace strings are shared
// between objects, not one copy each.
func keepIdentity() toolscache.TransformFunc {
	var mu sync.Mutex
	namespaces := map[string]string{}
	return func(in any) (any, error) {
		m, ok := in.(*metav1.PartialObjectMetadata)
		if !ok {
			return in, nil
		}
		mu.Lock()
		ns, ok := namespaces[m.Namespace]
		if !ok {
			ns = m.Namespace
			namespaces[ns] = ns
		}
		mu.Unlock()
		out := &metav1.PartialObjectMetadata{}
		out.Name, out.Namespace, out.ResourceVersion = m.Name, ns, m.ResourceVersion
		return out, nil
	}
}
