package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
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
	Package string // import path relative to the module, e.g. "./conditions"
	Name    string // BenchmarkX
}

// MicroBenchmarks are the hot paths `make bench` reports: what a converged
// operator runs on every pass instead of writing, and the baseline's
// counterpart for the condition helper.
var MicroBenchmarks = []MicroBenchmark{
	{"./conditions", "BenchmarkSetNoChange"},
	{"./ownership", "BenchmarkUnchanged"},
	{"./reconciler", "BenchmarkStatusChangedNoChange"},
	{"./bench", "BenchmarkMetaSetStatusConditionNoChange"},
}

// RunMicro runs the benchmarks with `go test -short -bench -benchmem` in
// the module at dir (-short keeps envtest from starting) and parses their
// results.
func RunMicro(ctx context.Context, dir string, benchmarks []MicroBenchmark) ([]Micro, error) {
	names := make([]string, 0, len(benchmarks))
	pkgs := []string{}
	for _, b := range benchmarks {
		names = append(names, b.Name)
		if !slices.Contains(pkgs, b.Package) {
			pkgs = append(pkgs, b.Package)
		}
	}
	args := append([]string{"test", "-short", "-count=1", "-run=^$", "-benchmem",
		"-bench=^(" + strings.Join(names, "|") + ")$"}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	res := ParseBenchOutput(out.String())
	if len(res) != len(benchmarks) {
		return res, fmt.Errorf("go %s: %d results for %d benchmarks:\n%s", strings.Join(args, " "), len(res), len(benchmarks), out.String())
	}
	return res, nil
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
