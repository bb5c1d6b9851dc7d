package cachelag

import (
	"context"
	"time"
)

// Pending reports whether a Delay still hides a version of an object read
// since the last [Cache.ForgetReads]: a pass that read it may have missed
// it. Objects not read do not count, so other writers' churn in the cluster
// cannot keep a convergence loop from ending.
func (l *Cache) Pending() bool {
	return l.pendingUntil(true).After(l.now())
}

// Settle waits until no version observed so far is hidden by a Delay, so
// that the next reconcile pass reads what the previous one wrote, as a pass
// triggered after the cache caught up would. It returns ctx's error if ctx
// ends first.
func (l *Cache) Settle(ctx context.Context) error {
	wait := l.pendingUntil(false).Sub(l.now())
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ForgetReads starts a new record of what reads asked for, for [Cache.Pending].
func (l *Cache) ForgetReads() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.kinds {
		clear(k.readKeys)
		clear(k.listed)
	}
}

// pendingUntil returns when every version observed so far (of an object
// read since the last ForgetReads, if onlyRead) will have been observed at
// least its kind's Delay ago.
func (l *Cache) pendingUntil(onlyRead bool) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var until time.Time
	for _, k := range l.kinds {
		if k.lag.Delay == 0 {
			continue
		}
		for key, h := range k.objects {
			if onlyRead && !k.wasRead(key) {
				continue
			}
			for _, v := range h {
				if t := v.observed.Add(k.lag.Delay); t.After(until) {
					until = t
				}
			}
		}
	}
	return until
}
