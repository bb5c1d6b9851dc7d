// Package reconcilertest is a test kit for operator authors: a client that
// counts API requests by verb and kind and can inject faults, and helpers
// that prove a reconciler is idempotent and converges.
//
// The two bugs it catches are the ones production finds first: a reconciler
// that writes on every pass (an update storm that grows with the number of
// objects, visible as mutating requests on a no-op resync), and a reconciler
// that wedges when the apiserver answers 409 Conflict, 500 or a timeout.
//
// Wrap the client your reconciler uses with [NewClient], let the object
// converge, then call [AssertIdempotent]; add a [Fault] to see the same
// reconciler converge through conflicts and server errors. [WithCacheLag]
// makes reads trail writes as a manager's informer cache does, so that a
// reconciler that trusts what it just wrote is caught on every run, not
// once under load.
package reconcilertest
