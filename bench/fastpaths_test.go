package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// TestCountLines pins the counting rule on a small file: lines with a
// token outside comments, in the whole file or in the declarations named.
func TestCountLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.go")
	require.NoError(t, os.WriteFile(path, []byte(`// Package x.
package x

import "strings"

// A is counted.
const A = 1

const (
	// B is in a block.
	B = 2
	C = 3
)

type T struct {
	n int
}

/* a block
comment */
func (t *T) M() string { return strings.Repeat("x", t.n) }

func (t T) N() int { return t.n }

func F() string {

	return `+"`"+`raw
string`+"`"+`
}
`), 0o600))
	for _, tt := range []struct {
		decls []string
		want  int
	}{
		{nil, 16},
		{[]string{"A"}, 1},
		{[]string{"B"}, 1},
		{[]string{"T"}, 5},
		{[]string{"T.M"}, 1},
		{[]string{"F"}, 4},
		{[]string{"A", "T.N", "F"}, 6},
	} {
		got, err := countLines(path, tt.decls)
		require.NoError(t, err, "%v", tt.decls)
		assert.Equal(t, tt.want, got, "%v", tt.decls)
	}
	_, err := countLines(path, []string{"G"})
	assert.ErrorContains(t, err, "no declaration G")
}

// TestFastPathsCount: every fast path internal/fastpath can switch off is
// described, and its code, as the list names it, is in the repository.
func TestFastPathsCount(t *testing.T) {
	var names []string
	for _, p := range fastpath.All() {
		names = append(names, p.String())
	}
	var listed []string
	for _, f := range FastPaths {
		listed = append(listed, f.Name)
		assert.NotEmpty(t, f.Instead, f.Name)
		assert.NotEmpty(t, f.Code, f.Name)
	}
	require.Equal(t, names, listed, "FastPaths follows fastpath.All")

	counted, err := CountFastPaths("..", names)
	require.NoError(t, err)
	for _, f := range counted {
		assert.Greater(t, f.Lines, 20, "%s: lines of code", f.Name)
		t.Logf("%s: %d lines of code", f.Name, f.Lines)
	}
	_, err = CountFastPaths("..", []string{"bogus"})
	assert.ErrorContains(t, err, `no fast path "bogus"`)
}

func TestParseFastPaths(t *testing.T) {
	got, err := ParseFastPaths("")
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = ParseFastPaths("createonly, verdicts")
	require.NoError(t, err)
	assert.Equal(t, []string{"verdicts", "createonly"}, got, "in the order of FastPaths")
	got, err = ParseFastPaths("all")
	require.NoError(t, err)
	assert.Equal(t, []string{"statuspatch", "verdicts", "intern", "createonly"}, got)
	_, err = ParseFastPaths("verdict")
	assert.ErrorContains(t, err, `unknown fast path "verdict"`)
}
