// The kubebuilder external plugin reconcilekit/v1-alpha: kubebuilder runs it
// after go/v4 and it turns the scaffold's controller into reconcilekit steps.
// A module of its own, with no dependencies, so that the library's go.mod
// stays lean; it is versioned with the library (Version).
module github.com/reconcilekit/reconcilekit/kubebuilderplugin

go 1.26.0
