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

// schemaOf types an empty object of gvk to learn the kind's root type.
func schemaOf(conv managedfields.TypeConverter, gvk schema.GroupVersionKind) (*typeSchema, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	tv, err := conv.ObjectToTyped(u)
	if err != nil {
		return nil, err
	}
	return &typeSchema{schema: tv.Schema(), root: tv.TypeRef()}, nil
}

// Schemas finds the schema of kinds client-go does not compile in: custom
// resources, whose schema is their CRD's, as the API server publishes it in
// its OpenAPI v3 document (with the +listType, +listMapKey and
// +mapType markers that decide how server-side apply merges them). Apply
// needs the schema to compare lists by their keys; Applier.Schemas is where
// it looks for one.
//
// A group version's document is fetched on first use and kept; it is
// fetched again when it does not hold a kind Apply asks for (a CRD installed
// later). A CRD whose list keys change while the operator runs is compared
// by its old schema until the operator restarts (changing list keys is a
// breaking API change, rare by design). Reading the document needs no RBAC
// rule of its own: the default system:discovery role grants /openapi/* to
// every authenticated user. Safe for concurrent use; lookups of a kind
// already seen take no lock.
type Schemas struct {
	root openapi3.Root

	kinds sync.Map // schema.GroupVersionKind -> *typeSchema

	mu   sync.Mutex // serializes fetches
	byGV map[schema.GroupVersion]managedfields.TypeConverter
}

// NewSchemas returns Schemas that read the API server's OpenAPI v3
// documents through c, e.g.
// discovery.NewDiscoveryClientForConfigOrDie(cfg).OpenAPIV3().
func NewSchemas(c openapi.Client) *Schemas {
	return &Schemas{root: openapi3.NewRoot(c), byGV: map[schema.GroupVersion]managedfields.TypeConverter{}}
}

// errNoSchema means neither client-go nor the API server knows the kind.
var errNoSchema = errors.New("no schema")

func (s *Schemas) lookup(gvk schema.GroupVersionKind) (*typeSchema, error) {
	if ts, ok := s.kinds.Load(gvk); ok {
		return ts.(*typeSchema), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gv := gvk.GroupVersion()
	if conv, ok := s.byGV[gv]; ok {
		if ts, err := schemaOf(conv, gvk); err == nil {
			s.kinds.Store(gvk, ts)
			return ts, nil
		}
	}
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
	s.byGV[gv] = conv
	ts, err := schemaOf(conv, gvk)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoSchema, err)
	}
	s.kinds.Store(gvk, ts)
	return ts, nil
}

// schemaFor finds gvk's schema: client-go's for built-in kinds, else the
// API server's through a.Schemas.
func (a *Applier) schemaFor(gvk schema.GroupVersionKind) (*typeSchema, error) {
	if ts, ok := builtinSchema(gvk); ok {
		return ts, nil
	}
	if a.Schemas == nil {
		return nil, fmt.Errorf("%w for %s: it is not a built-in kind; set Applier.Schemas (ownership.NewSchemas) so that its CRD's schema can be read", errNoSchema, gvk)
	}
	return a.Schemas.lookup(gvk)
}
