package bench

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"strings"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// A fast path stays only where it pays: each is code the library runs in
// place of an upstream route, more code to trust, so the bench measures
// what each saves (-fastpaths: the reconcilekit operator once more per
// fast path, with that one switched off through fastpath.Env) against how
// much code it is.

// FastPath is one of the library's fast paths, as the report describes
// it: what it does instead of the upstream route, and the code only it
// needs, which would go with it.
type FastPath struct {
	// Name is its name in fastpath.Env and in -fastpaths.
	Name string
	// Instead says what it does, and what the upstream route does.
	Instead string
	// Code is the code only it needs: whole files, or declarations of
	// one. The branch on its switch and the lines at its call sites are
	// not counted.
	Code []Code
	// Lines counts the lines of Code that hold code (countLines); 0
	// until CountFastPaths counts them.
	Lines int `json:",omitempty"`
}

// Code is code of the repository: a file, relative to the repository's
// root, or only its declarations named in Decls: a function, a type with
// its methods ("T"), one method ("T.M"), or one const, var or type.
type Code struct {
	File  string
	Decls []string `json:",omitempty"`
}

// String names c as the report lists it.
func (c Code) String() string {
	if len(c.Decls) == 0 {
		return "`" + c.File + "`"
	}
	return "`" + c.File + "`: " + strings.Join(c.Decls, ", ")
}

// FastPaths are the fast paths -fastpaths can switch off, in the order of
// fastpath.All.
var FastPaths = []FastPath{
	{
		Name: "statuspatch",
		Instead: "the status write builds the JSON merge patch of the status alone, instead of client.MergeFrom's of the " +
			"whole object (deep copies, metadata and spec encoded and diffed too)",
		Code: []Code{{File: "reconciler/status.go", Decls: []string{"statusPatch", "statusJSON", "statusField"}}},
	},
	{
		Name: "verdicts",
		Instead: "Apply trusts an object it found matching, at the same resourceVersion (or, status writes aside, the same " +
			"generation and metadata), instead of comparing it with the configuration again",
		Code: []Code{{File: "ownership/verdicts.go"}, {File: "ownership/desired.go", Decls: []string{"desiredObject.setsControllerAnnotation"}}},
	},
	{
		Name: "intern",
		Instead: "the informer cache holds the strings and resource lists its objects repeat once, instead of one copy " +
			"per object",
		Code: []Code{{File: "reconciler/intern.go"}, {File: "reconciler/intern_kinds.go"}},
	},
	{
		Name: "createonly",
		Instead: "where the cache has no object, a create-only apply (a resourceVersion no object has), instead of a read " +
			"from the API server and a plain apply",
		Code: []Code{{File: "ownership/uncached.go"}, {File: "ownership/write.go", Decls: []string{"createOnly", "Applier.refusedButExists"}},
			{File: "ownership/desired.go", Decls: []string{"desiredObject.id"}}},
	},
}

// ParseFastPaths reads -fastpaths: fast path names, comma-separated, or
// "all", in the order of FastPaths.
func ParseFastPaths(s string) ([]string, error) {
	if strings.TrimSpace(s) == "all" {
		s = fastpath.Path(^uint32(0)).String()
	}
	set, err := fastpath.Parse(s)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, f := range FastPaths {
		if p, _ := fastpath.Parse(f.Name); set&p != 0 {
			names = append(names, f.Name)
		}
	}
	return names, nil
}

// CountFastPaths returns the FastPaths named, their Lines counted in the
// repository at repo.
func CountFastPaths(repo string, names []string) ([]FastPath, error) {
	var out []FastPath
	for _, name := range names {
		i := -1
		for j, f := range FastPaths {
			if f.Name == name {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("no fast path %q", name)
		}
		f := FastPaths[i]
		for _, c := range f.Code {
			n, err := countLines(filepath.Join(repo, c.File), c.Decls)
			if err != nil {
				return nil, fmt.Errorf("fast path %s: %w", name, err)
			}
			f.Lines += n
		}
		out = append(out, f)
	}
	return out, nil
}

// countLines counts the lines of the Go file at path that hold code (a
// token outside comments: blank lines and comments do not count), in the
// whole file, or in the declarations named in decls (see Code). A name
// that declares nothing is an error, so the list follows the code.
func countLines(path string, decls []string) (int, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return 0, err
	}
	tf := fset.File(f.Pos())
	counted := func(int) bool { return true }
	if len(decls) > 0 {
		lines, err := declLines(tf, f, decls)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		counted = func(l int) bool { return lines[l] }
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
			if counted(l) {
				code[l] = true
			}
		}
	}
	return len(code), nil
}

// declLines returns the lines of f's declarations named in decls.
func declLines(tf *token.File, f *ast.File, decls []string) (map[int]bool, error) {
	want := map[string]bool{}
	for _, d := range decls {
		want[d] = true
	}
	found := map[string]bool{}
	lines := map[int]bool{}
	take := func(name string, n ast.Node) {
		found[name] = true
		for l := tf.Line(n.Pos()); l <= tf.Line(n.End()); l++ {
			lines[l] = true
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			names := []string{d.Name.Name}
			if recv := receiver(d); recv != "" {
				names = []string{recv, recv + "." + d.Name.Name}
			}
			for _, name := range names {
				if want[name] {
					take(name, d)
				}
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				var node ast.Node = spec
				if !d.Lparen.IsValid() {
					node = d // one spec, on the keyword's line
				}
				for _, name := range specNames(spec) {
					if want[name] {
						take(name, node)
					}
				}
			}
		}
	}
	for _, d := range decls {
		if !found[d] {
			return nil, fmt.Errorf("no declaration %s", d)
		}
	}
	return lines, nil
}

// receiver names a method's receiver type ("" for a function).
func receiver(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) != 1 {
		return ""
	}
	t := d.Recv.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok { // a generic type's method
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func specNames(s ast.Spec) []string {
	switch s := s.(type) {
	case *ast.TypeSpec:
		return []string{s.Name.Name}
	case *ast.ValueSpec:
		var names []string
		for _, n := range s.Names {
			names = append(names, n.Name)
		}
		return names
	}
	return nil
}
