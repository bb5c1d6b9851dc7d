package reconcilertest

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// AssertIdempotent runs one more reconcile pass of r for req and fails t
// unless the pass returned no error and made zero mutating requests through
// c. Call it after the object has converged: it proves that a resync of an
// unchanged object writes nothing, which is what keeps an operator cheap at
// scale and free of update storms.
//
// c must be the client r uses. Counts are reset before the pass.
func AssertIdempotent(t testing.TB, ctx context.Context, r reconcile.Reconciler, c *Client, req reconcile.Request) {
	t.Helper()
	c.Reset()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("idempotency pass for %s returned an error: %v", req, err)
	}
	if n := c.Mutations(); n != 0 {
		t.Fatalf("idempotency pass for %s made %d mutating request(s), want 0:\n  %s",
			req, n, strings.Join(c.MutatingRequests(), "\n  "))
	}
}

// Converge calls r.Reconcile for req until a pass returns no error, asks for
// no requeue and makes no mutating request through c, and fails t after
// maxPasses passes. It returns the number of passes that wrote something.
// Use it in tests that drive a reconciler without a manager.
func Converge(t testing.TB, ctx context.Context, r reconcile.Reconciler, c *Client, req reconcile.Request, maxPasses int) int {
	t.Helper()
	writing := 0
	var lastErr error
	for range maxPasses {
		c.Reset()
		res, err := r.Reconcile(ctx, req)
		lastErr = err
		if err == nil && res.IsZero() && c.Mutations() == 0 {
			return writing
		}
		if c.Mutations() > 0 {
			writing++
		}
	}
	t.Fatalf("%s did not converge in %d passes; last error: %v; last pass wrote:\n  %s",
		req, maxPasses, lastErr, strings.Join(c.MutatingRequests(), "\n  "))
	return writing
}
