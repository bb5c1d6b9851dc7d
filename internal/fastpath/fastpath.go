// Package fastpath switches the library's fast paths off, for measurement
// only. A fast path is code the library runs in place of an upstream route
// (controller-runtime's helper, or the plain API request) because it was
// measured to cost less; the bench (bench/cmd/bench -fastpaths) starts the
// WebApp operator once more per fast path with that one switched off, so
// that each one's saving is measured in the same run, and one that does
// not pay can go. Nothing else should switch them off: the upstream routes
// are correct, only slower.
//
// The switches are read once, when the program starts, from the
// environment variable RECONCILEKIT_FASTPATHS_OFF (Env): a comma-separated
// list of the names below; unset or empty, every fast path is on. With a
// fast path off, the code takes exactly the upstream route at the one
// place it branches:
//
//   - statuspatch: the reconciler's status write sends
//     client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}),
//     a merge patch of the whole object, instead of building the merge
//     patch of the status alone (reconciler/status.go).
//   - verdicts: ownership.Applier.Apply compares the live object with the
//     configuration on every call, instead of trusting an object it found
//     matching at the same resourceVersion (ownership/verdicts.go), and
//     keeps no verdicts.
//   - intern: reconciler.CacheOptions does not intern the strings of the
//     cached objects (reconciler/intern.go).
//   - createonly: where the cache has no object, Apply reads the API
//     server and, if it has none either, sends a plain server-side apply,
//     without a precondition, instead of a create-only apply
//     (ownership/write.go).
//
// An unknown name switches nothing off and is an error: reconciler.New
// and every ownership.Applier.Apply return Err, which names the variable
// and its value.
package fastpath

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// Env is the environment variable the switches are read from.
const Env = "RECONCILEKIT_FASTPATHS_OFF"

// Path is a fast path, or a set of them.
type Path uint32

// The fast paths, each named as Env spells it.
const (
	// StatusPatch is the reconciler's status patch (statuspatch).
	StatusPatch Path = 1 << iota
	// Verdicts are Apply's verdicts on objects it judged (verdicts).
	Verdicts
	// Intern is the interning of the cached objects' strings (intern).
	Intern
	// CreateOnly is Apply's create-only apply (createonly).
	CreateOnly
)

// names spells every fast path, in the order of All.
var names = []struct {
	path Path
	name string
}{{StatusPatch, "statuspatch"}, {Verdicts, "verdicts"}, {Intern, "intern"}, {CreateOnly, "createonly"}}

// All lists every fast path.
func All() []Path {
	all := make([]Path, len(names))
	for i, n := range names {
		all[i] = n.path
	}
	return all
}

// String spells p as Env does: "verdicts", or "statuspatch,verdicts" for a
// set; "" for none.
func (p Path) String() string {
	var parts []string
	for _, n := range names {
		if p&n.path != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, ",")
}

// Parse reads a comma-separated list of fast path names (spaces around a
// name and empty names are ignored) into the set it names. An unknown name
// is an error that names it and the known ones.
func Parse(s string) (Path, error) {
	var set Path
	for name := range strings.SplitSeq(s, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		p, ok := byName(name)
		if !ok {
			return 0, fmt.Errorf("unknown fast path %q (want a comma-separated list of %s)", name, Path(^uint32(0)))
		}
		set |= p
	}
	return set, nil
}

func byName(name string) (Path, bool) {
	for _, n := range names {
		if n.name == name {
			return n.path, true
		}
	}
	return 0, false
}

// off is the set of fast paths switched off, and envErr the error of
// reading Env, both set once when the package is initialised (Set changes
// off for a test).
var (
	off    atomic.Uint32
	envErr = readEnv()
)

// readEnv switches off what Env names, or returns why it cannot.
func readEnv() error {
	value := os.Getenv(Env)
	set, err := Parse(value)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", Env, value, err)
	}
	off.Store(uint32(set))
	return nil
}

// Off reports whether the fast path p is switched off: the caller takes
// the upstream route.
func Off(p Path) bool {
	return Path(off.Load())&p != 0
}

// Err is the error of reading Env when the program started: nil, unless
// it names an unknown fast path.
func Err() error {
	return envErr
}

// Set switches off exactly the fast paths in p, for a test that proves a
// switch takes the upstream route, and returns what restores the previous
// setting (for t.Cleanup). It is not for tests that run in parallel with
// others that take a fast path.
func Set(p Path) (restore func()) {
	before := off.Swap(uint32(p))
	return func() { off.Store(before) }
}
