package sharding

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func loads(owners []string) map[string]int {
	l := map[string]int{}
	for _, o := range owners {
		l[o]++
	}
	return l
}

func moved(a, b []string) int {
	n := 0
	for r := range a {
		if a[r] != b[r] {
			n++
		}
	}
	return n
}

func TestAssignIsDeterministicAndBalanced(t *testing.T) {
	members := []string{"op-7f9c-a", "op-7f9c-b", "op-7f9c-c"}
	a := Assign(64, members)
	b := Assign(64, []string{"op-7f9c-c", "op-7f9c-a", "op-7f9c-b", "op-7f9c-a"})
	if !slices.Equal(a, b) {
		t.Fatal("the assignment depends on the order (or repetition) of the members")
	}
	for _, ranges := range []int{1, 16, 64, 256} {
		for n := 1; n <= 9; n++ {
			var ms []string
			for i := range n {
				ms = append(ms, fmt.Sprintf("replica-%d", i))
			}
			owners := Assign(ranges, ms)
			l := loads(owners)
			if l[""] > 0 {
				t.Fatalf("ranges=%d n=%d: %d ranges unassigned", ranges, n, l[""])
			}
			limit := (ranges + n - 1) / n
			for m, k := range l {
				if k > limit {
					t.Errorf("ranges=%d n=%d: %s holds %d > %d", ranges, n, m, k, limit)
				}
			}
		}
	}
	if owners := Assign(4, nil); !slices.Equal(owners, []string{"", "", "", ""}) {
		t.Errorf("no members: %v", owners)
	}
}

// A join or a leave moves about 1/N of the ranges: on average at most 1.7
// times the ideal ranges/(N+1) (the price of the balance bound; plain
// rendezvous hashing moves exactly the ideal but lets one replica hold 1.5
// times its share), and never a majority.
func TestAssignMovesAboutOneNth(t *testing.T) {
	const ranges, trials = 64, 300
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 1; n <= 8; n++ {
		total, worst := 0, 0
		for range trials {
			var ms []string
			for range n {
				ms = append(ms, fmt.Sprintf("webapp-operator-%08x", rng.Uint32()))
			}
			before := Assign(ranges, ms)
			after := Assign(ranges, append(ms, fmt.Sprintf("webapp-operator-%08x", rng.Uint32())))
			k := moved(before, after)
			// A leave is the same change read backwards.
			total += k
			worst = max(worst, k)
		}
		ideal := float64(ranges) / float64(n+1)
		avg := float64(total) / trials
		t.Logf("%d → %d replicas: ideal %.1f ranges move, average %.1f (%.2fx), worst %d", n, n+1, ideal, avg, avg/ideal, worst)
		if avg > 1.7*ideal || worst > ranges/2+ranges/8 {
			t.Errorf("%d → %d replicas: average %.1f, worst %d ranges moved; ideal %.1f", n, n+1, avg, worst, ideal)
		}
	}
}

// Only the ranges whose owner changes move: a range stays with a member
// that is in both assignments unless the balance bound pushes it away.
func TestAssignKeepsRangesOfStayingMembersMostly(t *testing.T) {
	ms := []string{"a", "b", "c", "d"}
	before := Assign(64, ms)
	after := Assign(64, ms[:3]) // d leaves
	kept := 0
	for r := range before {
		if before[r] != "d" && before[r] == after[r] {
			kept++
		}
	}
	if stay := 64 - loads(before)["d"]; kept < stay*3/4 {
		t.Errorf("only %d of the %d ranges of the staying members kept their owner", kept, stay)
	}
}
