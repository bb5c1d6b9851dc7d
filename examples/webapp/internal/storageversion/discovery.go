package storageversion

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"
)

// storesIn reports an error unless the apiserver says, in discovery, that
// it writes crd's objects in version: the CRD's new storage version takes
// effect in the apiserver's request handling shortly after the CRD update
// that the Migrator's watch reports, and an object written back before it
// would keep its old encoding while storedVersions is trimmed. Discovery's
// storageVersionHash follows the same switch. An apiserver that publishes
// no hash (the StorageVersionHash feature disabled) cannot be asked: no
// error.
func storesIn(d discovery.DiscoveryInterface, crd *apiextensionsv1.CustomResourceDefinition, version string) error {
	gv := crd.Spec.Group + "/" + version
	resources, err := d.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return fmt.Errorf("discovering %s: %w", gv, err)
	}
	for _, r := range resources.APIResources {
		if r.Name != crd.Spec.Names.Plural {
			continue
		}
		want := storageVersionHash(crd.Spec.Group, version, crd.Spec.Names.Kind)
		if r.StorageVersionHash != "" && r.StorageVersionHash != want {
			return fmt.Errorf("the apiserver does not store %s in %s yet (discovery's storageVersionHash is %s, not %s)",
				crd.Spec.Names.Plural, version, r.StorageVersionHash, want)
		}
		return nil
	}
	return fmt.Errorf("the apiserver does not serve %s in %s yet", crd.Spec.Names.Plural, gv)
}

// storageVersionHash is the apiserver's hash of a storage version, as
// k8s.io/apiserver/pkg/endpoints/discovery.StorageVersionHash computes it
// (that package would link the apiserver's request handling into the
// operator for these three lines).
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}
