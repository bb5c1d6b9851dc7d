// Package v1alpha1 is the cache.example.com/v1alpha1 API: the Cache kind.
// +kubebuilder:object:generate=true
// +groupName=cache.example.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AddToScheme adds the Cache kind (cache.example.com/v1alpha1) to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	gv := schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}
	s.AddKnownTypes(gv, &Cache{}, &CacheList{})
	metav1.AddToGroupVersion(s, gv)
	return nil
}

// Cache runs memcached: a Deployment of the Cache's name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Cache struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Status            CacheStatus `json:"status,omitempty,omitzero"`
}

// CacheStatus is the observed state of a Cache, which the reconciler writes.
type CacheStatus struct {
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// GetConditions and SetConditions give the reconciler the Cache's conditions.
func (c *Cache) GetConditions() []metav1.Condition      { return c.Status.Conditions }
func (c *Cache) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// CacheList is a list of Caches.
// +kubebuilder:object:root=true
type CacheList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cache `json:"items"`
}
