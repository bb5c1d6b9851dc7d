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
// c must be the client r uses. Counts are reset before the pass. With a
// cache lag (WithCacheLag) whose Delay has not passed for some version c
// observed, the pass waits until it has, as a resync comes after the cache
// caught up; a VersionsBehind lag never catches up, so the pass reads the
// previous versions of the lagged kinds.
func AssertIdempotent(t testing.TB, ctx context.Context, r reconcile.Reconciler, c *Client, req reconcile.Request) {
	t.Helper()
	if err := c.settleLag(ctx); err != nil {
		t.Fatalf("idempotency pass for %s: waiting for the cache lag: %v", req, err)
	}
	c.Reset()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("idempotency pass for %s returned an error: %v", req, err)
	}
	if n := c.Mutations(); n != 0 {
		t.Fatalf("idempotency pass for %s made %d mutating request(s), want 0:\n  %s",
			req, n, strings.Join(c.MutatingRequests(), "\n  "))
	}
}

// ReconcileUntilQuiet calls r.Reconcile for req until a pass is quiet (it
// returns no error, asks for no requeue and makes no mutating request
// through c), and fails t after maxPasses passes. It returns writingPasses,
// the number of passes that wrote something. Use it in tests that drive a
// reconciler without a manager.
//
// With a cache lag Delay (WithCacheLag), each pass starts once every
// version c has observed is readable (a wait of up to Delay), so a pass
// reads what the previous one wrote; a quiet pass does not count while the
// Delay still hides a version of an object it read. A VersionsBehind lag
// never catches up: a reconciler that writes what it read from a kind
// lagged that way may never converge, which is the bug such a lag is there
// to show. See docs/testing-kit.md, "Cache lag".
func ReconcileUntilQuiet(t testing.TB, ctx context.Context, r reconcile.Reconciler, c *Client, req reconcile.Request, maxPasses int) (writingPasses int) {
	t.Helper()
	var lastErr error
	hidden := ""
	for range maxPasses {
		if err := c.settleLag(ctx); err != nil {
			t.Fatalf("%s: waiting for the cache lag: %v", req, err)
		}
		c.Reset()
		res, err := r.Reconcile(ctx, req)
		lastErr = err
		quiet := err == nil && res.IsZero() && c.Mutations() == 0
		if quiet && !c.lagPending() {
			return writingPasses
		}
		hidden = ""
		if quiet {
			hidden = " (the last pass was quiet, but the cache lag still hid a version of an object it read)"
		}
		if c.Mutations() > 0 {
			writingPasses++
		}
	}
	t.Fatalf("%s did not converge in %d passes%s; last error: %v; last pass wrote:\n  %s",
		req, maxPasses, hidden, lastErr, strings.Join(c.MutatingRequests(), "\n  "))
	return writingPasses
}
