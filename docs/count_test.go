package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// comparedPair is one row of docs/comparison.md: the same operator with
// the kit and with plain controller-runtime, counted by countLines.
type comparedPair struct {
	row        string   // the row's first cell
	kit, plain []string // files, relative to this package
	leaveOut   []string // declarations of the plain side that are not counted
}

var comparedPairs = []comparedPair{
	{
		row:   "WebApp",
		kit:   []string{"../examples/webapp/internal/controller/webapp.go", "../examples/webapp/internal/controller/caches.go"},
		plain: []string{"../bench/idiomatic/idiomatic.go"},
		// The route registry (registry.go on the kit's side) and the
		// process wiring (the kit's is main.go).
		leaveOut: []string{"Registry", "ConfigMapRegistry", "ShardedConfigMapRegistry", "registryKey", "registryValue",
			"RegistryName", "RegistryShardLabel", "NewScheme", "RunOptions", "Run"},
	},
	{
		row:   "getting-started `Cache`",
		kit:   []string{"getting-started/internal/controller/cache.go"},
		plain: []string{"compare/cacheoperator/cache.go"},
	},
}

// TestComparisonCounts recounts both sides of every pair in
// docs/comparison.md and fails when the page's "now" numbers or ratio are
// not what the files say.
func TestComparisonCounts(t *testing.T) {
	page, err := os.ReadFile("comparison.md")
	require.NoError(t, err)
	for _, p := range comparedPairs {
		kit, plain := countLines(t, nil, p.kit...), countLines(t, p.leaveOut, p.plain...)
		// | row | before → now | plain | ratio before → ratio now |
		re := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(p.row) + ` \| \d+ → (\d+) \| (\d+) \| [\d.]+× → ([\d.]+)× \|`)
		m := re.FindStringSubmatch(string(page))
		require.NotNil(t, m, "comparison.md has no row %q in the expected form", p.row)
		assert.Equal(t, strconv.Itoa(kit), m[1], "%s: lines with the kit", p.row)
		assert.Equal(t, strconv.Itoa(plain), m[2], "%s: lines with plain controller-runtime", p.row)
		assert.Equal(t, fmt.Sprintf("%.2f", float64(kit)/float64(plain)), m[3], "%s: ratio", p.row)
	}
}

// countLines counts the lines of the Go files that hold code: lines with
// a token outside comments (blank lines and comment-only lines do not
// count; the package clause and imports do). Declarations named in
// leaveOut (a function, a type with its methods, one const, var or type of
// a block) are not counted, with their doc comments, and neither are the
// imports only they use.
func countLines(t *testing.T, leaveOut []string, files ...string) int {
	t.Helper()
	skip := map[string]bool{}
	for _, n := range leaveOut {
		skip[n] = true
	}
	seen := map[string]bool{}
	n := 0
	for _, path := range files {
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		require.NoError(t, err)
		tf := fset.File(f.Pos())
		left := map[int]bool{} // lines not counted
		leave := func(from, to ast.Node) {
			for l := tf.Line(from.Pos()); l <= tf.Line(to.End()); l++ {
				left[l] = true
			}
		}
		var counted []ast.Node
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if name := funcOwner(d); skip[name] {
					seen[name] = true
					leave(firstOf(d.Doc, d), d)
					continue
				}
				counted = append(counted, d)
			case *ast.GenDecl:
				if d.Tok == token.IMPORT {
					continue
				}
				kept := 0
				for _, s := range d.Specs {
					if name := specName(s); skip[name] {
						seen[name] = true
						leave(firstOf(specDoc(s), s), s)
						continue
					}
					kept++
					counted = append(counted, s)
				}
				if kept == 0 {
					leave(firstOf(d.Doc, d), d)
				}
			}
		}
		if len(skip) > 0 {
			used := map[string]bool{}
			for _, d := range counted {
				ast.Inspect(d, func(x ast.Node) bool {
					if sel, ok := x.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok {
							used[id.Name] = true
						}
					}
					return true
				})
			}
			for _, imp := range f.Imports {
				if !used[importName(imp)] {
					leave(imp, imp)
				}
			}
		}
		code := map[int]bool{}
		var s scanner.Scanner
		s.Init(tf, src, nil, 0) // comments are skipped
		for {
			pos, tok, lit := s.Scan()
			if tok == token.EOF {
				break
			}
			if tok == token.SEMICOLON && lit == "\n" {
				continue // inserted at a line's end: no code of its own
			}
			end := tf.Line(pos)
			if tok == token.STRING {
				end += strings.Count(lit, "\n") // a raw string's lines
			}
			for l := tf.Line(pos); l <= end; l++ {
				if !left[l] {
					code[l] = true
				}
			}
		}
		n += len(code)
	}
	for name := range skip {
		require.True(t, seen[name], "%s: no declaration %s to leave out", files, name)
	}
	return n
}

// funcOwner names a function, or for a method its receiver's type, so
// leaving a type out leaves its methods out.
func funcOwner(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) != 1 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return d.Name.Name
}

func specName(s ast.Spec) string {
	switch s := s.(type) {
	case *ast.TypeSpec:
		return s.Name.Name
	case *ast.ValueSpec:
		return s.Names[0].Name
	}
	return ""
}

func specDoc(s ast.Spec) *ast.CommentGroup {
	switch s := s.(type) {
	case *ast.TypeSpec:
		return s.Doc
	case *ast.ValueSpec:
		return s.Doc
	}
	return nil
}

// firstOf returns doc when there is one, else n: where a declaration with
// its doc comment starts.
func firstOf(doc *ast.CommentGroup, n ast.Node) ast.Node {
	if doc != nil {
		return doc
	}
	return n
}

// importName is the name an import is used by: its alias, or the last
// element of its path that is not a version.
func importName(imp *ast.ImportSpec) string {
	if imp.Name != nil {
		return imp.Name.Name
	}
	p, _ := strconv.Unquote(imp.Path.Value)
	base := filepath.Base(p)
	if regexp.MustCompile(`^v\d+`).MatchString(base) {
		return filepath.Base(filepath.Dir(p))
	}
	return base
}

// TestCountLines pins the counting rule on a small file.
func TestCountLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.go")
	require.NoError(t, os.WriteFile(path, []byte(`// Package x.
package x

import (
	"fmt"
	"strings"
)

// A is counted.
const (
	A = 1
	// B is left out.
	B = 2
)

/* a block
comment */
func F() string { return fmt.Sprint(A) }

// G is left out, and so is strings, which only it uses.
func G() string {
	return strings.ToUpper(`+"`"+`raw
string`+"`"+`)
}
`), 0o600))
	assert.Equal(t, 14, countLines(t, nil, path))
	// Left out: "strings", B, and G's four lines.
	assert.Equal(t, 8, countLines(t, []string{"B", "G"}, path))
}
