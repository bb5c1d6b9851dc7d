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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Migrator rewrites every object of one CRD in the CRD's storage version,
// then sets status.storedVersions to that version alone. Add it to a
// manager (it is a leader-elected Runnable) or call Migrate.
//
// Guarantees:
//   - status.storedVersions is trimmed only after every object listed has
//     been written back without error; a failure leaves it as it was (and
//     Start retries with backoff). Objects created meanwhile are stored in
//     the storage version already.
//   - The trim is an optimistic-lock patch of the CRD's status: if the CRD
//     changed meanwhile (another version added, storage moved), it fails
//     with a conflict and the whole migration is redone.
//   - Nothing is written when storedVersions already is the storage version
//     alone.
//
// Caveats:
//   - Reading an object stored in another version needs the CRD's
//     conversion (the operator's own conversion webhook): until it answers,
//     Migrate fails and Start retries.
//   - With several apiservers, one that has not yet seen the new storage
//     version could still write the old one between the rewrite and the
//     trim; the kube-storage-version-migrator has the same window. Run the
//     migration after the CRD upgrade has reached every apiserver.
//   - RBAC: get on the CRD, patch on customresourcedefinitions/status (both
//     may be limited to the CRD by resourceNames), list and patch on the
//     custom resource.
type Migrator struct {
	// Client patches the objects and the CRD's status.
	Client client.Client
	// Reader reads the CRD and lists the objects from the apiserver (a
	// manager's APIReader: the cache may hold neither).
	Reader client.Reader
	// CRD is the CustomResourceDefinition's name, for example
	// webapps.apps.example.com.
	CRD string
	// Log receives one line per migration that wrote something.
	Log logr.Logger
	// Backoff is the first wait after a failed attempt in Start, doubled
	// up to a minute. Default 1s.
	Backoff time.Duration
}

var _ manager.LeaderElectionRunnable = &Migrator{}

// NeedLeaderElection is true: one replica migrates.
func (*Migrator) NeedLeaderElection() bool { return true }

// Start migrates, retrying with backoff until it succeeds or ctx ends; it
// then returns nil (the manager keeps running).
func (m *Migrator) Start(ctx context.Context) error {
	wait := m.Backoff
	if wait <= 0 {
		wait = time.Second
	}
	for {
		res, err := m.Migrate(ctx)
		if err == nil {
			if len(res.Trimmed) > 0 {
				m.Log.Info("Migrated stored objects to the storage version", "crd", m.CRD,
					"storageVersion", res.StorageVersion, "objects", res.Objects, "trimmed", res.Trimmed)
			}
			return nil
		}
		if ctx.Err() != nil {
			return nil //nolint:nilerr // stopping is not a failure of the migration
		}
		m.Log.Error(err, "Migrating stored objects; retrying", "crd", m.CRD, "after", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// Result says what a migration did.
type Result struct {
	// StorageVersion is the CRD's storage version.
	StorageVersion string
	// Objects is how many objects were written back (0 when there was
	// nothing to migrate).
	Objects int
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
			if err := m.Client.Patch(ctx, obj, empty); err != nil && !apierrors.IsNotFound(err) {
				return res, fmt.Errorf("rewriting %s %s/%s in %s: %w", crd.Spec.Names.Kind, obj.Namespace, obj.Name, res.StorageVersion, err)
			}
			res.Objects++
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
