package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPage: make bench rewrites the three-peer part of the page and make
// bench-scale its scale section; each keeps the other's and the
// hand-written analysis.
func TestPage(t *testing.T) {
	bench := func(p page) page { p.main = "# Performance\n\nnew figures\n"; return p }
	scale := func(p page) page { p.scale = scaleMarker + "\n## N = 10\n\nnew scale\n"; return p }
	assert.Equal(t, "# Performance\n\nnew figures\n", bench(splitPage("# Performance\n\nold figures\n")).String(),
		"no marker: the fresh page alone")
	assert.Equal(t, "# Performance\n\nnew figures\n", bench(splitPage("")).String(), "no page yet")

	old := "# Performance\n\nold figures\n\n" + analysisMarker + "\n## Reading\n\nwhy\n"
	assert.Equal(t, "# Performance\n\nnew figures\n\n"+analysisMarker+"\n## Reading\n\nwhy\n", bench(splitPage(old)).String(),
		"the hand-written part follows the new figures")
	withScale := "# Performance\n\nold figures\n\n" + scaleMarker + "\n## N = 10\n\nnew scale\n\n" + analysisMarker + "\n## Reading\n\nwhy\n"
	assert.Equal(t, withScale, scale(splitPage(old)).String(), "the scale section goes between the figures and the analysis")
	assert.Equal(t, withScale, scale(splitPage(withScale)).String(), "a new scale run replaces the section")
	assert.Equal(t, strings.Replace(withScale, "old figures", "new figures", 1), bench(splitPage(withScale)).String(),
		"make bench keeps the scale section")

	shards := func(p page) page { p.shards = shardsMarker + "\n## Sharded\n\nnew shards\n"; return p }
	all := strings.Replace(withScale, analysisMarker, shardsMarker+"\n## Sharded\n\nnew shards\n\n"+analysisMarker, 1)
	assert.Equal(t, all, shards(splitPage(withScale)).String(), "the sharding section goes after the scale section")
	assert.Equal(t, all, scale(splitPage(all)).String(), "make bench-scale keeps the sharding section")
	assert.Equal(t, strings.Replace(all, "old figures", "new figures", 1), bench(splitPage(all)).String(),
		"make bench keeps both")
}

func TestParseReplicas(t *testing.T) {
	got, err := parseReplicas("1, 2,4")
	assert.NoError(t, err)
	assert.Equal(t, []int{1, 2, 4}, got)
	got, err = parseReplicas("")
	assert.NoError(t, err)
	assert.Empty(t, got)
	_, err = parseReplicas("1,0")
	assert.ErrorContains(t, err, `-shards: "0" is not a number of replicas`)
}

func TestParsePeers(t *testing.T) {
	for _, tt := range []struct {
		in, err string
		want    []string
	}{
		{in: "reconcilekit,idiomatic,baseline", want: []string{"reconcilekit", "idiomatic", "baseline"}},
		{in: "reconcilekit", want: []string{"reconcilekit"}},
		{in: " reconcilekit , baseline", want: []string{"reconcilekit", "baseline"}},
		{in: "idiomatic", err: "-peers=idiomatic: must include reconcilekit"},
		{in: "reconcilekit,kopf", err: `-peers: unknown operator "kopf"`},
	} {
		got, err := parsePeers(tt.in)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		assert.NoError(t, err, tt.in)
		assert.Len(t, got, len(tt.want), tt.in)
		for _, p := range tt.want {
			assert.True(t, got[p], "%s: %s", tt.in, p)
		}
	}
}
