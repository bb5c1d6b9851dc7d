package ownership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"weak"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi3"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// typeSchema is the structural schema of one kind: what server-side apply
// itself uses to merge it (list keys, sets, atomic lists, named types such
// as resource.Quantity).
type typeSchema struct {
	schema *smdschema.Schema
	root   smdschema.TypeRef
}

// builtin holds the structural schemas of the built-in kinds an operator
// compared, each cut from client-go's compiled-in schemas (no request, and
// the same schema the apiserver of this minor version uses).
var builtin struct {
	kinds sync.Map // schema.GroupVersionKind -> *typeSchema
	mu    sync.Mutex
	// conv parses the compiled-in schemas of every built-in kind: 0.8 MiB
	// of heap, needed only until the kinds in use are cut from it. It is
	// held weakly, so a GC after the first passes frees it; a kind first
	// compared later parses it again (about 0.1 s, once per kind at most).
	conv weak.Pointer[managedfields.TypeConverter]
}

func builtinSchema(gvk schema.GroupVersionKind) (*typeSchema, bool) {
	if ts, ok := builtin.kinds.Load(gvk); ok {
		return ts.(*typeSchema), true
	}
	if !clientgoscheme.Scheme.Recognizes(gvk) {
		return nil, false
	}
	builtin.mu.Lock()
	defer builtin.mu.Unlock()
	if ts, ok := builtin.kinds.Load(gvk); ok {
		return ts.(*typeSchema), true
	}
	conv := builtin.conv.Value()
	if conv == nil {
		c := applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
		conv = &c
		builtin.conv = weak.Make(conv)
	}
	ts, err := schemaOf(*conv, gvk)
	if err != nil {
		return nil, false
	}
	builtin.kinds.Store(gvk, ts)
	return ts, true
}

// schemaOf types an empty object of gvk to learn the kind's root type, and
// keeps only the named types reachable from it.
func schemaOf(conv managedfields.TypeConverter, gvk schema.GroupVersionKind) (*typeSchema, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	tv, err := conv.ObjectToTyped(u)
	if err != nil {
		return nil, err
	}
	return &typeSchema{schema: reachable(tv.Schema(), tv.TypeRef()), root: tv.TypeRef()}, nil
}

// reachable returns the part of s that root refers to, directly or not.
// A group version's schema holds every kind of the group (client-go's,
// every built-in kind: about 1 MiB once parsed); an operator compares a
// handful, and a Deployment reaches 123 of the 959 built-in types.
func reachable(s *smdschema.Schema, root smdschema.TypeRef) *smdschema.Schema {
	out := &smdschema.Schema{}
	seen := map[string]bool{}
	var ref func(smdschema.TypeRef)
	atom := func(a smdschema.Atom) {
		if a.Map != nil {
			for _, f := range a.Fields {
				ref(f.Type)
			}
			ref(a.Map.ElementType)
		}
		if a.List != nil {
			ref(a.List.ElementType)
		}
	}
	ref = func(tr smdschema.TypeRef) {
		if tr.NamedType == nil {
			atom(tr.Inlined)
			return
		}
		if seen[*tr.NamedType] {
			return
		}
		seen[*tr.NamedType] = true
		if td, ok := s.FindNamedType(*tr.NamedType); ok {
			out.Types = append(out.Types, td)
			atom(td.Atom)
		}
	}
	ref(root)
	return out
}

// SchemaCache finds the schema of a kind as the API server publishes it in
// its OpenAPI v3 document (a custom resource's is its CRD's, with the list
// and map markers that decide how server-side apply merges it), reads each
// kind's once, on first use, and keeps only the types it reaches; Apply
// needs it to compare lists by their keys, and looks for it in
// Applier.Schemas. Lookups of a kind already seen never wait; a fetch is
// shared by the lookups of its group version, bounded by Timeout, and a
// failed one is not retried for a minute (built-in kinds then use
// client-go's compiled-in schema). Safe for concurrent use; set Timeout
// before first use. docs/ownership.md, "Where the schema comes from".
type SchemaCache struct {
	// Timeout bounds one fetch of a group version's document (two
	// requests). Zero means DefaultSchemaTimeout.
	Timeout time.Duration

	client openapi.ClientWithContext
	kinds  sync.Map // schema.GroupVersionKind -> *typeSchema
	now    func() time.Time

	mu      sync.Mutex
	flights map[schema.GroupVersion]*flight
	failed  map[schema.GroupVersion]failure
}

// DefaultSchemaTimeout is how long a SchemaCache waits for a group version's
// OpenAPI v3 document unless SchemaCache.Timeout says otherwise. A healthy API
// server answers in well under a second, also for the largest group.
const DefaultSchemaTimeout = 10 * time.Second

// schemaRetryAfter is how long a failed fetch is remembered.
const schemaRetryAfter = time.Minute

// flight is one fetch of a group version's document, shared by the
// lookups waiting for it. Its fields are written before done is closed,
// waiters and abandoned under SchemaCache.mu.
type flight struct {
	done      chan struct{}
	conv      managedfields.TypeConverter
	err       error
	cancel    context.CancelFunc
	waiters   int
	abandoned bool
}

// failure is a failed fetch, remembered until a retry is due.
type failure struct {
	err   error
	until time.Time
}

// NewSchemaCache returns a SchemaCache that read the API server's OpenAPI v3
// documents through c, e.g.
// discovery.NewDiscoveryClientForConfigOrDie(cfg).OpenAPIV3(). Requests
// carry the caller's context when c supports it (client-go's does).
func NewSchemaCache(c openapi.Client) *SchemaCache {
	return &SchemaCache{
		client:  openapi.ToClientWithContext(c),
		now:     time.Now,
		flights: map[schema.GroupVersion]*flight{},
		failed:  map[schema.GroupVersion]failure{},
	}
}

// errNoSchema means neither client-go nor the API server knows the kind.
var errNoSchema = errors.New("no schema")

// lookup returns gvk's schema from the API server, fetching its group
// version's document unless the kind was seen before.
func (s *SchemaCache) lookup(ctx context.Context, gvk schema.GroupVersionKind) (*typeSchema, error) {
	if ts, ok := s.kinds.Load(gvk); ok {
		return ts.(*typeSchema), nil
	}
	gv := gvk.GroupVersion()
	f, err := s.join(gv)
	if err != nil {
		return nil, err
	}
	select {
	case <-f.done:
	case <-ctx.Done():
		s.leave(gv, f)
		return nil, fmt.Errorf("waiting for the OpenAPI v3 schema of %s: %w", gv, context.Cause(ctx))
	}
	if f.err != nil {
		return nil, f.err
	}
	ts, err := schemaOf(f.conv, gvk)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoSchema, err)
	}
	ts2, _ := s.kinds.LoadOrStore(gvk, ts)
	return ts2.(*typeSchema), nil
}

// join returns the fetch of gv's document under way, or starts one; or
// the error of a recent failed fetch.
func (s *SchemaCache) join(gv schema.GroupVersion) (*flight, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f, ok := s.flights[gv]; ok {
		f.waiters++
		return f, nil
	}
	if fl, ok := s.failed[gv]; ok && s.now().Before(fl.until) {
		return nil, fl.err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultSchemaTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	f := &flight{done: make(chan struct{}), cancel: cancel, waiters: 1}
	s.flights[gv] = f
	go s.run(ctx, gv, timeout, f)
	return f, nil
}

// leave is called by a waiter that gives up: the last one cancels the
// fetch, and a later lookup starts a new one.
func (s *SchemaCache) leave(gv schema.GroupVersion, f *flight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f.waiters--
	if f.waiters == 0 && s.flights[gv] == f {
		delete(s.flights, gv)
		f.abandoned = true
		f.cancel()
	}
}

// run fetches gv's document for flight f and records the outcome: a
// failure is remembered unless every waiter gave up (that is not the API
// server's doing) or the document lacks gv (a CRD not installed yet).
func (s *SchemaCache) run(ctx context.Context, gv schema.GroupVersion, timeout time.Duration, f *flight) {
	defer f.cancel()
	conv, err := s.fetch(ctx, gv)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("reading the OpenAPI v3 schema of %s: no answer within %s: %w", gv, timeout, err)
	}
	s.mu.Lock()
	f.conv, f.err = conv, err
	if s.flights[gv] == f {
		delete(s.flights, gv)
	}
	var missing *openapi3.GroupVersionNotFoundError
	switch {
	case err == nil:
		delete(s.failed, gv)
	case !f.abandoned && !errors.As(err, &missing):
		s.failed[gv] = failure{err: err, until: s.now().Add(schemaRetryAfter)}
	}
	s.mu.Unlock()
	close(f.done)
}

// fetch reads gv's OpenAPI v3 document: the root document names its URL.
func (s *SchemaCache) fetch(ctx context.Context, gv schema.GroupVersion) (managedfields.TypeConverter, error) {
	doc, err := openapi3.NewRoot(boundClient{ctx, s.client}).GVSpec(gv)
	var missing *openapi3.GroupVersionNotFoundError
	switch {
	case errors.As(err, &missing):
		return nil, fmt.Errorf("%w: %w", errNoSchema, err)
	case err != nil:
		return nil, fmt.Errorf("reading the OpenAPI v3 schema of %s: %w", gv, err)
	case doc.Components == nil:
		return nil, fmt.Errorf("%w: the OpenAPI v3 document of %s has no components", errNoSchema, gv)
	}
	conv, err := managedfields.NewTypeConverter(doc.Components.Schemas, false)
	if err != nil {
		return nil, fmt.Errorf("parsing the OpenAPI v3 schema of %s: %w", gv, err)
	}
	return conv, nil
}

// boundClient is an OpenAPI client whose requests carry ctx, for
// openapi3.Root, which takes no context.
type boundClient struct {
	ctx context.Context
	c   openapi.ClientWithContext
}

func (b boundClient) Paths() (map[string]openapi.GroupVersion, error) {
	paths, err := b.c.PathsWithContext(b.ctx)
	out := make(map[string]openapi.GroupVersion, len(paths))
	for k, p := range paths {
		out[k] = boundGroupVersion{b.ctx, p}
	}
	return out, err
}

type boundGroupVersion struct {
	ctx context.Context
	openapi.GroupVersionWithContext
}

func (g boundGroupVersion) Schema(contentType string) ([]byte, error) {
	return g.SchemaWithContext(g.ctx, contentType)
}

// schemaFor finds gvk's schema: the API server's through a.Schemas when it
// is set, client-go's compiled-in one for built-in kinds otherwise, or when
// the API server's cannot be read. It returns early, with ctx's error, when
// ctx is done.
func (a *Applier) schemaFor(ctx context.Context, gvk schema.GroupVersionKind) (*typeSchema, error) {
	if a.Schemas == nil {
		if ts, ok := builtinSchema(gvk); ok {
			return ts, nil
		}
		return nil, fmt.Errorf("%w for %s: it is not a built-in kind; set Applier.Schemas (ownership.NewSchemaCache) so that its CRD's schema can be read", errNoSchema, gvk)
	}
	ts, err := a.Schemas.lookup(ctx, gvk)
	if err != nil && ctx.Err() == nil {
		if bts, ok := builtinSchema(gvk); ok {
			return bts, nil
		}
	}
	return ts, err
}
