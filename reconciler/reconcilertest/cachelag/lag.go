package cachelag

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// Lag makes reads of one kind trail the apiserver, as reads through a
// manager's informer cache do under load: a Deployment still fully rolled
// out at its old generation, a ConfigMap without the key just written, a
// Secret not yet created.
//
// A version of an object is readable once it is at least VersionsBehind
// versions behind the newest version the [Cache] knows of (or is the oldest
// it knows) and was first observed at least Delay ago. A read returns the
// newest readable version; an object without one (only just created), or
// whose readable version is its deletion, is NotFound. Set VersionsBehind,
// Delay or both.
type Lag struct {
	// Kind is the lagged kind, as reconcilertest.Call spells it
	// ("Deployment"), whatever its group. "" lags every kind that has no
	// Lag of its own.
	Kind string
	// VersionsBehind makes reads return each object as it was this many
	// versions before the newest one the Cache knows of; 0 returns the
	// newest. An object with fewer known versions reads as the oldest one,
	// so it holds back updates and deletions, not creations (Delay does).
	// It never catches up: with 1, the newest version is never read, so a
	// stale read repeats on every run, whatever the informer's timing.
	VersionsBehind int
	// Delay makes a version readable only this long after the Cache first
	// observed it: when its write returned, or when the informer delivered
	// it, whichever came first. Unlike VersionsBehind it catches up, as a
	// cache does once a burst of writes is over.
	Delay time.Duration
}

// Cache holds, per lagged kind and object, the versions it has observed,
// ordered by resourceVersion, and answers reads from them. Build it with
// [New]; it is safe for concurrent use.
type Cache struct {
	informers cache.Informers
	lags      map[string]Lag
	now       func() time.Time

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]*lagKind
}

// New returns a Cache whose informers (the manager's cache,
// mgr.GetCache()) deliver the versions other clients write. It panics on a
// nil informers, a negative VersionsBehind or Delay, or two Lags for one
// Kind: the test is wrong, not the code under test.
func New(informers cache.Informers, lags ...Lag) *Cache {
	if informers == nil {
		panic("cachelag: New needs the manager's informers (mgr.GetCache())")
	}
	byKind := map[string]Lag{}
	for _, l := range lags {
		if l.VersionsBehind < 0 || l.Delay < 0 {
			panic(fmt.Sprintf("cachelag: negative lag %+v", l))
		}
		if _, dup := byKind[l.Kind]; dup {
			panic(fmt.Sprintf("cachelag: two Lags for kind %q", l.Kind))
		}
		byKind[l.Kind] = l
	}
	return &Cache{informers: informers, lags: byKind, kinds: map[schema.GroupVersionKind]*lagKind{}, now: time.Now}
}

func (l *Cache) lagFor(kind string) (Lag, bool) {
	if lag, ok := l.lags[kind]; ok {
		return lag, true
	}
	lag, ok := l.lags[""]
	return lag, ok
}
