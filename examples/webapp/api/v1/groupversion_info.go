// Package v1 is the apps.example.com/v1 API of the WebApp example operator.
//
// +kubebuilder:object:generate=true
// +groupName=apps.example.com
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "apps.example.com", Version: "v1"}
	// SchemeBuilder registers this API's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds this API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
