// Package v2 is the apps.example.com/v2 API of the WebApp example operator:
// the storage version and the conversion hub (see Hub). apps.example.com/v1
// is still served and converts to and from it (api/v1/webapp_conversion.go).
//
// +kubebuilder:object:generate=true
// +groupName=apps.example.com
package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "apps.example.com", Version: "v2"}
	// SchemeBuilder registers this API's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// addKnownTypes registers the API's types (no controller-runtime dependency:
// API packages should be cheap to import).
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &WebApp{}, &WebAppList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
