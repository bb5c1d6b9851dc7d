package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Micro is one `go test -bench -benchmem` result.
type Micro struct {
	Package, Name               string
	NsPerOp, BytesPerOp, Allocs float64
}

// MicroBenchmark names a benchmark of the repository's hot pure paths.
type MicroBenchmark struct {
	Package string // directory relative to the repository root, e.g. "./conditions"
	Name    string // BenchmarkX
}

// MicroBenchmarks are the hot paths `make bench` reports: what a converged
// operator runs on every pass instead of writing, and the baseline's
// counterpart for the condition helper.
var MicroBenchmarks = []MicroBenchmark{
	{"./conditions", "BenchmarkSetNoChange"},
	{"./ownership", "BenchmarkUnchanged"},
	{"./ownership", "BenchmarkApplyUnchanged"},
	{"./reconciler", "BenchmarkStatusChangedNoChange"},
	{"./bench", "BenchmarkMetaSetStatusConditionNoChange"},
}

// RunMicro runs the benchmarks with `go test -short -bench -benchmem`
// (-short keeps envtest from starting) and parses their results. dir is the
// repository root; each package is run in the module that holds it (the
// library's, or a nested one such as bench/go.mod), one `go test` per module.
func RunMicro(ctx context.Context, dir string, benchmarks []MicroBenchmark) ([]Micro, error) {
	type run struct{ names, pkgs []string }
	var modules []string
	runs := map[string]*run{}
	for _, b := range benchmarks {
		mod, pkg := moduleOf(dir, b.Package)
		r, ok := runs[mod]
		if !ok {
			r = &run{}
			runs[mod] = r
			modules = append(modules, mod)
		}
		r.names = append(r.names, b.Name)
		if !slices.Contains(r.pkgs, pkg) {
			r.pkgs = append(r.pkgs, pkg)
		}
	}
	var res []Micro
	for _, mod := range modules {
		r := runs[mod]
		args := append([]string{"test", "-short", "-count=1", "-run=^$", "-benchmem",
			"-bench=^(" + strings.Join(r.names, "|") + ")$"}, r.pkgs...)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = filepath.Join(dir, mod)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("(cd %s && go %s): %w\n%s", mod, strings.Join(args, " "), err, out.String())
		}
		got := ParseBenchOutput(out.String())
		if len(got) != len(r.names) {
			return append(res, got...), fmt.Errorf("(cd %s && go %s): %d results for %d benchmarks:\n%s",
				mod, strings.Join(args, " "), len(got), len(r.names), out.String())
		}
		res = append(res, got...)
	}
	return res, nil
}

// moduleOf splits pkg, a path relative to the repository root dir
// ("./bench"), into the directory of the module that holds it, relative to
// dir ("bench", or "." for the library), and the package's path relative to
// that module (".").
func moduleOf(dir, pkg string) (mod, rel string) {
	p := filepath.Clean(filepath.FromSlash(pkg))
	for d := p; d != "." && d != string(filepath.Separator); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(dir, d, "go.mod")); err == nil {
			r, _ := filepath.Rel(d, p)
			if r == "." {
				return d, "."
			}
			return d, "./" + filepath.ToSlash(r)
		}
	}
	return ".", "./" + filepath.ToSlash(p)
}

// ParseBenchOutput reads the result lines of `go test -bench -benchmem`
// output ("BenchmarkX-2  880696  1263 ns/op  0 B/op  0 allocs/op"),
// attributing each to the preceding "pkg:" line. The -GOMAXPROCS suffix is
// dropped from names.
func ParseBenchOutput(out string) []Micro {
	var res []Micro
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		m := Micro{Package: pkg, Name: f[0]}
		if i := strings.LastIndexByte(m.Name, '-'); i > 0 {
			if _, err := strconv.Atoi(m.Name[i+1:]); err == nil {
				m.Name = m.Name[:i]
			}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				m.NsPerOp = v
			case "B/op":
				m.BytesPerOp = v
			case "allocs/op":
				m.Allocs = v
			}
		}
		res = append(res, m)
	}
	return res
}
