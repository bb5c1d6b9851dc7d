// Package storageversion migrates a CRD's stored objects to its storage
// version and then trims status.storedVersions, as the Kubernetes
// documentation describes for a CRD whose storage version changed
// ("Upgrade existing objects to a new stored version"): read and write back
// every object unchanged, then remove the old versions from
// status.storedVersions. It is the kube-storage-version-migrator's job done
// by the operator that owns the CRD, for that one CRD.
//
// Why the write is enough: the apiserver persists an update whose encoding
// differs from what etcd holds, and an object stored as v1 is encoded
// differently as v2, so an empty patch rewrites it in the storage version.
// An object already stored in the storage version encodes to the same bytes
// and is not written at all (its resourceVersion does not change), so a
// migration that is repeated costs reads only.
package storageversion

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Migrator rewrites every object of one CRD in the CRD's storage version,
// then sets status.storedVersions to that version alone. SetupWithManager
// runs it as a controller of the CRD: whenever the CRD changes (a new
// storage version, a version added to storedVersions), at start and after a
// change of leader. Migrate runs one migration.
//
// Guarantees:
//   - A CRD upgraded while the operator runs is migrated without a restart:
//     the watch on the CRD triggers a migration as soon as storedVersions
//     holds a version other than the storage version.
//   - status.storedVersions is trimmed only after every object listed has
//     been written back without error; a failure leaves it as it was (and
//     the controller retries with backoff). Objects created meanwhile are
//     stored in the storage version already.
//   - The trim is an optimistic-lock patch of the CRD's status: if the CRD
//     changed meanwhile (another version added, storage moved), it fails
//     with a conflict and the whole migration is redone.
//   - Nothing is written when storedVersions already is the storage version
//     alone, and Result counts only the objects the apiserver really
//     rewrote (their resourceVersion moved).
//
// Caveats:
//   - Reading an object stored in another version needs the CRD's
//     conversion (the operator's own conversion webhook): until it answers,
//     Migrate fails and the controller retries.
//   - Every object must be admitted unchanged: a validating webhook on the
//     custom resource must ratchet updates (webhookkit.Ratchet), or one
//     object that today's rules refuse keeps storedVersions untrimmed (the
//     controller retries it, logging the refusal).
//   - Objects are written back only once the apiserver publishes the
//     storage version in discovery (its storageVersionHash), as the
//     kube-storage-version-migrator waits for it; until then Migrate fails
//     and the controller retries. With several apiservers, the one asked
//     may not be the one that writes: one that has not yet seen the new
//     storage version could still write the old one between the rewrite
//     and the trim; the kube-storage-version-migrator has the same window.
//   - RBAC: get, list and watch on the CRD and patch on
//     customresourcedefinitions/status (all may be limited to the CRD by
//     resourceNames: the watch asks for the one CRD by metadata.name), list
//     and patch on the custom resource.
type Migrator struct {
	// Client patches the objects and the CRD's status.
	Client client.Client
	// Reader reads the CRD and lists the objects from the apiserver (a
	// manager's APIReader: the cache may hold neither).
	Reader client.Reader
	// Discovery asks the apiserver whether it writes the objects in the
	// storage version yet, before they are written back. SetupWithManager
	// sets it from the manager when nil.
	Discovery discovery.DiscoveryInterface
	// CRD is the CustomResourceDefinition's name, for example
	// webapps.apps.example.com.
	CRD string
	// Log receives one line per migration that trimmed storedVersions,
	// with the number of objects rewritten.
	Log logr.Logger
	// Backoff is the first wait after a failed migration, doubled up to a
	// minute. Default 1s.
	Backoff time.Duration

	// rewritten counts Reconcile's rewrites since the last trim.
	rewritten int
}

// SetupWithManager adds the migration to mgr as a leader-elected controller
// named storage-version-migration, which watches the CRD in a cache of its
// own holding that one CRD's metadata (a watch with the field selector
// metadata.name=CRD, which RBAC limited by resourceNames allows). Each
// event runs Migrate; a failed migration is retried with Backoff.
func (m *Migrator) SetupWithManager(mgr ctrl.Manager) error {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:                  mgr.GetHTTPClient(),
		Scheme:                      mgr.GetScheme(),
		Mapper:                      mgr.GetRESTMapper(),
		DefaultFieldSelector:        fields.OneTermEqualSelector("metadata.name", m.CRD),
		DefaultTransform:            cache.TransformStripManagedFields(),
		ReaderFailOnMissingInformer: true,
	})
	if err != nil {
		return fmt.Errorf("creating the cache of CRD %s: %w", m.CRD, err)
	}
	if err := mgr.Add(crdCache{c}); err != nil {
		return err
	}
	if m.Discovery == nil {
		if m.Discovery, err = discovery.NewDiscoveryClientForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient()); err != nil {
			return fmt.Errorf("creating a discovery client: %w", err)
		}
	}
	backoff := m.Backoff
	if backoff <= 0 {
		backoff = time.Second
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("storage-version-migration").
		WatchesRawSource(source.Kind(c, crd, &handler.TypedEnqueueRequestForObject[*metav1.PartialObjectMetadata]{})).
		WithOptions(controller.Options{
			RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](backoff, time.Minute),
		}).
		Complete(m)
}

// crdCache makes the manager start the CRD's cache with its own caches,
// before the controllers, and wait for it to sync.
type crdCache struct{ cache.Cache }

// GetCache returns the cache itself.
func (c crdCache) GetCache() cache.Cache { return c.Cache }

// Reconcile runs Migrate; its error makes the controller retry with
// backoff. The line logged after a trim counts the objects rewritten by
// every attempt since the previous trim: a retry does not rewrite again
// what a failed attempt already rewrote. The controller never runs it
// concurrently (its queue holds one key).
func (m *Migrator) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	res, err := m.Migrate(ctx)
	m.rewritten += res.Rewritten
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(res.Trimmed) > 0 {
		m.Log.Info("Migrated stored objects to the storage version", "crd", m.CRD,
			"storageVersion", res.StorageVersion, "rewritten", m.rewritten, "trimmed", res.Trimmed)
		m.rewritten = 0
	}
	return reconcile.Result{}, nil
}

// Result says what a migration did.
type Result struct {
	// StorageVersion is the CRD's storage version.
	StorageVersion string
	// Rewritten is how many objects the apiserver wrote back (their
	// resourceVersion moved): objects stored in another version. Objects
	// already stored in the storage version, and objects deleted before
	// their turn, are not counted.
	Rewritten int
	// Trimmed are the versions removed from status.storedVersions.
	Trimmed []string
}

// Migrate runs one migration: nothing when status.storedVersions is
// already the storage version alone, otherwise every object written back
// and storedVersions trimmed.
func (m *Migrator) Migrate(ctx context.Context) (Result, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := m.Reader.Get(ctx, types.NamespacedName{Name: m.CRD}, crd); err != nil {
		return Result{}, fmt.Errorf("reading CRD %s: %w", m.CRD, err)
	}
	res := Result{}
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			res.StorageVersion = v.Name
		}
	}
	if res.StorageVersion == "" {
		return res, fmt.Errorf("CRD %s has no storage version", m.CRD)
	}
	stored := crd.Status.StoredVersions
	if len(stored) == 1 && stored[0] == res.StorageVersion {
		return res, nil
	}
	if m.Discovery == nil {
		return res, fmt.Errorf("migrating CRD %s: Migrator.Discovery is not set", m.CRD)
	}
	if err := storesIn(m.Discovery, crd, res.StorageVersion); err != nil {
		return res, fmt.Errorf("migrating CRD %s: %w", m.CRD, err)
	}

	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: res.StorageVersion, Kind: crd.Spec.Names.ListKind}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk)
	empty := client.RawPatch(types.MergePatchType, []byte("{}"))
	for {
		if err := m.Reader.List(ctx, list, client.Limit(500), client.Continue(list.Continue)); err != nil {
			return res, fmt.Errorf("listing %s: %w", crd.Spec.Names.Plural, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			obj.SetGroupVersionKind(gvk.GroupVersion().WithKind(crd.Spec.Names.Kind))
			rv := obj.ResourceVersion
			err := m.Client.Patch(ctx, obj, empty)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return res, fmt.Errorf("rewriting %s %s/%s in %s: %w", crd.Spec.Names.Kind, obj.Namespace, obj.Name, res.StorageVersion, err)
			case obj.ResourceVersion != rv:
				res.Rewritten++
			}
		}
		if list.Continue == "" {
			break
		}
	}

	before := crd.DeepCopy()
	crd.Status.StoredVersions = []string{res.StorageVersion}
	if err := m.Client.Status().Patch(ctx, crd, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return res, fmt.Errorf("trimming status.storedVersions of CRD %s to [%s]: %w", m.CRD, res.StorageVersion, err)
	}
	for _, v := range stored {
		if v != res.StorageVersion && !slices.Contains(res.Trimmed, v) {
			res.Trimmed = append(res.Trimmed, v)
		}
	}
	return res, nil
}
