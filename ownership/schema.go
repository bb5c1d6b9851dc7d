package ownership

import (
	"errors"
	"fmt"
	"sync"

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

// builtin holds client-go's compiled-in schemas of the built-in kinds: no
// request, and the same schema the apiserver of this minor version uses.
var builtin = struct {
	once  sync.Once
	conv  managedfields.TypeConverter
	kinds sync.Map // schema.GroupVersionKind -> *typeSchema
}{}

func builtinSchema(gvk schema.GroupVersionKind) (*typeSchema, bool) {
	if ts, ok := builtin.kinds.Load(gvk); ok {
		return ts.(*typeSchema), true
	}
	if !clientgoscheme.Scheme.Recognizes(gvk) {
		return nil, false
	}
	builtin.once.Do(func() { builtin.conv = applyconfigurations.NewTypeConverter(clientgoscheme.Scheme) })
	ts, err := schemaOf(builtin.conv, gvk)
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

// Schemas finds the schema of a kind as the API server publishes it in its
// OpenAPI v3 document: custom resources, whose schema is their CRD's (with
// the +listType, +listMapKey and +mapType markers that decide how
// server-side apply merges them), and built-in kinds, for which it is the
// cluster's own version of the schema client-go compiles in. Apply needs
// the schema to compare lists by their keys; Applier.Schemas is where it
// looks for one.
//
// Why not client-go's compiled-in schemas for built-in kinds: parsing them
// parses all 959 built-in types at once and client-go keeps the result for
// the life of the process, about 1 MiB of heap for the two or three kinds an
// operator owns. A kind's schema is read once, on first use, and only the
// types it reaches are kept. A kind the document does not hold (a CRD
// installed later) is looked up again on its next use. A CRD whose list
// keys change while the operator runs is compared by its old schema until
// the operator restarts (changing list keys is a breaking API change, rare
// by design). Reading the document needs no RBAC rule of its own: the
// default system:discovery role grants /openapi/* to every authenticated
// user. Safe for concurrent use; lookups of a kind already seen take no
// lock.
type Schemas struct {
	root openapi3.Root

	kinds sync.Map // schema.GroupVersionKind -> *typeSchema

	mu sync.Mutex // serializes fetches
}

// NewSchemas returns Schemas that read the API server's OpenAPI v3
// documents through c, e.g.
// discovery.NewDiscoveryClientForConfigOrDie(cfg).OpenAPIV3().
func NewSchemas(c openapi.Client) *Schemas {
	return &Schemas{root: openapi3.NewRoot(c)}
}

// errNoSchema means neither client-go nor the API server knows the kind.
var errNoSchema = errors.New("no schema")

func (s *Schemas) lookup(gvk schema.GroupVersionKind) (*typeSchema, error) {
	if ts, ok := s.kinds.Load(gvk); ok {
		return ts.(*typeSchema), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts, ok := s.kinds.Load(gvk); ok {
		return ts.(*typeSchema), nil
	}
	gv := gvk.GroupVersion()
	doc, err := s.root.GVSpec(gv)
	if err != nil {
		return nil, fmt.Errorf("reading the OpenAPI v3 schema of %s: %w", gv, err)
	}
	if doc.Components == nil {
		return nil, fmt.Errorf("%w: the OpenAPI v3 document of %s has no components", errNoSchema, gv)
	}
	conv, err := managedfields.NewTypeConverter(doc.Components.Schemas, false)
	if err != nil {
		return nil, fmt.Errorf("parsing the OpenAPI v3 schema of %s: %w", gv, err)
	}
	ts, err := schemaOf(conv, gvk)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoSchema, err)
	}
	s.kinds.Store(gvk, ts)
	return ts, nil
}

// schemaFor finds gvk's schema: the API server's through a.Schemas when it
// is set, client-go's compiled-in one for built-in kinds otherwise, or when
// the API server's cannot be read.
func (a *Applier) schemaFor(gvk schema.GroupVersionKind) (*typeSchema, error) {
	if a.Schemas == nil {
		if ts, ok := builtinSchema(gvk); ok {
			return ts, nil
		}
		return nil, fmt.Errorf("%w for %s: it is not a built-in kind; set Applier.Schemas (ownership.NewSchemas) so that its CRD's schema can be read", errNoSchema, gvk)
	}
	ts, err := a.Schemas.lookup(gvk)
	if err != nil {
		if bts, ok := builtinSchema(gvk); ok {
			// Kept: a document that cannot be read (forbidden, disabled)
			// would otherwise be fetched again on every Apply.
			a.Schemas.kinds.Store(gvk, bts)
			return bts, nil
		}
	}
	return ts, err
}
