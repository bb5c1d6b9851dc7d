package v2

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a WebApp. Ready (from the conditions package) is True
// when DatabaseReady and Available are both True; Reconciling and Stalled
// follow kstatus.
const (
	// DatabaseReady says whether the Service named by
	// spec.database.serviceName exists.
	DatabaseReady = "DatabaseReady"
	// Available says whether every replica of the current spec is ready.
	Available = "Available"
)

// WebAppSpec is the desired state of a WebApp.
//
// What changed from apps.example.com/v1: spec.dbRef (a Service name) became
// spec.database (an object naming the Service), and spec.resources
// ({cpu, memory}, used as both request and limit) became requests and
// limits that may differ.
type WebAppSpec struct {
	// Image is required and still omitempty: the mutating webhook patches
	// the request to this type's encoding, so without omitempty a missing
	// image would come back as "" and pass the schema's required check.

	// image is the container image to run. It must carry a tag or a digest
	// (for example registry.example.com/web:v2.1.0 or web@sha256:...), so a
	// rollout is always to a known version; "latest" is allowed but warned
	// about.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^\s@]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$`
	Image string `json:"image,omitempty"`

	// replicas is the number of pods to run, 1 to 100. Defaults to 1. It is
	// also the scale subresource's spec, so `kubectl scale webapp` and a
	// HorizontalPodAutoscaler change it.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +default=1
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// database is the app's database: a Service in the same namespace (as a
	// database operator creates for its cluster). The WebApp waits, with
	// DatabaseReady=False, until that Service exists, and its pods get
	// DATABASE_HOST set to the Service's cluster DNS name.
	// +optional
	Database *DatabaseReference `json:"database,omitempty"`

	// resources are the CPU and memory each pod requests and is limited to.
	// Requests default to 500m CPU and 256Mi memory; a limit left unset is
	// the request (Guaranteed QoS unless limits are raised above requests).
	// +optional
	Resources *ResourceRequirements `json:"resources,omitempty"`
}

// DatabaseReference names the Service in front of a WebApp's database.
type DatabaseReference struct {
	// serviceName is the name of the database's Service, in the WebApp's
	// namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	ServiceName string `json:"serviceName,omitempty"`
}

// ResourceRequirements are what a WebApp's container requests and is limited
// to. An empty object is refused: omit it instead.
// +kubebuilder:validation:MinProperties=1
type ResourceRequirements struct {
	// requests are the CPU and memory the scheduler reserves for each pod.
	// An unset one defaults to 500m CPU or 256Mi memory.
	// +optional
	Requests *ContainerResources `json:"requests,omitempty"`
	// limits are the most CPU and memory each pod may use; each must be at
	// least its request. An unset one is the request.
	// +optional
	Limits *ContainerResources `json:"limits,omitempty"`
}

// ContainerResources are an amount of CPU and memory. An empty object is
// refused: omit it instead.
// +kubebuilder:validation:MinProperties=1
type ContainerResources struct {
	// cpu in cores, for example 500m or 2.
	// +optional
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// memory in bytes, for example 256Mi or 1Gi.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// IsReady reports whether the status says Ready.
func (s *WebAppStatus) IsReady() bool { return s.Ready != nil && *s.Ready }

// WebAppStatus is the observed state of a WebApp (the same in v1 and v2).
type WebAppStatus struct {
	// conditions are Ready, Reconciling, Stalled (kstatus), DatabaseReady
	// and Available, one of each type.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ready mirrors the Ready condition, for the printer column: true or
	// false once the WebApp has been reconciled, absent before.
	// +optional
	Ready *bool `json:"ready,omitempty"`
	// replicas is the number of pods of the Deployment (the scale
	// subresource's status).
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// readyReplicas is the number of ready pods.
	// +optional
	ReadyReplicas *int32 `json:"readyReplicas,omitempty"`
	// message is a one-line human summary, for example
	// "Waiting for 2/3 replicas": the Ready condition's message (at most
	// 32768 characters), with a short prefix when Ready.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=33024
	// +optional
	Message *string `json:"message,omitempty"`
	// selector is the label selector of the pods, in string form, for the
	// scale subresource (and so for HorizontalPodAutoscalers).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	Selector *string `json:"selector,omitempty"`
	// observedGeneration is the generation this status was computed for.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
}

// WebApp runs a stateless web application: a Deployment and a Service,
// optionally wired to a database.
//
// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=wa
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:printcolumn:name="Ready",type="boolean",JSONPath=".status.ready"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Image",type="string",JSONPath=".spec.image"
// +kubebuilder:printcolumn:name="Database",type="string",JSONPath=".spec.database.serviceName",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type WebApp struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state of the WebApp.
	// +required
	Spec WebAppSpec `json:"spec,omitzero"`
	// status is the observed state of the WebApp, written by the operator.
	// +optional
	Status WebAppStatus `json:"status,omitempty,omitzero"`
}

// Hub marks v2 as the conversion hub: every other version converts to and
// from it (sigs.k8s.io/controller-runtime/pkg/conversion.Hub).
func (*WebApp) Hub() {}

// GetConditions returns the WebApp's conditions (conditions.Getter).
func (w *WebApp) GetConditions() []metav1.Condition { return w.Status.Conditions }

// SetConditions replaces the WebApp's conditions (conditions.Setter).
func (w *WebApp) SetConditions(c []metav1.Condition) { w.Status.Conditions = c }

// WebAppList is a list of WebApps.
//
// +kubebuilder:object:root=true
type WebAppList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebApp `json:"items"`
}
