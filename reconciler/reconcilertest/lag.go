package reconcilertest

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest/cachelag"
)

// WithCacheLag makes reads of the kinds lags name return what a lagging
// informer cache would, instead of asking the wrapped client: the Client
// keeps, per object, the versions it observed (the answers to its own
// writes and the events of informers, the manager's cache
// mgr.GetCache()) and answers Get and List from them, held back as each
// [cachelag.Lag] says. Reads are counted like any other and faults apply to
// them first; other kinds, Watch and subresource reads go to the wrapped
// client. [ReconcileUntilQuiet] and [AssertIdempotent] wait out a Delay between passes.
// See package cachelag for the model and its caveats.
//
// WithCacheLag panics on a nil informers, a negative lag, or two Lags for
// one Kind: the test is wrong, not the code under test.
func WithCacheLag(informers cache.Informers, lags ...cachelag.Lag) ClientOption {
	lc := cachelag.New(informers, lags...)
	return func(c *Client) { c.lag = lc }
}

// lagPending reports whether a Delay still hides a version of an object
// read since the last Reset (see cachelag.Cache.Pending).
func (c *Client) lagPending() bool {
	return c.lag != nil && c.lag.Pending()
}

// settleLag waits until no version observed so far is hidden by a Delay
// (see cachelag.Cache.Settle).
func (c *Client) settleLag(ctx context.Context) error {
	if c.lag == nil {
		return nil
	}
	return c.lag.Settle(ctx)
}
