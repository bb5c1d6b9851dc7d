package reconciler

import (
	"fmt"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ReferenceCache returns the metadata-only cache that New built for r's
// WaitFor steps (nil without a manager or WaitFor steps).
func ReferenceCache[T Object](r *Reconciler[T]) client.Reader {
	if r.references == nil || r.references.cache == nil {
		return nil
	}
	return r.references.cache
}

// SetFootprintLog makes the guards CacheOptions returns from now on
// log to l, until the returned func restores the default.
func SetFootprintLog(l logr.Logger) (restore func()) {
	prev := footprintLog
	footprintLog = l
	return func() { footprintLog = prev }
}

// RememberedWrites lists the writes r's wake-up filter still waits to
// see the watch event of, over every owner.
func RememberedWrites[T Object](r *Reconciler[T]) []string {
	r.wakeups.mu.Lock()
	defer r.wakeups.mu.Unlock()
	var out []string
	for owner, list := range r.wakeups.writes {
		for _, o := range list {
			out = append(out, fmt.Sprintf("%s: %s %s from %q to %q (in flight %v)", owner, o.gk.Kind, o.key.Name, o.prev, o.answer, o.inFlight))
		}
	}
	return out
}
