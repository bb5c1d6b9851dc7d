// Package leanmod holds no code, only the test that keeps the library
// module's go.mod lean.
//
// The repository is several modules: the library at the root, and
// examples/, e2e/, bench/ and docs/ nested, each with a go.mod of its own
// that builds against this checkout (a replace directive). So an importer of
// the library gets only what the library's packages and their tests import,
// never the e2e framework, the example operator's or the benchmark's
// dependencies. The test fails when the root go.mod is not tidy, or when it
// requires a module that only the outer code needs.
package leanmod
