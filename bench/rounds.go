package bench

import (
	"fmt"
	"slices"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// Rounds: two runs of one commit an hour apart disagreed by up to 0.4× on
// CPU at N = 1,000, so one reading per operator cannot tell a 3% saving
// from the machine's mood. Run measures Config.Repeat rounds instead, and
// the report gives each figure's median and range over them.

// peer is one operator a round runs: its name (in the report, and in its
// namespace and log file), how to start it, what to add to its
// environment, and the fast path it runs without ("" for the three
// operators compared).
type peer struct {
	name      string
	cmd       Command
	env       []string
	off       string
	unrelated bool
}

// peersOf lists the operators of cfg in the order of a round: the
// reconcilekit operator, the idiomatic peer and the baseline (in reverse
// with BaselineFirst), then the reconcilekit operator once per fast path
// switched off. Each reconcilekit operator gets fastpath.Env set, to ""
// for the one as shipped, so that a value in the bench's own environment
// cannot switch fast paths off unseen.
func peersOf(cfg Config) []peer {
	peers := []peer{{name: "reconcilekit", cmd: cfg.Ours, env: []string{fastpath.Env + "="}, unrelated: true}}
	if cfg.Idiomatic != nil {
		peers = append(peers, peer{name: "idiomatic", cmd: cfg.Idiomatic, unrelated: true})
	}
	if cfg.Baseline != nil {
		peers = append(peers, peer{name: "baseline", cmd: cfg.Baseline, unrelated: true})
	}
	if cfg.BaselineFirst {
		slices.Reverse(peers)
	}
	for _, off := range cfg.FastPathsOff {
		peers = append(peers, peer{name: offName(off), cmd: cfg.Ours, env: []string{fastpath.Env + "=" + off}, off: off})
	}
	return peers
}

// offName names the reconcilekit operator without the fast path off.
func offName(off string) string { return "reconcilekit-" + off + "-off" }

// interleave returns the order in which round (from 0) runs peers: the
// order of peersOf in the first round and every other one, reversed in the
// others. Every round runs each operator once, so that whatever changes
// over a run (the load of the machine, etcd's database growing with every
// fleet) reaches every operator in every round rather than one operator's
// rounds all together; and reversing every other round puts each operator
// in turn before and after each other one, so that a steady drift does
// not favour the one that always runs first. A fast-path row compares the
// reconcilekit operator with itself, one fast path off, a few places
// later in one round and as many earlier in the next.
func interleave(peers []peer, round int) []peer {
	order := slices.Clone(peers)
	if round%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// label is what p's process, log file and namespaces are called in round
// (from 0): its name, with the round's number after the first, so that a
// round never meets what an earlier one left (on a cluster without a
// namespace controller, envtest, a deleted namespace stays Terminating).
func (p peer) label(round int) string {
	if round == 0 {
		return p.name
	}
	return fmt.Sprintf("%s-%d", p.name, round+1)
}

// put records what p measured in the round.
func (rd *Round) put(p peer, res ImplResult) {
	switch {
	case p.off != "":
		if rd.Off == nil {
			rd.Off = map[string]ImplResult{}
		}
		rd.Off[p.off] = res
	case p.name == "reconcilekit":
		rd.Ours = res
	case p.name == "idiomatic":
		rd.Idiomatic = res
	case p.name == "baseline":
		rd.Baseline = res
	}
}
