package reconcilertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Lag makes reads of one kind trail the apiserver, as reads through a
// manager's informer cache do under load. Operators read from that cache,
// so a step that writes an object and a later step that reads it back can
// see the previous version: a Deployment still fully rolled out at its old
// generation, a ConfigMap without the key just written, a Secret not yet
// created. A Lag replays that on every run instead of once in a thousand.
//
// A version of an object is readable once it is at least Events versions
// behind the newest version the [Client] knows of (or is the oldest it
// knows) and was first observed at least Delay ago. A read returns the
// newest readable version; an object without one (only just created), or
// whose readable version is its deletion, is NotFound. Set Events, Delay or
// both.
type Lag struct {
	// Kind is the lagged kind as [Request] spells it ("Deployment"),
	// whatever its group. "" lags every kind that has no Lag of its own.
	Kind string
	// Events makes reads return each object as it was this many versions
	// before the newest one the Client knows of; 0 returns the newest. An
	// object with fewer known versions reads as the oldest one, so Events
	// holds back updates and deletions, not creations (Delay does). The
	// lag never catches up: with Events 1, the newest of an object's
	// versions is never read. That is what makes a stale read repeat on
	// every run, whatever the informer's timing, for versions written
	// through the Client (see [WithCacheLag]).
	Events int
	// Delay makes a version readable only this long after the Client first
	// observed it: when its write through the Client returned, or when the
	// informer delivered it, whichever came first. Unlike Events it catches
	// up, as a cache does once a burst of writes is over.
	Delay time.Duration
}

// WithCacheLag makes reads of the lagged kinds return what a lagging
// informer cache would, instead of asking the wrapped client. informers is
// the manager's cache (mgr.GetCache()): its informers deliver the versions
// that other clients write.
//
// For each lagged kind the Client keeps, per object (namespace/name), the
// versions it has observed, ordered by resourceVersion: the answers to its
// own writes (create, update, patch and server-side apply, status
// included), recorded as soon as the write returns, and the events of the
// kind's informer (add, update and delete; a deletion is a version too).
// The informer handler is registered on the first read or write of a kind,
// before the write is sent, and the Client waits until it has synced.
// Objects already in the cache at that point count as observed long ago
// (no Delay), with no earlier history.
//
// Get and List of a lagged kind are answered from those versions, as deep
// copies in the caller's type (typed, unstructured or
// metav1.PartialObjectMetadata); List honours the namespace and the label
// selector and returns an error for a field selector, Limit and Continue,
// which it cannot evaluate. Reads are counted like any other and faults
// apply to them first. Other kinds, Watch and subresource reads go to the
// wrapped client unchanged. [Converge] and [AssertIdempotent] wait out a
// Delay between passes.
//
// Caveats. Per object the Client keeps only the version a read returns now
// and the newer ones (at most Events+1 versions plus those younger than
// Delay), and one tombstone per deleted object: memory grows with the
// number of objects of a lagged kind in the cache, not with the number of
// writes. A lagged kind is read from the manager's informers even where the
// wrapped client would read the apiserver. Writes with
// metav1.PartialObjectMetadata, dry runs and writes whose answer goes to a
// subresource body (scale) are not recorded, nor are deletions through the
// Client: the informer delivers their effect. A version the informer
// delivers after reads have moved past it is dropped, so reads never go
// back. Versions whose resourceVersion is not a decimal integer cannot be
// ordered and are ignored. The informer handlers stay registered for the
// informer's lifetime. Objects written by other clients are observed when
// the informer delivers them, so for a deterministic test make the writes
// that matter through the Client.
//
// WithCacheLag panics on a nil informers, a negative Events or Delay, or
// two Lags for one Kind: the test is wrong, not the code under test.
func WithCacheLag(informers cache.Informers, lags ...Lag) Option {
	if informers == nil {
		panic("reconcilertest: WithCacheLag needs the manager's informers (mgr.GetCache())")
	}
	byKind := map[string]Lag{}
	for _, l := range lags {
		if l.Events < 0 || l.Delay < 0 {
			panic(fmt.Sprintf("reconcilertest: negative lag %+v", l))
		}
		if _, dup := byKind[l.Kind]; dup {
			panic(fmt.Sprintf("reconcilertest: two Lags for kind %q", l.Kind))
		}
		byKind[l.Kind] = l
	}
	return func(c *Client) {
		c.lag = &lagger{
			informers: informers,
			lags:      byKind,
			kinds:     map[schema.GroupVersionKind]*lagKind{},
			now:       time.Now,
		}
	}
}

// lagger is the state of WithCacheLag.
type lagger struct {
	informers cache.Informers
	lags      map[string]Lag
	now       func() time.Time

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]*lagKind
}

// lagKind is one lagged GroupVersionKind.
type lagKind struct {
	lag      Lag
	gvk      schema.GroupVersionKind
	scheme   *runtime.Scheme
	resource schema.GroupResource

	// ready is closed once the informer handler has synced or its
	// registration failed (err).
	ready chan struct{}
	err   error

	// objects holds each object's versions, oldest first; guarded by
	// lagger.mu.
	objects map[types.NamespacedName][]version
	// readKeys and listed record what was read since the Client's last
	// Reset: objects by key, and Lists by namespace ("" for all); guarded
	// by lagger.mu.
	readKeys map[types.NamespacedName]bool
	listed   map[string]bool
}

// wasRead reports whether a read since the last Reset asked for key.
func (k *lagKind) wasRead(key types.NamespacedName) bool {
	return k.readKeys[key] || k.listed[""] || k.listed[key.Namespace]
}

// version is one observed state of an object.
type version struct {
	rv       string
	observed time.Time
	gone     bool           // a tombstone: the object was deleted
	obj      map[string]any // nil for a tombstone
}

// after orders versions by resourceVersion; a tombstone with the
// resourceVersion of a live version (a delete noticed on a re-list) comes
// after it.
func (v version) after(w version) bool {
	c, _ := resourceversion.CompareResourceVersion(v.rv, w.rv)
	return c > 0 || c == 0 && v.gone && !w.gone
}

func (l *lagger) lagFor(kind string) (Lag, bool) {
	if lag, ok := l.lags[kind]; ok {
		return lag, true
	}
	lag, ok := l.lags[""]
	return lag, ok
}

// kind returns the state of gvk, registering its informer handler on first
// use, or nil if gvk is not lagged.
func (l *lagger) kind(ctx context.Context, cl client.Client, gvk schema.GroupVersionKind) (*lagKind, error) {
	lag, ok := l.lagFor(gvk.Kind)
	if !ok {
		return nil, nil
	}
	l.mu.Lock()
	k := l.kinds[gvk]
	first := k == nil
	if first {
		k = &lagKind{lag: lag, gvk: gvk, scheme: cl.Scheme(), ready: make(chan struct{}),
			objects: map[types.NamespacedName][]version{}, readKeys: map[types.NamespacedName]bool{}, listed: map[string]bool{}}
		l.kinds[gvk] = k
	}
	l.mu.Unlock()
	if first {
		if err := l.register(ctx, cl, k); err != nil {
			// Forget k so that a later call, maybe with a live context,
			// tries again.
			l.mu.Lock()
			delete(l.kinds, gvk)
			l.mu.Unlock()
			k.err = fmt.Errorf("reconcilertest: cache lag for %s: %w", gvk.Kind, err)
		}
		close(k.ready)
	}
	select {
	case <-k.ready:
		return k, k.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// register adds k's handler to the kind's informer and waits until the
// handler has seen the informer's initial list.
func (l *lagger) register(ctx context.Context, cl client.Client, k *lagKind) error {
	// The resource names NotFound errors, as the apiserver would.
	if mapping, err := cl.RESTMapper().RESTMapping(k.gvk.GroupKind(), k.gvk.Version); err == nil {
		k.resource = mapping.Resource.GroupResource()
	} else {
		plural, _ := meta.UnsafeGuessKindToResource(k.gvk)
		k.resource = plural.GroupResource()
	}
	var obj client.Object = &unstructured.Unstructured{}
	if typed, err := k.scheme.New(k.gvk); err == nil {
		if o, ok := typed.(client.Object); ok {
			obj = o
		}
	}
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	informer, err := l.informers.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	reg, err := informer.AddEventHandler(lagHandler{l: l, k: k})
	if err != nil {
		return err
	}
	select {
	case <-reg.HasSyncedChecker().Done():
		return nil
	case <-ctx.Done():
		_ = informer.RemoveEventHandler(reg)
		return ctx.Err()
	}
}

// lagHandler feeds a kind's informer events into its history.
type lagHandler struct {
	l *lagger
	k *lagKind
}

// OnAdd records an added object. An object in the informer's initial list
// was in the cache before the Client looked: it counts as observed long ago,
// so a Delay does not hide objects that exist when a kind is first used.
func (h lagHandler) OnAdd(obj any, initial bool) { h.l.observe(h.k, obj, false, initial) }

func (h lagHandler) OnUpdate(_, obj any) { h.l.observe(h.k, obj, false, false) }
func (h lagHandler) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	h.l.observe(h.k, obj, true, false)
}

// observe records obj, an informer's object or a write's answer, as a
// version of its object; long ago means it counts as observed long before
// any Delay.
func (l *lagger) observe(k *lagKind, obj any, gone, longAgo bool) {
	m, err := toMap(k.gvk, obj)
	if err != nil {
		return
	}
	u := unstructured.Unstructured{Object: m}
	v := version{rv: u.GetResourceVersion(), gone: gone}
	now := l.now()
	if !longAgo {
		v.observed = now
	}
	if _, err := resourceversion.CompareResourceVersion(v.rv, v.rv); err != nil {
		return // cannot be ordered
	}
	if !gone {
		v.obj = m
	}
	key := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}

	l.mu.Lock()
	defer l.mu.Unlock()
	h := k.objects[key]
	if p := k.pick(h, now); p >= 0 && !v.after(h[p]) {
		// Seen already (the first observation counts), or older than what
		// reads return now: a late event must not take reads back.
		return
	}
	i := sort.Search(len(h), func(i int) bool { return !v.after(h[i]) })
	if i < len(h) && !h[i].after(v) {
		return // seen already; the first observation counts
	}
	h = append(h, version{})
	copy(h[i+1:], h[i:])
	h[i] = v
	k.objects[key] = h
	k.trim(key, now)
}

// pick returns the index of the version of h a read returns at now, or -1:
// the newest version at least Events behind the newest one (the oldest
// known, if fewer are known) that was observed at least Delay ago.
func (k *lagKind) pick(h []version, now time.Time) int {
	for i := min(max(len(h)-1-k.lag.Events, 0), len(h)-1); i >= 0; i-- {
		if now.Sub(h[i].observed) >= k.lag.Delay {
			return i
		}
	}
	return -1
}

// trim drops the versions older than the one a read returns now: reads
// never go back (observe refuses older versions), so those are never read
// again. A readable tombstone stays, so that a late event cannot bring the
// object back. Callers hold lagger.mu.
func (k *lagKind) trim(key types.NamespacedName, now time.Time) {
	h := k.objects[key]
	if i := k.pick(h, now); i > 0 {
		k.objects[key] = append(h[:0:0], h[i:]...)
	}
}

// read returns a deep copy of the version of key a read returns now, or nil.
func (l *lagger) read(k *lagKind, key types.NamespacedName) map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	k.readKeys[key] = true
	now := l.now()
	k.trim(key, now)
	h := k.objects[key]
	i := k.pick(h, now)
	if i < 0 || h[i].gone {
		return nil
	}
	return runtime.DeepCopyJSON(h[i].obj)
}

// get answers a Get of a lagged kind; handled is false for other kinds.
func (l *lagger) get(ctx context.Context, cl client.Client, key client.ObjectKey, obj client.Object) (handled bool, err error) {
	gvk, err := cl.GroupVersionKindFor(obj)
	if err != nil {
		return true, err
	}
	k, err := l.kind(ctx, cl, gvk)
	if k == nil && err == nil {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	m := l.read(k, key)
	if m == nil {
		return true, apierrors.NewNotFound(k.resource, key.Name)
	}
	return true, fromMap(m, obj)
}

// list answers a List of a lagged kind; handled is false for other kinds.
func (l *lagger) list(ctx context.Context, cl client.Client, list client.ObjectList, opts ...client.ListOption) (handled bool, err error) {
	listGVK, err := cl.GroupVersionKindFor(list)
	if err != nil {
		return true, err
	}
	if !strings.HasSuffix(listGVK.Kind, "List") {
		return false, nil // not a list kind the lag knows how to fill
	}
	gvk := listGVK.GroupVersion().WithKind(strings.TrimSuffix(listGVK.Kind, "List"))
	k, err := l.kind(ctx, cl, gvk)
	if k == nil && err == nil {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	switch {
	case o.FieldSelector != nil && !o.FieldSelector.Empty():
		return true, fmt.Errorf("reconcilertest: cache lag for %s: List with a field selector (%s) is not supported", gvk.Kind, o.FieldSelector)
	case o.Limit > 0 || o.Continue != "":
		return true, fmt.Errorf("reconcilertest: cache lag for %s: List with Limit or Continue is not supported", gvk.Kind)
	}
	selector := o.LabelSelector
	if selector == nil {
		selector = labels.Everything()
	}

	l.mu.Lock()
	k.listed[o.Namespace] = true
	now := l.now()
	var found []map[string]any
	for key := range k.objects {
		if o.Namespace != "" && key.Namespace != o.Namespace {
			continue
		}
		k.trim(key, now)
		h := k.objects[key]
		i := k.pick(h, now)
		if i < 0 || h[i].gone {
			continue
		}
		u := unstructured.Unstructured{Object: h[i].obj}
		if !selector.Matches(labels.Set(u.GetLabels())) {
			continue
		}
		found = append(found, runtime.DeepCopyJSON(h[i].obj))
	}
	l.mu.Unlock()
	sort.Slice(found, func(i, j int) bool {
		a, b := unstructured.Unstructured{Object: found[i]}, unstructured.Unstructured{Object: found[j]}
		return a.GetNamespace() < b.GetNamespace() || a.GetNamespace() == b.GetNamespace() && a.GetName() < b.GetName()
	})

	items := make([]runtime.Object, 0, len(found))
	for _, m := range found {
		var item client.Object
		switch list.(type) {
		case *unstructured.UnstructuredList:
			item = &unstructured.Unstructured{}
		case *metav1.PartialObjectMetadataList:
			item = &metav1.PartialObjectMetadata{}
		default:
			typed, err := k.scheme.New(gvk)
			if err != nil {
				return true, err
			}
			var ok bool
			if item, ok = typed.(client.Object); !ok {
				return true, fmt.Errorf("reconcilertest: cache lag: %T is not a client.Object", typed)
			}
		}
		if err := fromMap(m, item); err != nil {
			return true, err
		}
		items = append(items, item)
	}
	if err := meta.SetList(list, items); err != nil {
		return true, err
	}
	list.SetResourceVersion("")
	list.SetContinue("")
	return true, nil
}

// write runs a write of obj (a client.Object or an apply configuration)
// and, for a lagged kind, records its answer as a version.
func (l *lagger) write(ctx context.Context, cl client.Client, obj any, record bool, do func() error) error {
	gvk, ok := writeGVK(cl, obj)
	if !ok {
		return do()
	}
	k, err := l.kind(ctx, cl, gvk)
	if err != nil {
		return err
	}
	if err := do(); err != nil || k == nil || !record {
		return err
	}
	if _, partial := obj.(*metav1.PartialObjectMetadata); partial {
		return nil // the answer has the metadata only
	}
	// The write succeeded: an answer that cannot be read is not recorded,
	// and the informer delivers it.
	if answer, err := writeAnswer(obj); err == nil {
		l.observe(k, answer, false, false)
	}
	return nil
}

// writeAnswer returns the object a write's answer was decoded into.
func writeAnswer(obj any) (any, error) {
	if _, ok := obj.(runtime.Object); ok {
		// A typed object, an unstructured one, or the
		// *unstructured.Unstructured in
		// client.ApplyConfigurationFromUnstructured.
		return obj, nil
	}
	// A typed apply configuration holds the answer too.
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	// UnmarshalJSON keeps integers int64, as the converter needs.
	u := &unstructured.Unstructured{}
	return u, u.UnmarshalJSON(data)
}

// writeGVK returns the kind of a write's object.
func writeGVK(cl client.Client, obj any) (schema.GroupVersionKind, bool) {
	switch o := obj.(type) {
	case client.Object:
		gvk, err := cl.GroupVersionKindFor(o)
		return gvk, err == nil
	case interface {
		GroupVersionKind() schema.GroupVersionKind
	}: // client.ApplyConfigurationFromUnstructured
		return o.GroupVersionKind(), true
	case interface {
		GetAPIVersion() *string
		GetKind() *string
	}: // typed apply configurations
		if o.GetAPIVersion() == nil || o.GetKind() == nil {
			return schema.GroupVersionKind{}, false
		}
		gv, err := schema.ParseGroupVersion(*o.GetAPIVersion())
		return gv.WithKind(*o.GetKind()), err == nil
	}
	return schema.GroupVersionKind{}, false
}

// pendingUntil returns when every version observed so far (of an object
// read since the last Reset, if onlyRead) will have been observed at least
// its kind's Delay ago.
func (l *lagger) pendingUntil(onlyRead bool) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var until time.Time
	for _, k := range l.kinds {
		if k.lag.Delay == 0 {
			continue
		}
		for key, h := range k.objects {
			if onlyRead && !k.wasRead(key) {
				continue
			}
			for _, v := range h {
				if t := v.observed.Add(k.lag.Delay); t.After(until) {
					until = t
				}
			}
		}
	}
	return until
}

// forgetReads starts a new record of what reads asked for.
func (l *lagger) forgetReads() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.kinds {
		clear(k.readKeys)
		clear(k.listed)
	}
}

// lagPending reports whether a Delay still hides a version of an object
// read since the last Reset: a pass that read it may have missed it.
// Objects the pass did not ask for do not count, so other writers' churn
// in the cluster cannot keep Converge from ending.
func (c *Client) lagPending() bool {
	return c.lag != nil && c.lag.pendingUntil(true).After(c.lag.now())
}

// settleLag waits until no version observed so far is hidden by a Delay,
// so that the next reconcile pass reads what the previous one wrote, as a
// pass triggered after the cache caught up would.
func (c *Client) settleLag(ctx context.Context) error {
	if c.lag == nil {
		return nil
	}
	wait := c.lag.pendingUntil(false).Sub(c.lag.now())
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// toMap converts an object to a fresh unstructured map with apiVersion and
// kind set to gvk.
func toMap(gvk schema.GroupVersionKind, obj any) (map[string]any, error) {
	var m map[string]any
	switch o := obj.(type) {
	case runtime.Unstructured:
		m = runtime.DeepCopyJSON(o.UnstructuredContent())
	case runtime.Object:
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(o); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("reconcilertest: cache lag: unexpected %T", obj)
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, nil
}

// fromMap fills obj, of any representation, from m, which the caller no
// longer uses.
func fromMap(m map[string]any, obj client.Object) error {
	if u, ok := obj.(runtime.Unstructured); ok {
		u.SetUnstructuredContent(m)
		return nil
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return errors.New("reconcilertest: cache lag: reading into a non-pointer")
	}
	v.Elem().Set(reflect.Zero(v.Elem().Type()))
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj)
}
