package controller

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheOptions is what the manager's cache must hold for the controller,
// and no more, so that its memory grows with the WebApps, not with the
// cluster: the objects the operator creates (Deployments, Services and the
// route registry's shards, by the managed-by label; the shards and the
// legacy registry only in registryNamespace), without managedFields.
// Services the operator does not own are not in it: the database Services
// WebApps wait for are watched metadata-only in a cache of their own
// (Setup). A cache's per-object settings are keyed by kind (metadata-only
// reads of Services would get the label selector too), hence two caches.
func CacheOptions(registryNamespace string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{labelManaged: managedBy})
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}: {Label: managed},
			&corev1.Service{}:    {Label: managed},
			// A read returns the cached shard itself, not a deep copy of
			// its hundreds of entries on every pass: the registry code
			// only reads it (registryObject).
			&corev1.ConfigMap{}: {
				Namespaces:            map[string]cache.Config{registryNamespace: {}},
				Label:                 managed,
				UnsafeDisableDeepCopy: new(true),
			},
		},
	}
}

// databaseService is an empty metadata-only Service, the type the
// database cache holds.
func databaseService() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}}
}

// databaseCache holds every Service in the cluster as its name, namespace
// and resourceVersion only: what the database step and watch need to
// know that a WebApp's database Service exists. A manager runnable started
// with the manager's caches (GetCache), before the controllers.
type databaseCache struct {
	cache.Cache
}

// GetCache makes the manager start the cache with its own caches and wait
// for it to sync before starting the controllers.
func (c databaseCache) GetCache() cache.Cache { return c.Cache }

// newDatabaseCache builds the database Service cache on mgr's connection.
// It holds metadata-only Services and nothing else: a read of another type
// fails instead of starting an informer.
func newDatabaseCache(mgr ctrl.Manager) (databaseCache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      mgr.GetRESTMapper(),
		DefaultTransform:            keepIdentity(),
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return databaseCache{}, fmt.Errorf("creating the database Service cache: %w", err)
	}
	if _, err := c.GetInformer(context.Background(), databaseService()); err != nil {
		return databaseCache{}, fmt.Errorf("creating the database Service informer: %w", err)
	}
	return databaseCache{c}, nil
}

// keepIdentity keeps of a metadata-only Service what the database step
// and watch use, its name and namespace (and resourceVersion): labels,
// annotations (a kubectl last-applied-configuration can be kilobytes),
// owner references, UID and managedFields of Services the operator never
// looks at are dropped before they are stored. The type and the namespace
// strings are shared between objects, not one copy each.
func keepIdentity() toolscache.TransformFunc {
	var mu sync.Mutex
	namespaces := map[string]string{}
	return func(in any) (any, error) {
		m, ok := in.(*metav1.PartialObjectMetadata)
		if !ok {
			return in, nil
		}
		mu.Lock()
		ns, ok := namespaces[m.Namespace]
		if !ok {
			ns = m.Namespace
			namespaces[ns] = ns
		}
		mu.Unlock()
		out := databaseService()
		out.Name, out.Namespace, out.ResourceVersion = m.Name, ns, m.ResourceVersion
		return out, nil
	}
}
