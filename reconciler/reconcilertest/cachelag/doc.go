// Package cachelag simulates a lagging informer cache for tests: a [Cache]
// answers reads of the kinds named by a [Lag] from a history of the versions
// it has observed (the answers to writes, and the informer's events), held
// back by a number of versions or by a delay, so a reconciler that trusts
// what it just wrote is caught on every run, not once under load.
//
// Use it through reconcilertest.WithCacheLag, which wires a Cache into a
// reconcilertest.Client; docs/testing-kit.md ("Cache lag") describes the
// model and its limits.
package cachelag
