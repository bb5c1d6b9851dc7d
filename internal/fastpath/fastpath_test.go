package fastpath

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Path
	}{
		{"", 0},
		{"verdicts", Verdicts},
		{" statuspatch , intern,", StatusPatch | Intern},
		{"statuspatch,verdicts,intern,createonly", StatusPatch | Verdicts | Intern | CreateOnly},
	} {
		got, err := Parse(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
		assert.Equal(t, tt.want, mustParse(t, got.String()), "%q: String reads back", tt.in)
	}
	_, err := Parse("verdicts,interning")
	assert.EqualError(t, err, `unknown fast path "interning" (want a comma-separated list of statuspatch,verdicts,intern,createonly)`)
}

func mustParse(t *testing.T, s string) Path {
	t.Helper()
	p, err := Parse(s)
	require.NoError(t, err)
	return p
}

func TestAllHasEveryName(t *testing.T) {
	var set Path
	for _, p := range All() {
		assert.NotEmpty(t, p.String())
		set |= p
	}
	assert.Equal(t, "statuspatch,verdicts,intern,createonly", set.String())
}

// TestEnv: the variable switches off what it names; an unknown name
// switches nothing off and is an error naming the variable and its value.
func TestEnv(t *testing.T) {
	t.Cleanup(Set(0))
	t.Setenv(Env, "verdicts,createonly")
	require.NoError(t, readEnv())
	assert.True(t, Off(Verdicts))
	assert.True(t, Off(CreateOnly))
	assert.False(t, Off(StatusPatch))
	assert.False(t, Off(Intern))

	Set(0)
	t.Setenv(Env, "verdicts,bogus")
	err := readEnv()
	assert.EqualError(t, err, `RECONCILEKIT_FASTPATHS_OFF="verdicts,bogus": unknown fast path "bogus" (want a comma-separated list of statuspatch,verdicts,intern,createonly)`)
	for _, p := range All() {
		assert.False(t, Off(p), "%s: nothing is switched off by a bad value", p)
	}
}

func TestSetRestores(t *testing.T) {
	restore := Set(Intern)
	assert.True(t, Off(Intern))
	inner := Set(Verdicts | StatusPatch)
	assert.False(t, Off(Intern))
	assert.True(t, Off(StatusPatch))
	inner()
	assert.True(t, Off(Intern))
	restore()
	assert.False(t, Off(Intern))
}
