// Package sharding lets N replicas of an operator share its objects: each
// reconciles (and, with the selectors below, caches) only the objects in
// the hash ranges it owns, and no two replicas ever own the same range.
//
// Experimental: this is the library core of issue #31, used by the
// reconciler through reconciler.Options.Shard; its API may change in any
// release (it is not listed in docs/compatibility.md).
//
// The pieces, from the bottom up:
//
//   - [Hash] and [RangeOf]: an object's range is the top bits of the 64-bit
//     FNV-1a hash of its UID, the hash the API server's shard selector uses
//     (KEP-5866, feature gate ShardedListAndWatch, alpha in Kubernetes 1.36).
//   - [ShardSelector] and [Member.LabelSelector]: list and watch only the
//     objects of some ranges, server-side; owned objects carry their owner's
//     range in [Member.RangeLabel] so that they follow it. [ServerFilters] tells whether the
//     API server has the feature gate on; without it, filter client-side.
//   - [Assign]: a deterministic, balanced assignment of a fixed number of
//     ranges to the live replicas that moves about 1/N of them on a join or
//     a leave.
//   - [Member]: membership by one coordination.k8s.io Lease per replica, and
//     the handoff state machine (free → acquiring → owned → draining → free):
//     a range is owned only once its claim is in the replica's Lease and no
//     live Lease of another replica claims it; a replica claims a range from
//     before it owns it until its last pass of it ended. [Member.Begin] and
//     [Member.Owns] tell a controller whether it may reconcile an object now.
//   - [Member.SelectCache]: the replica's cache holds only the objects of
//     the ranges it claims, asked of the API server by shard selector where
//     it filters, dropped on arrival where it does not.
//
// docs/sharding.md gives the protocol, its failure cases (a paused
// process, a partition, clock skew) and the API server feature gate.
package sharding
