package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a Cache. Ready (package conditions) is True when both
// are True; Reconciling and Stalled follow kstatus.
const (
	// ConfigValid says whether the spec can be turned into a Deployment.
	ConfigValid = "ConfigValid"
	// Available says whether every replica of the current spec is available.
	Available = "Available"
)

// CacheSpec is the desired state of a Cache. Every field has a default, so
// an empty spec is a valid Cache.
// +kubebuilder:validation:MinProperties=0
type CacheSpec struct {
	// image is the memcached image. It must carry a tag or a digest.
	// +default="memcached:1.6.38"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s@]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$`
	// +optional
	Image *string `json:"image,omitempty"`

	// replicas is the number of memcached pods, 1 to 10.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// memory is the cache size of each pod: a whole number of mebibytes,
	// at least 16Mi (for example 64Mi or 1Gi). The pod's memory request and
	// limit add 32Mi for memcached itself.
	// +default="64Mi"
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// CacheStatus is the observed state of a Cache.
type CacheStatus struct {
	// conditions are Ready, Reconciling, Stalled, ConfigValid and
	// Available, one of each type.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// readyReplicas is the number of ready memcached pods.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`
	// observedGeneration is the generation this status was computed for.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
}

// Cache runs memcached: a Deployment and a Service of the Cache's name.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type Cache struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the Cache. Every field has a default, so
	// a Cache without a spec gets one.
	// +default={}
	// +optional
	Spec CacheSpec `json:"spec,omitempty,omitzero"`
	// status is the observed state of the Cache, written by the operator.
	// +optional
	Status CacheStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the Cache's conditions (conditions.Getter).
func (c *Cache) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the Cache's conditions (conditions.Setter).
func (c *Cache) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// CacheList is a list of Caches.
//
// +kubebuilder:object:root=true
type CacheList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cache `json:"items"`
}
