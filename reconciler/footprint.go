package reconciler

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// unboundedCacheInformers is CacheOptions' guard's metric, in
// controller-runtime's registry like the others (metrics.go).
var unboundedCacheInformers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "reconcilekit_unbounded_cache_informers",
	Help: "Informers that this process's guarded caches (reconciler.CacheOptions) started for a kind " +
		"with no namespace, label or field restriction: each holds every object of the kind in the cluster. By kind.",
}, []string{"kind"})

func init() {
	metrics.Registry.MustRegister(unboundedCacheInformers)
}

// footprintLog is where CacheOptions' guard warns: controller-runtime's
// logger, the one ctrl.SetLogger sets.
var footprintLog = logf.Log.WithName("cache-footprint")

// CacheOptions returns opts with the kit's three safeguards for a manager's
// cache. Pass it the manager's cache options, as the last change to them:
//
//	ctrl.Options{Cache: reconciler.CacheOptions(cache.Options{ByObject: ...})}
//
// First, informers that are current again a second after an API server
// outage: opts.NewInformer is NewInformer unless opts sets its own.
//
// Second, a guard against the usual cause of operator OOMs at scale: a
// cache that lists and watches every Secret or ConfigMap in the cluster,
// and so grows with the cluster rather than with what the operator
// manages. Whenever the cache creates an informer for one of guarded
// (default: core/v1 Secret and ConfigMap; they must be namespaced kinds
// that opts.Scheme, or client-go's scheme when it is nil, knows) that opts
// leave unbounded (no namespace restriction and no label or field
// selector, from ByObject[kind] and then the Default* options, as
// cache.New defaults them), the guard logs a warning naming the kind and
// how to bound it, and increments the gauge
// reconcilekit_unbounded_cache_informers{kind}. That happens when a
// controller first watches the kind, or when a read through the cached
// client first needs it. The fix is an entry in opts.ByObject with a Label
// selector or Namespaces, or reading the kind metadata-only
// (metav1.PartialObjectMetadata): a metadata-only informer holds a fraction
// of each object and is not warned about. The guard changes nothing the
// cache holds or does: it wraps opts.NewInformer and returns its informer
// as is. CacheOptions panics if a kind is not in the scheme, a programming
// error.
//
// Third, less memory per cached object: after the transform the options
// set for a kind (such as cache.TransformStripManagedFields), the strings
// each stored object repeats from others (metadata keys, label values,
// owners' kinds, finalizers, condition types and reasons, a built-in
// workload's pod template and a Service's spec) are interned, held once for the process; a
// container's resource limits and requests equal to another's share its
// map, and a Deployment's pod template labelled as the Deployment shares
// its labels. Values are unchanged, and what the cached client returns is
// a deep copy as before. A Deployment and Service pair, as the API server
// sends them, holds 30% less (BenchmarkInternedCache).
func CacheOptions(opts cache.Options, guarded ...client.Object) cache.Options {
	if opts.NewInformer == nil {
		opts.NewInformer = NewInformer
	}
	if !fastpath.Off(fastpath.Intern) { // switched off for the bench alone
		opts.NewInformer = interning(opts.NewInformer)
	}
	kinds := guarded
	if len(kinds) == 0 {
		kinds = []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}
	}
	scheme := opts.Scheme
	if scheme == nil {
		scheme = clientgoscheme.Scheme
	}
	unbounded := map[schema.GroupVersionKind]bool{}
	for _, k := range kinds {
		gvk, err := apiutil.GVKForObject(k, scheme)
		if err != nil {
			panic(fmt.Sprintf("reconciler: CacheOptions: %v (set opts.Scheme)", err))
		}
		// The series exists from the start, so that an alert on it sees 0
		// rather than no data.
		unboundedCacheInformers.WithLabelValues(gvk.GroupKind().String()).Add(0)
		if cachesWholeCluster(opts, scheme, gvk) {
			unbounded[gvk] = true
		}
	}
	if len(unbounded) == 0 {
		return opts
	}
	next := opts.NewInformer
	log := footprintLog
	opts.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if _, metadataOnly := obj.(*metav1.PartialObjectMetadata); !metadataOnly {
			if gvk, err := apiutil.GVKForObject(obj, scheme); err == nil && unbounded[gvk] {
				kind := gvk.GroupKind().String()
				log.Info("a cache holds every object of a kind in the cluster, the usual cause of operator OOMs at scale: "+
					"give the kind a Label selector or Namespaces in cache.Options.ByObject, or read it metadata-only (metav1.PartialObjectMetadata)",
					"kind", kind)
				unboundedCacheInformers.WithLabelValues(kind).Inc()
			}
		}
		return next(lw, obj, resync, indexers)
	}
	return opts
}

// cachesWholeCluster reports whether a cache built from opts lists and
// watches every object of the namespaced kind gvk: the informer that
// cache.New gives the kind has no namespace and no label or field selector.
// It follows cache.New's defaulting: ByObject[kind].Namespaces, or
// DefaultNamespaces when that is nil (an empty map means all namespaces);
// then each setting from the namespace's Config, ByObject[kind],
// DefaultNamespaces[namespace], and the Default* option, first set wins.
// Only the AllNamespaces entry ("") of a namespace map watches the whole
// cluster (less the namespaces listed next to it, which bounds nothing).
func cachesWholeCluster(opts cache.Options, scheme *runtime.Scheme, gvk schema.GroupVersionKind) bool {
	var byObject cache.ByObject
	for obj, b := range opts.ByObject {
		if got, err := apiutil.GVKForObject(obj, scheme); err == nil && got == gvk {
			byObject = b
		}
	}
	namespaces := byObject.Namespaces
	if namespaces == nil {
		namespaces = opts.DefaultNamespaces
	}
	settings := []cache.Config{{LabelSelector: byObject.Label, FieldSelector: byObject.Field}}
	if len(namespaces) > 0 {
		all, ok := namespaces[metav1.NamespaceAll]
		if !ok {
			return false
		}
		settings = []cache.Config{all, settings[0], opts.DefaultNamespaces[metav1.NamespaceAll]}
	}
	settings = append(settings, cache.Config{LabelSelector: opts.DefaultLabelSelector, FieldSelector: opts.DefaultFieldSelector})
	var label labels.Selector
	var field fields.Selector
	for _, c := range settings {
		if label == nil {
			label = c.LabelSelector
		}
		if field == nil {
			field = c.FieldSelector
		}
	}
	return (label == nil || label.Empty()) && (field == nil || field.Empty())
}
