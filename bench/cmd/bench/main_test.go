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
