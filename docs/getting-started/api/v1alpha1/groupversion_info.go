// Package v1alpha1 is the cache.example.com/v1alpha1 API: the Cache kind.
//
// +kubebuilder:object:generate=true
// +groupName=cache.example.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}
	// SchemeBuilder registers this API's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the types. An API package that does not import
// controller-runtime stays cheap to import for clients of the API.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Cache{}, &CacheList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
