package reconciler

import (
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
