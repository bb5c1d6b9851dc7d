package reconciler

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// UndeclaredKindError is the error of Scope.Apply, ApplyAndWait and Prune
// for a kind that Options.Owns does not list. The step's Retry outcome
// carrying it stalls the pass (Terminal, reason ReasonInvalidStep): the
// controller does not watch the kind, so the cached client would start a
// cluster-wide informer for it (which blocks without list/watch RBAC) and
// drift on the object would never start a pass. Declare the kind in
// Options.Owns.
type UndeclaredKindError struct {
	// Kind is the group and kind the step applied or pruned.
	Kind schema.GroupKind
	// Owns lists the kinds Options.Owns declares.
	Owns []schema.GroupKind
}

func (e *UndeclaredKindError) Error() string {
	declared := make([]string, 0, len(e.Owns))
	for _, gk := range e.Owns {
		declared = append(declared, gk.String())
	}
	list := "it is empty"
	if len(declared) > 0 {
		list = "it declares " + strings.Join(declared, ", ")
	}
	return fmt.Sprintf("%s is not in Options.Owns (%s): declare it there, so the controller watches what its steps write", e.Kind, list)
}

// ownedKinds is Options.Owns resolved against the scheme at New.
type ownedKinds []schema.GroupKind

// resolveOwns returns the group and kind of every object in owns, or an
// error naming the entry the scheme does not know.
func resolveOwns(owns []client.Object, scheme *runtime.Scheme) (ownedKinds, error) {
	out := make(ownedKinds, 0, len(owns))
	for i, o := range owns {
		if o == nil {
			return nil, fmt.Errorf("reconciler: Options.Owns[%d] is nil", i)
		}
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return nil, fmt.Errorf("reconciler: Options.Owns[%d] (%T): %w", i, o, err)
		}
		out = append(out, gvk.GroupKind())
	}
	return out, nil
}

// check returns an *UndeclaredKindError unless gk is declared.
func (k ownedKinds) check(gk schema.GroupKind) error {
	for _, d := range k {
		if d == gk {
			return nil
		}
	}
	return &UndeclaredKindError{Kind: gk, Owns: k}
}

// identify returns the kind and key that desired names, the namespace
// defaulted to owner's as Apply defaults it.
func identify(desired runtime.ApplyConfiguration, owner client.Object) (schema.GroupVersionKind, client.ObjectKey, error) {
	if v := reflect.ValueOf(desired); v.Kind() == reflect.Pointer && !v.IsNil() {
		if ac, ok := desired.(identified); ok {
			// client-go's and controller-gen's apply configurations say it
			// themselves, without a JSON round trip (a quarter of a
			// millisecond a pass in the profile).
			return identifyFrom(deref(ac.GetAPIVersion()), deref(ac.GetKind()), deref(ac.GetNamespace()), deref(ac.GetName()), desired, owner)
		}
	}
	var id struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	b, err := json.Marshal(desired)
	if err == nil {
		err = json.Unmarshal(b, &id)
	}
	if err != nil {
		return schema.GroupVersionKind{}, client.ObjectKey{}, fmt.Errorf("apply %T: %w", desired, err)
	}
	return identifyFrom(id.APIVersion, id.Kind, id.Metadata.Namespace, id.Metadata.Name, desired, owner)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// identified is what generated apply configurations say of themselves.
type identified interface {
	GetAPIVersion() *string
	GetKind() *string
	GetNamespace() *string
	GetName() *string
}

func identifyFrom(apiVersion, kind, namespace, name string, desired runtime.ApplyConfiguration, owner client.Object) (schema.GroupVersionKind, client.ObjectKey, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || kind == "" {
		return schema.GroupVersionKind{}, client.ObjectKey{}, fmt.Errorf("apply %T: apiVersion %q, kind %q: build desired with its constructor, e.g. appsv1ac.Deployment(name, namespace)", desired, apiVersion, kind)
	}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	if key.Namespace == "" {
		key.Namespace = owner.GetNamespace()
	}
	return gv.WithKind(kind), key, nil
}
