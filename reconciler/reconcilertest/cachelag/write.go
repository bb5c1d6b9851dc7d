package cachelag

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Write runs do, a write of obj (a client.Object or an apply configuration)
// through cl, registering the kind's informer handler first and, for a
// lagged kind and when record is set, recording the answer do left in obj
// as a version. Pass record false for dry runs and for writes whose answer
// is a subresource body.
func (l *Cache) Write(ctx context.Context, cl client.Client, obj any, record bool, do func() error) error {
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
