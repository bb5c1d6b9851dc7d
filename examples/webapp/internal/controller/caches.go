package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/reconciler"
)

// CacheOptions is what the manager's cache must hold for the controller,
// and no more, so that its memory grows with the WebApps, not with the
// cluster: the objects the operator creates (Deployments, Services and the
// route registry's shards, by the managed-by label; the shards and the
// legacy registry only in registryNamespace), without managedFields.
// Services the operator does not own are not in it: the database Services
// WebApps wait for are watched metadata-only in a cache of their own
// (reconciler.WaitFor: a cache's per-object settings are keyed by kind, so
// metadata-only reads of Services would get the label selector too).
// reconciler.CacheOptions adds informers that are current again a second
// after an API server outage, and warns if a change ever makes the cache
// hold every Secret or ConfigMap in the cluster.
func CacheOptions(registryNamespace string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{labelManaged: managedBy})
	return reconciler.CacheOptions(cache.Options{
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
	})
}
