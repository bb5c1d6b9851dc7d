package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKeepAnalysis(t *testing.T) {
	fresh := "# Performance\n\nnew figures\n"
	assert.Equal(t, fresh, keepAnalysis("# Performance\n\nold figures\n", fresh), "no marker: the fresh page alone")
	old := "# Performance\n\nold figures\n\n" + analysisMarker + "\n## Where we are behind\n\nwhy\n"
	assert.Equal(t, "# Performance\n\nnew figures\n\n"+analysisMarker+"\n## Where we are behind\n\nwhy\n", keepAnalysis(old, fresh),
		"the hand-written part follows the new figures")
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
