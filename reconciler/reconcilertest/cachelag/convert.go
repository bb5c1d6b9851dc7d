package cachelag

import (
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
		return nil, fmt.Errorf("cachelag: cache lag: unexpected %T", obj)
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
		return errors.New("cachelag: cache lag: reading into a non-pointer")
	}
	v.Elem().Set(reflect.Zero(v.Elem().Type()))
	return runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj)
}
