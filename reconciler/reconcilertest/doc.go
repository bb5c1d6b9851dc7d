// Package reconcilertest is a test kit for operator authors: a client that
// counts API requests by verb and kind and can inject faults, and helpers
// that prove a reconciler is idempotent and converges.
//
// Wrap the client your reconciler uses with [NewClient], let the object
// converge, then call [AssertIdempotent]; add a [Fault] to see the same
// reconciler converge through conflicts and server errors. [WithCacheLag]
// makes reads trail writes as a manager's informer cache does (package
// cachelag). docs/testing-kit.md says which bugs each one catches.
package reconcilertest
