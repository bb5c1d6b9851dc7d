// Package v1 holds Widget, a small test-only custom resource used by the
// library's envtest suites. It is never installed outside tests.
//
// +kubebuilder:object:generate=true
// +groupName=test.reconcilekit.io
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of Widget.
var GroupVersion = schema.GroupVersion{Group: "test.reconcilekit.io", Version: "v1"}

var (
	// SchemeBuilder registers Widget with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds Widget to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// WidgetSpec is the desired state of a Widget: absent, or at least one
// field.
// +kubebuilder:validation:MinProperties=1
type WidgetSpec struct {
	// size is an arbitrary positive number tests change to bump the
	// generation.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Size int32 `json:"size,omitempty"`
	// color is an arbitrary string tests change concurrently with the kit.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Color string `json:"color,omitempty"`
}

// WidgetStatus is the observed state of a Widget.
// +kubebuilder:validation:MinProperties=1
type WidgetStatus struct {
	// conditions are the Widget's status conditions, one of each type.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// note is a free-form field a second writer can set, to prove the kit
	// does not lose another writer's status fields.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Note string `json:"note,omitempty"`
}

// Widget is a test-only namespaced resource with a status subresource.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Widget struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the Widget.
	// +optional
	Spec WidgetSpec `json:"spec,omitempty,omitzero"`
	// status is the observed state of the Widget.
	// +optional
	Status WidgetStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the Widget's conditions.
func (w *Widget) GetConditions() []metav1.Condition { return w.Status.Conditions }

// SetConditions replaces the Widget's conditions.
func (w *Widget) SetConditions(c []metav1.Condition) { w.Status.Conditions = c }

// WidgetList is a list of Widgets.
//
// +kubebuilder:object:root=true
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

var _ runtime.Object = &Widget{}

// addKnownTypes registers the API's types (no controller-runtime dependency:
// API packages should be cheap to import).
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
