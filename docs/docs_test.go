package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = ".."

// rooted describes a page whose snippets come from a module of their own:
// marker paths are relative to dir, the reader's module path module stands
// for the compiled copy's path target, and every hand-written file under dir
// must be shown whole (see TestGettingStartedShowsEveryLine).
type rooted struct {
	dir, module, target string
}

var (
	// guide is the Cache operator the guide's chapters build, a whole file at
	// a time, in the quickstart's directory.
	guide = rooted{
		dir:    "getting-started",
		module: "example.com/cache-operator",
		target: "github.com/reconcilekit/reconcilekit/docs/getting-started",
	}
	quickstart = rooted{
		dir:    "quickstart",
		module: "example.com/cache-operator",
		target: "github.com/reconcilekit/reconcilekit/docs/quickstart",
	}
)

// rootedPages are the pages with a compiled copy: the quickstart, and the
// guide's chapters, which together show the guide's files.
var rootedPages = map[string]rooted{
	"quickstart.md":         quickstart,
	"guide/1-api-type.md":   guide,
	"guide/2-controller.md": guide,
	"guide/3-main.md":       guide,
	"guide/4-manifests.md":  guide,
	"guide/5-testing.md":    guide,
	"guide/6-running.md":    guide,
}

// walkedPages name, in their file blocks, files of a project that the page
// has a tool generate (a kubebuilder scaffold) and then edits: there is no
// such file in this repository to compare with. hack/docwalk.sh (make
// test-docs) checks them instead, by writing the blocks into the generated
// project and running its tests.
var walkedPages = map[string]bool{"adopting-kubebuilder.md": true}

// block is one fenced code block of a page.
type block struct {
	page string // path relative to docs/
	line int    // line of the opening fence
	lang string // first word of the info string
	file string // the marker's path, "" when the block has none
	body string // the lines after the marker, without the closing fence
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

// markerPrefix is how a block names its source file on its first line.
var markerPrefix = map[string]string{"go": "// file: ", "yaml": "# file: "}

// elision is the line that stands for omitted code inside a snippet.
var elision = map[string]string{"go": "// ...", "yaml": "# ..."}

func pages(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob("*.md")
	require.NoError(t, err)
	chapters, err := filepath.Glob("guide/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, names)
	return append(names, chapters...)
}

func blocks(t *testing.T, page string) []block {
	t.Helper()
	f, err := os.Open(page)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	var out []block
	var cur *block
	var body []string
	indent := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			// A fence may be indented (inside a list item); so are its lines.
			indent = line[:len(line)-len(trimmed)]
			lang, _, _ := strings.Cut(strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), " ")
			cur, body = &block{page: page, line: n, lang: lang}, nil
		case cur != nil && strings.TrimSpace(line) == "```":
			if p, ok := markerPrefix[cur.lang]; ok && len(body) > 0 && strings.HasPrefix(body[0], p) {
				cur.file, body = strings.TrimSpace(strings.TrimPrefix(body[0], p)), body[1:]
			}
			cur.body = strings.Join(body, "\n")
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, strings.TrimPrefix(line, indent))
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "%s: unterminated code block", page)
	return out
}

// source returns the path, relative to this package, of the file a block
// names, and the block's text as it appears in that file.
func source(b block) (path, text string) {
	if r, ok := rootedPages[b.page]; ok {
		return filepath.Join(r.dir, b.file), strings.ReplaceAll(b.body, r.module, r.target)
	}
	return filepath.Join(repoRoot, b.file), b.body
}

// TestSnippetsMatchCode fails when a Go block names no source file, or when
// a block that names one is not found in it verbatim (elided parts may be
// replaced by an elision line, "// ..." or "# ...").
func TestSnippetsMatchCode(t *testing.T) {
	checked := 0
	for _, page := range pages(t) {
		for _, b := range blocks(t, page) {
			if b.lang == "go" && b.file == "" {
				t.Errorf("%s: a go block must start with %q naming the file it is taken from", b, markerPrefix["go"]+"<path>")
				continue
			}
			if b.file == "" || walkedPages[page] {
				continue
			}
			path, text := source(b)
			content, err := os.ReadFile(path)
			if !assert.NoError(t, err, "%s: the block's file", b) {
				continue
			}
			checked++
			rest := string(content)
			for i, chunk := range chunks(text, elision[b.lang]) {
				at := strings.Index(rest, chunk)
				if at < 0 {
					t.Errorf("%s: part %d of the block is not in %s (verbatim, in order); the code or the page changed:\n%s",
						b, i+1, path, firstDifference(chunk, rest))
					break
				}
				rest = rest[at+len(chunk):]
			}
		}
	}
	assert.NotZero(t, checked, "no block names a file")
}

// chunks splits text at elision lines, dropping empty parts.
func chunks(text, elisionLine string) []string {
	var out []string
	var cur []string
	flush := func() {
		if s := strings.Trim(strings.Join(cur, "\n"), "\n"); s != "" {
			out = append(out, s)
		}
		cur = nil
	}
	for _, l := range strings.Split(text, "\n") {
		if elisionLine != "" && strings.TrimSpace(l) == elisionLine {
			flush()
			continue
		}
		cur = append(cur, l)
	}
	flush()
	return out
}

// firstDifference points at the first line of chunk that the file does not
// contain, to make a drift easy to find.
func firstDifference(chunk, content string) string {
	lines := strings.Split(chunk, "\n")
	for i := range lines {
		if !strings.Contains(content, strings.Join(lines[:i+1], "\n")) {
			return fmt.Sprintf("  first differing line %d: %q", i+1, lines[i])
		}
	}
	return "  (every line is present, but not contiguously)"
}

// TestGettingStartedShowsEveryLine fails unless the blocks naming a
// hand-written file of a rooted page's module (the quickstart's, or the
// guide's across its chapters), joined in page order with one blank line
// between them, are exactly that file: a reader who copies the blocks gets
// the code this repository compiles and tests. Generated files (deepcopy,
// CRD, RBAC) are not shown whole; readers generate them.
func TestGettingStartedShowsEveryLine(t *testing.T) {
	var names []string
	for page := range rootedPages {
		names = append(names, page)
	}
	slices.Sort(names) // page order: the chapters are numbered
	for _, r := range []rooted{quickstart, guide} {
		shown := map[string][]string{}
		var from []string
		for _, page := range names {
			if rootedPages[page] != r {
				continue
			}
			from = append(from, page)
			for _, b := range blocks(t, page) {
				if b.file != "" {
					path, text := source(b)
					shown[path] = append(shown[path], text)
				}
			}
		}
		var written []string
		require.NoError(t, filepath.WalkDir(r.dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			generated := strings.HasPrefix(d.Name(), "zz_generated") ||
				strings.Contains(path, filepath.Join("config", "crd")) || strings.Contains(path, filepath.Join("config", "rbac"))
			if !generated {
				written = append(written, path)
			}
			return nil
		}))
		require.NotEmpty(t, written)
		for _, path := range written {
			content, err := os.ReadFile(path)
			require.NoError(t, err)
			parts, ok := shown[path]
			if !ok {
				t.Errorf("%s: %s is not shown; add its code with a %q line", from, path, markerPrefix["go"]+strings.TrimPrefix(path, r.dir+"/"))
				continue
			}
			if got, want := strings.Join(parts, "\n\n"), strings.TrimRight(string(content), "\n"); got != want {
				t.Errorf("%s: the blocks for %s, joined with blank lines, must be the whole file:\n%s", from, path, lineDiff(want, got))
			}
		}
	}
}

// lineDiff names the first line where got differs from want.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			return fmt.Sprintf("  line %d: file has %q, blocks have %q", i+1, wl, gl)
		}
	}
	return ""
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinks fails on a relative link to a file that does not exist, or to
// a heading (#anchor) that a Markdown file does not have.
func TestLinks(t *testing.T) {
	for _, page := range append(pages(t), filepath.Join(repoRoot, "README.md")) {
		content, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(string(content), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: broken link %q: %v", page, target, err)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !slices.Contains(anchors(t, path), anchor) {
				t.Errorf("%s: link %q: %s has no heading with that anchor", page, target, path)
			}
		}
	}
}

// anchors returns the GitHub anchors of a Markdown file's headings:
// lower case, punctuation dropped, spaces turned into hyphens.
func anchors(t *testing.T, path string) []string {
	t.Helper()
	content, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	inCode := false
	for _, line := range strings.Split(string(content), "\n") {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}

// TestIndexListsEveryPage fails when a page is not linked from README.md.
func TestIndexListsEveryPage(t *testing.T) {
	index, err := os.ReadFile("README.md")
	require.NoError(t, err)
	var linked []string
	for _, m := range link.FindAllStringSubmatch(string(index), -1) {
		linked = append(linked, strings.SplitN(m[1], "#", 2)[0])
	}
	for _, page := range pages(t) {
		if page != "README.md" && !slices.Contains(linked, page) {
			t.Errorf("README.md does not link %s", page)
		}
	}
}
