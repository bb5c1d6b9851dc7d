package cachelag

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// read returns a deep copy of the version of key a read returns now, or nil.
func (l *Cache) read(k *lagKind, key types.NamespacedName) map[string]any {
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

// Get answers a Get of key into obj when obj's kind is lagged, through
// cl (the wrapped client: its scheme and RESTMapper name the kind), and
// reports handled; for other kinds it does nothing and handled is false.
// The answer is a deep copy of the newest readable version in obj's type
// (typed, unstructured or metav1.PartialObjectMetadata), or NotFound.
func (l *Cache) Get(ctx context.Context, cl client.Client, key client.ObjectKey, obj client.Object) (handled bool, err error) {
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

// List answers a List of a lagged kind into list, like [Cache.Get]: each
// object's readable version, filtered by namespace and label selector,
// sorted by namespace and name. A field selector, Limit or Continue, which
// it cannot evaluate, is an error.
func (l *Cache) List(ctx context.Context, cl client.Client, list client.ObjectList, opts ...client.ListOption) (handled bool, err error) {
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
		return true, fmt.Errorf("cachelag: cache lag for %s: List with a field selector (%s) is not supported", gvk.Kind, o.FieldSelector)
	case o.Limit > 0 || o.Continue != "":
		return true, fmt.Errorf("cachelag: cache lag for %s: List with Limit or Continue is not supported", gvk.Kind)
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
				return true, fmt.Errorf("cachelag: cache lag: %T is not a client.Object", typed)
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
