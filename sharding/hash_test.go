package sharding

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	apisharding "k8s.io/apimachinery/pkg/sharding"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func randomUID(rng *rand.Rand) types.UID {
	return types.UID(fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff,
		rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff))
}

// Hash is the API server's hash, so the ranges computed here are the ones
// the server filters on.
func TestHashIsTheAPIServersHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		uid := randomUID(rng)
		if got, want := fmt.Sprintf("%016x", Hash(uid)), apisharding.HashField(string(uid)); got != want {
			t.Fatalf("Hash(%s) = %s, apimachinery says %s", uid, got, want)
		}
	}
}

var termRE = regexp.MustCompile(`^shardRange\(object\.metadata\.uid, '(0x[0-9a-f]{16}|0x10000000000000000)', '(0x[0-9a-f]{16}|0x10000000000000000)'\)$`)

// parseSelector reads ShardSelector's output into the requirements the API
// server's parser would produce (the parser lives in k8s.io/apiserver,
// which the library does not depend on).
func parseSelector(t *testing.T, s string) apisharding.Selector {
	t.Helper()
	var reqs []apisharding.ShardRangeRequirement
	for _, term := range regexp.MustCompile(` \|\| `).Split(s, -1) {
		m := termRE.FindStringSubmatch(term)
		if m == nil {
			t.Fatalf("term %q of %q is not what the API server parses", term, s)
		}
		if !apisharding.HexLess(m[1], m[2]) {
			t.Fatalf("term %q: start not below end", term)
		}
		reqs = append(reqs, apisharding.ShardRangeRequirement{Key: "object.metadata.uid", Start: m[1], End: m[2]})
	}
	return apisharding.NewSelector(reqs...)
}

// The shard selector selects, by the apimachinery matcher the API server
// uses, exactly the objects whose RangeOf is owned.
func TestShardSelectorSelectsTheOwnedRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, ranges := range []int{1, 2, 8, 64, 1024} {
		for range 20 {
			var owned []int
			for r := range ranges {
				if rng.IntN(3) == 0 {
					owned = append(owned, r)
				}
			}
			if len(owned) == 0 {
				owned = []int{rng.IntN(ranges)}
			}
			s, err := ShardSelector(ranges, owned)
			if err != nil {
				t.Fatal(err)
			}
			sel := parseSelector(t, s)
			for range 200 {
				uid := randomUID(rng)
				got, err := sel.Matches(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: uid}})
				if err != nil {
					t.Fatal(err)
				}
				if want := slices.Contains(owned, RangeOf(uid, ranges)); got != want {
					t.Fatalf("ranges=%d owned=%v: uid %s (range %d) selected=%v", ranges, owned, uid, RangeOf(uid, ranges), got)
				}
			}
		}
	}
}

func TestShardSelectorMergesAdjacentRanges(t *testing.T) {
	s, err := ShardSelector(4, []int{3, 0, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000') || " +
		"shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')"
	if s != want {
		t.Fatalf("got  %s\nwant %s", s, want)
	}
	for _, bad := range [][]int{nil, {4}, {-1}} {
		if _, err := ShardSelector(4, bad); err == nil {
			t.Errorf("ShardSelector(4, %v): want an error", bad)
		}
	}
	if _, err := ShardSelector(3, []int{0}); err == nil {
		t.Error("3 ranges: want an error (not a power of two)")
	}
}

// A server without the gate ignores the selector and sends no ShardInfo;
// the fake client is such a server.
func TestServerFiltersWithoutTheGate(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ops"}}).Build()
	ok, err := ServerFilters(t.Context(), c, "ops")
	if err != nil || ok {
		t.Fatalf("got %v, %v; want false", ok, err)
	}
}

func TestLabelSelector(t *testing.T) {
	m := testMember(t, 8)
	sel, err := m.LabelSelector([]int{2, 5})
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{"2": true, "5": true, "3": false, "": false} {
		set := labels.Set{}
		if v != "" {
			set[testRangeLabel] = v
		}
		if got := sel.Matches(set); got != want {
			t.Errorf("label %q: matches=%v, want %v", v, got, want)
		}
	}
	if sel.Matches(labels.Set{"sharding.reconcilekit.io/range-other": "2"}) {
		t.Error("another group's range label selected")
	}
	if sel, _ := m.LabelSelector(nil); sel.Matches(labels.Set{testRangeLabel: "0"}) {
		t.Error("no ranges must select nothing")
	}
}

func TestSetRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100 {
		set := make([]bool, 64)
		for r := range set {
			set[r] = rng.IntN(2) == 0
		}
		back, err := parseSet(formatSet(set), 64)
		if err != nil || !slices.Equal(back, set) {
			t.Fatalf("%q: got %v, %v", formatSet(set), back, err)
		}
	}
	if s := formatSet([]bool{true, true, true, false, true}); s != "0-2,4" {
		t.Errorf("formatSet = %q", s)
	}
	for _, bad := range []string{"x", "3-1", "0-64", "-1", "1,"} {
		if _, err := parseSet(bad, 64); err == nil {
			t.Errorf("parseSet(%q): want an error", bad)
		}
	}
}
