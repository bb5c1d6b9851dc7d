package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// passClient is the client of one reconcile pass. It counts the pass's
// mutating requests (for the reconcilekit_mutating_requests_per_reconcile
// metric) and gives the pass read-your-writes: it keeps the server's answer
// to every write the pass made (and the copy a pass behind the cache read
// from the API server), and a later read of that object in the same pass
// returns whichever is newer, the cached copy or the written one. After a
// Delete or DeleteAllOf, a cached copy that predates the deletion is not
// returned as it is: see hides. It embeds client.Client, so every other
// method passes through unchanged. docs/reconciler.md, "Reading your own
// writes", has the design and why it is not controller-runtime's
// EnableReadYourWritesConsistency.
type passClient struct {
	client.Client
	// reader reads the API server, to learn what a deletion left of an
	// object whose cached copy predates it.
	reader client.Reader
	n      *atomic.Int64

	mu sync.Mutex
	// written holds deep copies of the server's answers, typed or
	// unstructured as the write was. Most are never read back, or read
	// back in the same form; a deep copy costs a fifth of converting to
	// unstructured (BenchmarkRecordWrite), which only a read in the other
	// form pays.
	written map[writtenKey]client.Object
	// deleted holds the objects the pass deleted, deletedAll its
	// DeleteAllOf calls.
	deleted    map[writtenKey]tombstone
	deletedAll []collection
	// floors holds, per object, the resourceVersion a WaitFor step of this
	// pass found it at: a Get that would answer an older copy, or NotFound,
	// reads the API server instead (see atLeast).
	floors map[floorKey]string
	// tracker, if set, learns every write before it is sent: the object,
	// of kind gvk, and the resourceVersion it had in the caller's hands
	// (the lock of a locked patch; empty for an apply). The func it
	// returns is called once the write is done, with the stored answer
	// (nil when nothing was stored).
	tracker func(gvk schema.GroupVersionKind, obj client.Object, prev string) (done func(answer client.Object))
}

type writtenKey struct {
	gvk schema.GroupVersionKind
	key client.ObjectKey
}

// floorKey names an object whatever version of its API a read uses: they
// share resourceVersions.
type floorKey struct {
	gk  schema.GroupKind
	key client.ObjectKey
}

// tombstone is an object the pass deleted: uid is the deleted object's, or
// empty when the Delete named none; gone is the API server's NotFound once a
// read confirmed the object no longer exists.
type tombstone struct {
	uid  types.UID
	gone error
}

// collection is a DeleteAllOf the pass made, of kind gvk.
type collection struct {
	gvk       schema.GroupVersionKind
	namespace string
	labels    labels.Selector
	fields    fields.Selector
}

// covers reports whether the DeleteAllOf may have deleted o. A field
// selector on other fields than metadata.name and metadata.namespace cannot
// be evaluated here, so it covers every object of the kind in the namespace
// with matching labels: hides then makes the API server decide.
func (d collection) covers(gvk schema.GroupVersionKind, o client.Object) bool {
	if gvk != d.gvk || (d.namespace != "" && d.namespace != o.GetNamespace()) ||
		(d.labels != nil && !d.labels.Matches(labels.Set(o.GetLabels()))) {
		return false
	}
	if d.fields == nil || d.fields.Empty() {
		return true
	}
	for _, r := range d.fields.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return true
		}
	}
	return d.fields.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()})
}

func newPassClient(c client.Client, apiReader client.Reader) *passClient {
	return &passClient{Client: c, reader: apiReader, n: new(atomic.Int64)}
}

func (c *passClient) mutations() int64 { return c.n.Load() }

// record remembers obj, the server's answer to a write, unless an even
// newer copy is already known.
func (c *passClient) record(obj runtime.Object) {
	co, ok := obj.(client.Object)
	if !ok || co.GetResourceVersion() == "" {
		return
	}
	if _, partial := obj.(*metav1.PartialObjectMetadata); partial {
		// Only metadata: laid over a full read it would blank the rest.
		return
	}
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return
	}
	k := writtenKey{gvk: gvk, key: client.ObjectKeyFromObject(co)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written == nil {
		c.written = map[writtenKey]client.Object{}
	}
	if prev, ok := c.written[k]; ok && !newer(co.GetResourceVersion(), prev.GetResourceVersion()) {
		return
	}
	c.written[k] = co.DeepCopyObject().(client.Object)
	// Any cached copy is now either older than this one, which wins, or
	// newer, so later than the deletion.
	delete(c.deleted, k)
}

// track tells the tracker about a write of obj, held at resourceVersion
// prev, about to be sent; call the func it returns when it is done.
func (c *passClient) track(obj client.Object, prev string) func(answer client.Object) {
	if c.tracker != nil {
		if gvk, err := apiutil.GVKForObject(obj, c.Scheme()); err == nil {
			return c.tracker(gvk, obj, prev)
		}
	}
	return func(client.Object) {}
}

// trackApply is track for an apply: only an unstructured apply
// configuration (ownership.Applier's) names its object before it is sent.
func (c *passClient) trackApply(ac runtime.ApplyConfiguration) func(answer client.Object) {
	u, ok := ac.(runtime.Unstructured)
	if !ok || c.tracker == nil {
		return func(client.Object) {}
	}
	return c.track(&unstructured.Unstructured{Object: u.UnstructuredContent()}, "")
}

// lookup returns the written copy of key, if the pass wrote it.
func (c *passClient) lookup(gvk schema.GroupVersionKind, key client.ObjectKey) (client.Object, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, ok := c.written[writtenKey{gvk: gvk, key: key}]
	return m, ok
}

// buryLocked records that the pass deleted the object at k, whose UID is
// uid (empty when unknown), and forgets its written copy.
func (c *passClient) buryLocked(k writtenKey, uid types.UID) {
	if c.deleted == nil {
		c.deleted = map[writtenKey]tombstone{}
	}
	delete(c.written, k)
	c.deleted[k] = tombstone{uid: uid}
}

// tracking reports whether the pass wrote or deleted anything: otherwise
// reads pass through untouched.
func (c *passClient) tracking() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.written) > 0 || len(c.deleted) > 0 || len(c.deletedAll) > 0
}

// hides reports whether o, a cached copy of an object of kind gvk that the
// pass did not write, may predate a deletion the pass made: the pass
// deleted that object (the same UID, or any when the Delete named none), or
// a DeleteAllOf covers it. A copy that is already deleting is not hidden:
// it says what the deletion did. A hidden copy is read again from the API
// server (confirm); hiding too much costs a read, never a wrong answer.
func (c *passClient) hides(gvk schema.GroupVersionKind, o client.Object) bool {
	if o.GetDeletionTimestamp() != nil {
		return false
	}
	k := writtenKey{gvk: gvk, key: client.ObjectKeyFromObject(o)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.written[k]; ok {
		return false
	}
	if t, ok := c.deleted[k]; ok && (t.uid == "" || t.uid == o.GetUID()) {
		return true
	}
	for _, d := range c.deletedAll {
		if d.covers(gvk, o) {
			return true
		}
	}
	return false
}

// confirm replaces obj, a hidden cached copy (see hides), with the API
// server's copy, and records it; or answers NotFound, remembered for the
// rest of the pass.
func (c *passClient) confirm(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object) error {
	k := writtenKey{gvk: gvk, key: client.ObjectKeyFromObject(obj)}
	uid := obj.GetUID()
	c.mu.Lock()
	t, ok := c.deleted[k]
	c.mu.Unlock()
	if ok && t.gone != nil && t.uid == uid {
		return t.gone
	}
	err := c.readLive(ctx, gvk, k.key, obj)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		if c.deleted == nil {
			c.deleted = map[writtenKey]tombstone{}
		}
		c.deleted[k] = tombstone{uid: uid, gone: err}
		c.mu.Unlock()
	}
	return err
}

// readLive replaces obj with the API server's copy of the object at key,
// of kind gvk, and records it.
func (c *passClient) readLive(ctx context.Context, gvk schema.GroupVersionKind, key client.ObjectKey, obj client.Object) error {
	// A fresh object: decoding into the cached copy could keep map
	// entries the server no longer has.
	live := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	live.GetObjectKind().SetGroupVersionKind(gvk)
	if err := c.reader.Get(ctx, key, live); err != nil {
		return err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(live).Elem())
	c.record(obj)
	return nil
}

// atLeast tells the pass that the object of kind gk at key exists at
// resourceVersion rv or a newer one: what a WaitFor step found of it, the
// version whose event woke the pass or a later one. A later Get of it
// through this client answers neither an older copy nor NotFound without
// asking the API server.
func (c *passClient) atLeast(gk schema.GroupKind, key client.ObjectKey, rv string) {
	if rv == "" {
		return
	}
	k := floorKey{gk: gk, key: key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.floors == nil {
		c.floors = map[floorKey]string{}
	}
	if prev, ok := c.floors[k]; ok && !newer(rv, prev) {
		return
	}
	c.floors[k] = rv
}

// belowFloor reports whether a read of the object at key that answered
// obj, or err, is older than what a WaitFor step of this pass found of it
// (see atLeast): NotFound, or an older resourceVersion. Incomparable
// resourceVersions (not an etcd-backed apiserver) are never older, as in
// the horizon.
func (c *passClient) belowFloor(key client.ObjectKey, obj client.Object, err error) (schema.GroupVersionKind, bool) {
	c.mu.Lock()
	none := len(c.floors) == 0
	c.mu.Unlock()
	if none || (err != nil && !apierrors.IsNotFound(err)) {
		return schema.GroupVersionKind{}, false
	}
	gvk, gerr := apiutil.GVKForObject(obj, c.Scheme())
	if gerr != nil {
		return gvk, false
	}
	c.mu.Lock()
	floor, ok := c.floors[floorKey{gk: gvk.GroupKind(), key: key}]
	c.mu.Unlock()
	if !ok {
		return gvk, false
	}
	if err != nil {
		return gvk, true
	}
	cmp, cerr := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), floor)
	return gvk, cerr == nil && cmp < 0
}

// Get reads through the wrapped client (usually the cache) and returns the
// pass's own written copy instead when that is newer, or when the cache does
// not have the object yet. A cached copy that predates the pass's deletion
// of the object is replaced by the API server's answer (see hides), and so
// is an answer older than what a WaitFor step of the pass found of the
// object (see atLeast).
func (c *passClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.get(ctx, key, obj, opts...)
	if gvk, below := c.belowFloor(key, obj, err); below {
		logf.FromContext(ctx).V(1).Info("the cache is behind the version of a referenced object that WaitFor found; reading it from the API server",
			"kind", gvk.Kind, "name", key.Name, "cached", obj.GetResourceVersion())
		return c.readLive(ctx, gvk, key, obj)
	}
	return err
}

// get is Get without the floors of atLeast.
func (c *passClient) get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if !c.tracking() || (err != nil && !apierrors.IsNotFound(err)) {
		return err
	}
	gvk, gerr := apiutil.GVKForObject(obj, c.Scheme())
	if gerr != nil {
		return err
	}
	w, ok := c.lookup(gvk, key)
	if !ok && err == nil && c.hides(gvk, obj) {
		return c.confirm(ctx, gvk, obj)
	}
	if !ok || (err == nil && !newer(w.GetResourceVersion(), obj.GetResourceVersion())) {
		return err
	}
	if cerr := copyInto(w, gvk, obj); cerr != nil {
		return fmt.Errorf("reading the object this pass wrote: %w", cerr)
	}
	return nil
}

// List reads through the wrapped client and, like Get, replaces items with
// newer copies this pass wrote, and adds objects this pass wrote that the
// cache does not list yet, as long as they match the namespace and label
// selector (an item whose newer copy no longer matches is dropped). Items
// that predate the pass's deletions are replaced by the API server's copy,
// or dropped when it is gone, as in Get. A List with a field selector or a
// page (Limit, Continue), which the overlay cannot evaluate, gets only
// that: its other items are left as the cache answered them.
func (c *passClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil || !c.tracking() {
		return err
	}
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	overlay := (lo.FieldSelector == nil || lo.FieldSelector.Empty()) && lo.Limit == 0 && lo.Continue == ""
	gvk, err := apiutil.GVKForObject(list, c.Scheme())
	if err != nil {
		return fmt.Errorf("laying this pass's writes over %T: %w", list, err)
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	items, err := meta.ExtractList(list)
	if err != nil {
		return fmt.Errorf("laying this pass's writes over %T: %w", list, err)
	}
	matches := func(w client.Object) bool {
		return lo.LabelSelector == nil || lo.LabelSelector.Matches(labels.Set(w.GetLabels()))
	}
	seen := map[client.ObjectKey]bool{}
	changed := false
	kept := items[:0:0]
	for _, item := range items {
		o, ok := item.(client.Object)
		if !ok {
			kept = append(kept, item)
			continue
		}
		key := client.ObjectKeyFromObject(o)
		seen[key] = true
		w, ok := c.lookup(gvk, key)
		switch {
		case !ok && c.hides(gvk, o):
			changed = true
			cerr := c.confirm(ctx, gvk, o)
			if apierrors.IsNotFound(cerr) {
				continue
			}
			if cerr != nil {
				return fmt.Errorf("reading an object this pass deleted: %w", cerr)
			}
			if overlay && !matches(o) {
				continue
			}
		case ok && overlay && newer(w.GetResourceVersion(), o.GetResourceVersion()):
			changed = true
			if !matches(w) {
				continue
			}
			if err := copyInto(w, gvk, o); err != nil {
				return fmt.Errorf("reading an object this pass wrote: %w", err)
			}
		}
		kept = append(kept, item)
	}
	items = kept
	if !overlay {
		if changed {
			return meta.SetList(list, items)
		}
		return nil
	}
	c.mu.Lock()
	var missing []client.Object
	for k, w := range c.written {
		if k.gvk != gvk || seen[k.key] || (lo.Namespace != "" && lo.Namespace != k.key.Namespace) || !matches(w) {
			continue
		}
		missing = append(missing, w)
	}
	c.mu.Unlock()
	for _, w := range missing {
		o, err := newListItem(c.Scheme(), list, gvk)
		if err != nil {
			return fmt.Errorf("laying this pass's writes over %T: %w", list, err)
		}
		if err := copyInto(w, gvk, o); err != nil {
			return fmt.Errorf("reading an object this pass wrote: %w", err)
		}
		items = append(items, o)
		changed = true
	}
	if changed {
		return meta.SetList(list, items)
	}
	return nil
}

// Writes are recorded unless they are dry runs, whose answer was never
// stored.

func (c *passClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if len((&client.CreateOptions{}).ApplyOptions(opts).DryRun) == 0 {
		c.record(obj)
	}
	return nil
}

func (c *passClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	var answer client.Object
	defer func(done func(client.Object)) { done(answer) }(c.track(obj, obj.GetResourceVersion()))
	if err := c.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if len((&client.UpdateOptions{}).ApplyOptions(opts).DryRun) == 0 {
		c.record(obj)
		answer = obj
	}
	return nil
}

func (c *passClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	var answer client.Object
	defer func(done func(client.Object)) { done(answer) }(c.track(obj, obj.GetResourceVersion()))
	if err := c.Client.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if len((&client.PatchOptions{}).ApplyOptions(opts).DryRun) == 0 {
		c.record(obj)
		answer = obj
	}
	return nil
}

// Apply records the answer, which controller-runtime's client leaves in
// obj: in the object of an unstructured apply configuration
// (client.ApplyConfigurationFromUnstructured, what ownership.Applier
// sends), decoded into a typed one (client-go's and controller-gen's apply
// configurations).
func (c *passClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.Add(1)
	var answer client.Object
	defer func(done func(client.Object)) { done(answer) }(c.trackApply(obj))
	if err := c.Client.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	if len((&client.ApplyOptions{}).ApplyOptions(opts).DryRun) == 0 {
		answer = c.recordApplied(obj)
	}
	return nil
}

// recordApplied records the answer an apply left in ac, and returns it.
func (c *passClient) recordApplied(ac runtime.ApplyConfiguration) client.Object {
	if o, ok := ac.(client.Object); ok {
		if _, ok := ac.(runtime.Unstructured); ok {
			c.record(o)
			return o
		}
	}
	b, err := json.Marshal(ac)
	if err != nil {
		return nil
	}
	u := &unstructured.Unstructured{}
	if u.UnmarshalJSON(b) != nil {
		return nil
	}
	c.record(u)
	return u
}

// Delete forgets the written copy, and hides cached copies of the deleted
// object from later reads (see hides). NotFound is a deletion too: the
// object is gone.
func (c *passClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	err := c.Client.Delete(ctx, obj, opts...)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	gvk, gerr := apiutil.GVKForObject(obj, c.Scheme())
	if len(do.DryRun) > 0 || gerr != nil {
		return err
	}
	uid := obj.GetUID()
	if do.Preconditions != nil && do.Preconditions.UID != nil {
		uid = *do.Preconditions.UID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buryLocked(writtenKey{gvk: gvk, key: client.ObjectKeyFromObject(obj)}, uid)
	return err
}

// DeleteAllOf buries the written copies it covers, and hides the cached
// copies it covers from later reads (see hides).
func (c *passClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.n.Add(1)
	gvk, gerr := apiutil.GVKForObject(obj, c.Scheme())
	do := (&client.DeleteAllOfOptions{}).ApplyOptions(opts)
	if err := c.Client.DeleteAllOf(ctx, obj, opts...); err != nil || gerr != nil || len(do.DryRun) > 0 {
		return err
	}
	d := collection{gvk: gvk, namespace: do.Namespace, labels: do.LabelSelector, fields: do.FieldSelector}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, w := range c.written {
		if d.covers(k.gvk, w) {
			c.buryLocked(k, w.GetUID())
		}
	}
	c.deletedAll = append(c.deletedAll, d)
	return nil
}

func (c *passClient) Status() client.SubResourceWriter {
	return &passWriter{SubResourceWriter: c.Client.Status(), c: c}
}

func (c *passClient) SubResource(sub string) client.SubResourceClient {
	sr := c.Client.SubResource(sub)
	return passSubResource{SubResourceReader: sr, passWriter: &passWriter{SubResourceWriter: sr, c: c}}
}

// passWriter counts subresource writes; status writes answer with the whole
// object, so they are recorded too (not those with a separate body, whose
// answer is not the object).
type passWriter struct {
	client.SubResourceWriter
	c *passClient
}

func (w *passWriter) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	w.c.n.Add(1)
	return w.SubResourceWriter.Create(ctx, obj, sub, opts...)
}

func (w *passWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	w.c.n.Add(1)
	o := (&client.SubResourceUpdateOptions{}).ApplyOptions(opts)
	done := func(client.Object) {}
	if o.SubResourceBody == nil {
		done = w.c.track(obj, obj.GetResourceVersion())
	}
	var answer client.Object
	defer func() { done(answer) }()
	if err := w.SubResourceWriter.Update(ctx, obj, opts...); err != nil {
		return err
	}
	if len(o.DryRun) == 0 && o.SubResourceBody == nil {
		w.c.record(obj)
		answer = obj
	}
	return nil
}

func (w *passWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.c.n.Add(1)
	o := (&client.SubResourcePatchOptions{}).ApplyOptions(opts)
	done := func(client.Object) {}
	if o.SubResourceBody == nil {
		done = w.c.track(obj, obj.GetResourceVersion())
	}
	var answer client.Object
	defer func() { done(answer) }()
	if err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	if len(o.DryRun) == 0 && o.SubResourceBody == nil {
		w.c.record(obj)
		answer = obj
	}
	return nil
}

func (w *passWriter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	w.c.n.Add(1)
	o := (&client.SubResourceApplyOptions{}).ApplyOpts(opts)
	done := func(client.Object) {}
	if o.SubResourceBody == nil {
		done = w.c.trackApply(obj)
	}
	var answer client.Object
	defer func() { done(answer) }()
	if err := w.SubResourceWriter.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	if len(o.DryRun) == 0 && o.SubResourceBody == nil {
		answer = w.c.recordApplied(obj)
	}
	return nil
}

// passSubResource reads through and writes like passWriter.
type passSubResource struct {
	client.SubResourceReader
	*passWriter
}

// newer reports whether resourceVersion a is newer than b. Resource versions
// are compared with apimachinery's comparison (KEP-5504: etcd-backed
// apiservers hand out comparable integers); when either is not comparable,
// a — the copy this pass wrote — wins, since nothing the cache held before
// our write can be newer than the write's answer.
func newer(a, b string) bool {
	if b == "" {
		return true
	}
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return true
	}
	return cmp > 0
}

// copyInto replaces obj's content with a deep copy of w, the written copy
// of an object of kind gvk: directly when both are of the same Go type,
// through the unstructured form otherwise (a typed write read back as
// unstructured, or the reverse).
func copyInto(w client.Object, gvk schema.GroupVersionKind, obj runtime.Object) error {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("%T is not a pointer", obj)
	}
	if reflect.TypeOf(w) == v.Type() {
		v.Elem().Set(reflect.ValueOf(w.DeepCopyObject()).Elem())
		// A typed write's answer comes back without apiVersion and kind;
		// a cached read has them, so a read of our own write does too.
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return nil
	}
	var m map[string]any
	if u, ok := w.(runtime.Unstructured); ok {
		m = runtime.DeepCopyJSON(u.UnstructuredContent())
	} else {
		var err error
		if m, err = runtime.DefaultUnstructuredConverter.ToUnstructured(w); err != nil {
			return err
		}
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	if u, ok := obj.(runtime.Unstructured); ok {
		u.SetUnstructuredContent(m)
		return nil
	}
	v.Elem().Set(reflect.Zero(v.Elem().Type()))
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj)
}

func newListItem(s *runtime.Scheme, list client.ObjectList, gvk schema.GroupVersionKind) (runtime.Object, error) {
	switch list.(type) {
	case runtime.Unstructured:
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	case *metav1.PartialObjectMetadataList:
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(gvk)
		return m, nil
	}
	return s.New(gvk)
}
