// Package apicheck holds the test of hack/apicheck.sh, the API compatibility
// check that make lint runs (docs/compatibility.md, "The API check"). It has
// no code of its own.
package apicheck
