package cachelag

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kind returns the state of gvk, registering its informer handler on first
// use, or nil if gvk is not lagged.
func (l *Cache) kind(ctx context.Context, cl client.Client, gvk schema.GroupVersionKind) (*lagKind, error) {
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
			k.err = fmt.Errorf("cachelag: cache lag for %s: %w", gvk.Kind, err)
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
func (l *Cache) register(ctx context.Context, cl client.Client, k *lagKind) error {
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
	l *Cache
	k *lagKind
}

// OnAdd records an added object. An object in the informer's initial list
// was in the cache before the Cache looked: it counts as observed long ago,
// so a Delay does not hide objects that exist when a kind is first used.
func (h lagHandler) OnAdd(obj any, initial bool) { h.l.observe(h.k, obj, false, initial) }

func (h lagHandler) OnUpdate(_, obj any) { h.l.observe(h.k, obj, false, false) }
func (h lagHandler) OnDelete(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	h.l.observe(h.k, obj, true, false)
}
