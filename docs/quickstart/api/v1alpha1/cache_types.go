// Package v1alpha1 is the cache.example.com/v1alpha1 API: the Cache kind.
// +kubebuilder:object:generate=true
// +groupName=cache.example.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of this API.
var GroupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}

// AddToScheme adds this API's types to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Cache{}, &CacheList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Cache runs memcached: a Deployment of the Cache's name.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
type Cache struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CacheSpec   `json:"spec,omitempty"`
	Status            CacheStatus `json:"status,omitempty,omitzero"`
}

// CacheSpec is the desired state of a Cache.
type CacheSpec struct {
	// replicas is the number of memcached pods, 1 to 10.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
}

// CacheStatus is the observed state of a Cache: its conditions (Ready,
// Reconciling, Stalled, Available) and the generation they are for.
type CacheStatus struct {
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// GetConditions returns the Cache's conditions.
func (c *Cache) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the Cache's conditions.
func (c *Cache) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// CacheList is a list of Caches.
// +kubebuilder:object:root=true
type CacheList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cache `json:"items"`
}
