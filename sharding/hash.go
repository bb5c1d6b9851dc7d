package sharding

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultRanges is the number of ranges the hash space is cut into when
// [Options].Ranges is zero. 64 ranges balance up to a few dozen replicas to
// within one range of each other, and keep a shard selector short (a
// replica's ranges are listed one term each).
const DefaultRanges = 64

// MaxRanges is the largest number of ranges [Options].Ranges accepts. More
// ranges make every shard selector and lease annotation longer without
// balancing a realistic number of replicas any better.
const MaxRanges = 1024

// rangeLabelPrefix starts [Member.RangeLabel]; the group ends it.
const rangeLabelPrefix = "sharding.reconcilekit.io/range-"

// Hash returns the 64-bit FNV-1a hash of uid: the hash the API server's
// shard selector (KEP-5866, feature gate ShardedListAndWatch) computes for
// shardRange(object.metadata.uid, …), so that a range computed here and a
// range the API server filters on are the same objects.
func Hash(uid types.UID) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return h.Sum64()
}

// RangeOf returns the range, in [0, ranges), of the object with the given
// UID when the 64-bit hash space is cut into ranges equal, contiguous
// ranges: range i holds the hashes [i·2⁶⁴/ranges, (i+1)·2⁶⁴/ranges).
// ranges must be a power of two (see [ValidateRanges]); the range is the
// top log2(ranges) bits of [Hash].
func RangeOf(uid types.UID, ranges int) int {
	return int(Hash(uid) >> (64 - log2(ranges)))
}

// ValidateRanges reports whether ranges is a usable number of ranges: a
// power of two between 1 and [MaxRanges]. A power of two makes every range
// an exact hexadecimal interval of the hash space, which is what a shard
// selector names.
func ValidateRanges(ranges int) error {
	if ranges < 1 || ranges > MaxRanges || ranges&(ranges-1) != 0 {
		return fmt.Errorf("sharding: ranges must be a power of two between 1 and %d, got %d", MaxRanges, ranges)
	}
	return nil
}

func log2(ranges int) uint { return uint(bits.TrailingZeros(uint(ranges))) }

// ShardSelector returns the value of metav1.ListOptions.ShardSelector that
// lists and watches exactly the objects whose UIDs fall in the given ranges,
// for an API server with the ShardedListAndWatch feature gate: one
// shardRange(object.metadata.uid, start, end) term per run of adjacent
// ranges, joined by ||. An empty selector means "everything" to the API
// server, so an empty owned is an error, never "".
func ShardSelector(ranges int, owned []int) (string, error) {
	if err := ValidateRanges(ranges); err != nil {
		return "", err
	}
	runs, err := runsOf(ranges, owned)
	if err != nil {
		return "", err
	}
	if len(runs) == 0 {
		return "", errors.New("sharding: no ranges to select: an empty shard selector would select every object")
	}
	terms := make([]string, 0, len(runs))
	for _, run := range runs {
		terms = append(terms, fmt.Sprintf("shardRange(object.metadata.uid, '%s', '%s')",
			bound(run[0], ranges), bound(run[1]+1, ranges)))
	}
	return strings.Join(terms, " || "), nil
}

// bound is the hash at which range r starts, in the selector's notation: 16
// hex digits, or 0x10000000000000000 (2⁶⁴) past the last range.
func bound(r, ranges int) string {
	if r == ranges {
		return "0x10000000000000000"
	}
	return fmt.Sprintf("0x%016x", uint64(r)<<(64-log2(ranges)))
}

// ServerFilters reports whether the API server filters lists and watches by
// shard selector (its ShardedListAndWatch feature gate is on). With the gate
// off the server ignores the selector and answers with every object, so
// the answer tells: it lists at most one Lease of namespace (a replica may
// read its group's Leases anyway) with a selector of the whole hash space,
// and looks for the ShardInfo a filtered list carries. It asks a built-in
// kind on purpose: lists of custom resources are filtered but carry no
// ShardInfo. When it is false, filter client-side ([Member.Predicate]): the
// work splits across replicas, the memory does not.
func ServerFilters(ctx context.Context, r client.Reader, namespace string) (bool, error) {
	sel, err := ShardSelector(1, []int{0})
	if err != nil {
		return false, err
	}
	var list coordinationv1.LeaseList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.Limit(1),
		&client.ListOptions{Raw: &metav1.ListOptions{ShardSelector: sel}}); err != nil {
		return false, err
	}
	return list.ShardInfo != nil, nil
}

// LabelSelector selects the objects labelled with one of the given ranges
// under [Member.RangeLabel]: the owned objects of the group's owners in
// those ranges. It works on every API server (no feature gate), and is how
// a replica's cache keeps only the owned objects of its own ranges.
func (m *Member) LabelSelector(owned []int) (labels.Selector, error) {
	if len(owned) == 0 {
		return labels.Nothing(), nil
	}
	values := make([]string, 0, len(owned))
	for _, r := range owned {
		values = append(values, strconv.Itoa(r))
	}
	req, err := labels.NewRequirement(m.rangeLabel, selection.In, values)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*req), nil
}

// runsOf sorts owned and returns its runs of adjacent ranges as [first,
// last] pairs.
func runsOf(ranges int, owned []int) ([][2]int, error) {
	sorted := slices.Clone(owned)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var runs [][2]int
	for _, r := range sorted {
		if r < 0 || r >= ranges {
			return nil, fmt.Errorf("sharding: range %d out of [0, %d)", r, ranges)
		}
		if n := len(runs); n > 0 && runs[n-1][1] == r-1 {
			runs[n-1][1] = r
			continue
		}
		runs = append(runs, [2]int{r, r})
	}
	return runs, nil
}

// formatSet writes a set of ranges as "0-3,7,9-10" (the lease annotation).
func formatSet(set []bool) string {
	var owned []int
	for r, in := range set {
		if in {
			owned = append(owned, r)
		}
	}
	runs, _ := runsOf(len(set), owned)
	parts := make([]string, 0, len(runs))
	for _, run := range runs {
		if run[0] == run[1] {
			parts = append(parts, strconv.Itoa(run[0]))
		} else {
			parts = append(parts, strconv.Itoa(run[0])+"-"+strconv.Itoa(run[1]))
		}
	}
	return strings.Join(parts, ",")
}

// parseSet reads formatSet's notation into a set of the given size.
func parseSet(s string, ranges int) ([]bool, error) {
	set := make([]bool, ranges)
	if s == "" {
		return set, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		first, last, isRun := strings.Cut(part, "-")
		lo, err := strconv.Atoi(first)
		if err != nil {
			return nil, fmt.Errorf("sharding: bad range set %q: %w", s, err)
		}
		hi := lo
		if isRun {
			if hi, err = strconv.Atoi(last); err != nil {
				return nil, fmt.Errorf("sharding: bad range set %q: %w", s, err)
			}
		}
		if lo < 0 || hi >= ranges || lo > hi {
			return nil, fmt.Errorf("sharding: bad range set %q for %d ranges", s, ranges)
		}
		for r := lo; r <= hi; r++ {
			set[r] = true
		}
	}
	return set, nil
}
