// +kubebuilder:ac:generate=true

package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// GadgetSpec is shaped like many hand-written CRD types, to test what the
// ownership package applies: fields without pointers or omitempty, a keyed
// list, a set and a quantity.
type GadgetSpec struct {
	// Enabled is a plain bool without omitempty: a typed GadgetSpec cannot
	// say "not set", so a typed apply would send false.
	// +optional
	Enabled bool `json:"enabled"`
	// Replicas is a plain int32 without omitempty, for the same reason.
	// +optional
	Replicas int32 `json:"replicas"`
	// Ports are keyed by port and protocol, like a Service's.
	// +listType=map
	// +listMapKey=port
	// +listMapKey=protocol
	// +optional
	Ports []GadgetPort `json:"ports,omitempty"`
	// Tags is a set.
	// +listType=set
	// +optional
	Tags []string `json:"tags,omitempty"`
	// Size is a quantity; custom resources store it as sent.
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
}

// GadgetPort is one port of a Gadget.
type GadgetPort struct {
	// Port is the port number.
	// +required
	Port int32 `json:"port"`
	// Protocol defaults to TCP.
	// +kubebuilder:default=TCP
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// Name names the port.
	// +optional
	Name string `json:"name,omitempty"`
}

// Gadget is a test-only namespaced resource that tests own (apply) rather
// than reconcile.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the Gadget's desired state.
	// +optional
	Spec GadgetSpec `json:"spec,omitempty"`
}

// GadgetList is a list of Gadgets.
//
// +kubebuilder:object:root=true
type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &Gadget{}, &GadgetList{})
		return nil
	})
}
