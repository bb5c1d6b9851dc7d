package v1

// SchemeGroupVersion is GroupVersion under the name the code generators
// (controller-gen's applyconfiguration) refer to.
var SchemeGroupVersion = GroupVersion
