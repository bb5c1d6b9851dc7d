// Package bench measures what an operator costs a cluster: API requests
// (per verb, per object: converging, on a no-op resync, on an image update,
// on deletion), wall time to Ready, CPU, reconcile latency and memory, for
// the WebApp example operator built with reconcilekit against the same
// operator written with plain controller-runtime as a strong team would
// (package idiomatic) and the tutorial way (package baseline), side by
// side, in one run, with issue #30's goals judged on the figures. `make
// bench` runs it (cmd/bench) on a local kwok cluster and writes
// docs/performance.md, with figures (Figure) in docs/performance/. `make
// bench-scale` runs [RunScale]: reconcilekit converges 10,000 WebApps,
// each operator restarts over them, reconcilekit deletes them; it writes a
// section of its own on the same page. `make bench-shards` runs
// [RunShards]: 1, 2 and 4 sharded replicas (--sharding) start over one
// converged fleet; its section shows each replica's heap and share.
//
// The problem it prevents: an operator's costs at scale — an update storm
// on every resync, a cache holding every Deployment in the cluster — are
// invisible in unit tests and in a demo with three objects. Measured on
// every change, a regression shows up as a number in a table.
//
// How it counts, without touching the operators' code:
//   - Each operator runs in a child process of its own (so its RSS is its
//     own), with a kubeconfig that points at a [NewProxy] on loopback. The
//     proxy counts every request on the wire, classified with the
//     apiserver's own RequestInfoFactory ([Classify]); reads served from an
//     informer cache never reach it.
//   - The same windows are read from the apiserver's apiserver_request_total
//     ([ScrapeAPIServer]) as a cross-check.
//   - Progress (reconciles, queue depth), reconcile latency and the heap
//     live after a GC cycle come from the operator's controller-runtime
//     metrics endpoint; CPU from /proc/<pid>/stat of its process
//     ([ProcessCPU]), less what the bench's own metrics reads cost it.
//
// Rounds: each operator runs Config.Repeat times (cmd/bench -repeat,
// default 3), every round on a fleet of its own, the operators
// interleaved (every round runs each once, every other round in reverse
// order); the report gives each figure's median and range, and a verdict
// only where the range lies clear of the goal's line.
//
// Fast paths (cmd/bench -fastpaths): every round also runs the reconcilekit
// operator once per fast path named, with that one switched off through
// RECONCILEKIT_FASTPATHS_OFF (internal/fastpath); the report's "Fast paths"
// section gives each one's lines of code ([FastPaths]), what it saves per
// phase, and whether it pays ([FastPathLine]).
//
// Caveats: the figures are from one machine, shared with whatever else
// runs on it (the report records the load average); timings on two cores
// are noisy, request counts are not.
package bench
