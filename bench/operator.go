package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Command builds the command line of an operator process that serves
// controller-runtime's metrics over plain HTTP on metricsAddr. The process
// gets KUBECONFIG in its environment.
type Command func(metricsAddr string) []string

// Operator is an operator running in a child process of its own (so that
// its RSS is its own), talking to the apiserver through a counting proxy.
type Operator struct {
	// Name labels the operator in the report.
	Name string
	// Counter counts every request the operator sent to the apiserver.
	Counter *Counter

	cmd        *exec.Cmd
	done       chan error
	proxy      *http.Server
	metricsURL string
	log        string
	// pprofURL is the operator's /debug/pprof/ (empty: not profiled).
	pprofURL string
	// scrapes counts the bench's reads of the metrics endpoint, whose own
	// CPU cost (ScrapeCPU each) is taken out of the phases' CPU figures.
	scrapes atomic.Int64
	// ScrapeCPU is the operator's CPU time per metrics scrape, and
	// ScrapeAlloc the bytes it allocates for one, measured by
	// CalibrateScrapes (0 until then).
	ScrapeCPU   time.Duration
	ScrapeAlloc int64
}

// StartOperator starts cmd with a kubeconfig that points at a counting
// proxy to upstream, and waits until its metrics endpoint answers. Its
// output goes to workDir/<name>.log. With profile set, the command line
// gets --pprof-bind-address (every operator here serves Go's pprof
// endpoints with it; see Operator.Profile). env ("NAME=value") is added to
// the process's environment.
func StartOperator(ctx context.Context, name string, cmd Command, upstream *rest.Config, workDir string, profile bool, env ...string) (*Operator, error) {
	op := &Operator{Name: name, Counter: NewCounter(), log: filepath.Join(workDir, name+".log")}
	target, err := url.Parse(upstream.Host)
	if err != nil || target.Host == "" {
		return nil, fmt.Errorf("apiserver address %q: not a URL", upstream.Host)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("apiserver transport: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	op.proxy = &http.Server{Handler: NewProxy(target, transport, op.Counter), ReadHeaderTimeout: time.Minute}
	go func() { _ = op.proxy.Serve(ln) }()

	kubeconfig := filepath.Join(workDir, name+".kubeconfig")
	if err := writeKubeconfig(kubeconfig, "http://"+ln.Addr().String()); err != nil {
		_ = op.proxy.Close()
		return nil, err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		_ = op.proxy.Close()
		return nil, err
	}
	op.metricsURL = "http://" + metricsAddr + "/metrics"

	logFile, err := os.Create(op.log)
	if err != nil {
		_ = op.proxy.Close()
		return nil, err
	}
	defer logFile.Close()
	argv := cmd(metricsAddr)
	if profile {
		pprofAddr, err := freeAddr()
		if err != nil {
			_ = op.proxy.Close()
			return nil, err
		}
		argv = append(argv, "--pprof-bind-address="+pprofAddr)
		op.pprofURL = "http://" + pprofAddr + "/debug/pprof/"
	}
	op.cmd = exec.Command(argv[0], argv[1:]...)
	op.cmd.Env = append(append(os.Environ(), env...), "KUBECONFIG="+kubeconfig)
	if profile {
		op.cmd.Env = append(op.cmd.Env, "GODEBUG="+profiledGODEBUG(os.Getenv("GODEBUG")))
	}
	op.cmd.Stdout, op.cmd.Stderr = logFile, logFile
	if err := op.cmd.Start(); err != nil {
		_ = op.proxy.Close()
		return nil, fmt.Errorf("starting %s operator: %w", name, err)
	}
	op.done = make(chan error, 1)
	go func() { op.done <- op.cmd.Wait() }()

	err = poll(ctx, time.Minute, func() (bool, error) {
		select {
		case err := <-op.done:
			op.done <- err
			return false, fmt.Errorf("%s operator exited: %v; see %s", name, err, op.log)
		default:
		}
		_, err := scrapeOperator(ctx, op.metricsURL)
		return err == nil, nil
	})
	if err != nil {
		op.Stop()
		return nil, err
	}
	return op, nil
}

// Stats scrapes the operator's metrics.
func (op *Operator) Stats(ctx context.Context) (OperatorStats, error) {
	op.scrapes.Add(1)
	return scrapeOperator(ctx, op.metricsURL)
}

// Pid is the operator process's id.
func (op *Operator) Pid() int { return op.cmd.Process.Pid }

// CPUReading is the operator's CPU time at one point, with the number of
// metrics scrapes so far.
type CPUReading struct {
	CPU     time.Duration
	Scrapes int64
}

// ReadCPU reads the operator's user+sys CPU time from /proc.
func (op *Operator) ReadCPU() (CPUReading, error) {
	scrapes := op.scrapes.Load()
	cpu, err := ProcessCPU(op.Pid())
	return CPUReading{CPU: cpu, Scrapes: scrapes}, err
}

// CPUSince is the operator's CPU time since before, less the measured cost
// of the bench's metrics scrapes in between (never below 0).
func (op *Operator) CPUSince(before CPUReading) (CPUReading, error) {
	now, err := op.ReadCPU()
	if err != nil {
		return CPUReading{}, err
	}
	d := CPUReading{CPU: now.CPU - before.CPU, Scrapes: now.Scrapes - before.Scrapes}
	d.CPU = max(0, d.CPU-time.Duration(d.Scrapes)*op.ScrapeCPU)
	return d, nil
}

// CalibrateScrapes measures what one metrics scrape costs the idle
// operator: n scrapes in a row (n ≥ 2), the CPU they took divided by n
// (idle time included, which is what a phase's scrapes come with too),
// and the bytes allocated between the first and the last, divided by the
// n-1 scrapes in between (each reading falls inside a scrape).
func (op *Operator) CalibrateScrapes(ctx context.Context, n int) error {
	before, err := op.ReadCPU()
	if err != nil {
		return err
	}
	var first, last OperatorStats
	for i := range n {
		if last, err = op.Stats(ctx); err != nil {
			return err
		}
		if i == 0 {
			first = last
		}
	}
	after, err := op.ReadCPU()
	if err != nil {
		return err
	}
	op.ScrapeCPU = (after.CPU - before.CPU) / time.Duration(n)
	op.ScrapeAlloc = int64(last.HeapAllocs-first.HeapAllocs) / int64(max(n-1, 1))
	return nil
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports (the kernel's ABI, whatever HZ it
// was built with).
const clockTick = 10 * time.Millisecond

// ProcessCPU is the user+sys CPU time of process pid, all threads, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 10ms).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime+stime out of a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself, so the fields are counted after its last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime (14) and stime (15) are f[11], f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command name, want at least 13", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: CPU time %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}

// RSS is the operator process's resident set size (VmRSS), in bytes.
func (op *Operator) RSS() (int64, error) {
	return vmRSS(op.cmd.Process.Pid)
}

// WaitQuiet waits until the operator has run at least minReconciles
// reconciles in total, its queues are empty, nothing is running, no
// request is in flight, and neither its reconcile count nor its request
// count has moved for quietFor. observe, unless nil, sees every reading.
func (op *Operator) WaitQuiet(ctx context.Context, minReconciles float64, quietFor, timeout time.Duration, observe func(OperatorStats)) (OperatorStats, error) {
	var last OperatorStats
	lastRequests := -1
	var since time.Time
	err := poll(ctx, timeout, func() (bool, error) {
		select {
		case err := <-op.done:
			op.done <- err
			return false, fmt.Errorf("%s operator exited: %v; see %s", op.Name, err, op.log)
		default:
		}
		s, err := op.Stats(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // metrics not served yet: poll again
		}
		if observe != nil {
			observe(s)
		}
		requests := op.Counter.Snapshot().Without("leases").Total() // a sharded replica renews its Lease every 2 s
		if s.Busy > 0 || op.Counter.InFlight() > 0 || s.Reconciles < minReconciles || s.Reconciles != last.Reconciles || requests != lastRequests {
			last, lastRequests, since = s, requests, time.Now()
			return false, nil
		}
		return time.Since(since) >= quietFor, nil
	})
	if err != nil {
		return last, fmt.Errorf("waiting for the %s operator to go quiet (%.0f reconciles, want at least %.0f): %w",
			op.Name, last.Reconciles, minReconciles, err)
	}
	return last, nil
}

// Memory is an operator's memory at one point.
type Memory struct {
	// HeapLive is the heap marked live by a GC cycle that completed after
	// the measurement started (or the last one, when GCObserved is false).
	HeapLive int64
	// RSS is the process's VmRSS right after that GC.
	RSS int64
	// GCObserved reports whether a GC cycle completed within the wait.
	GCObserved bool
}

// Memory waits (at most gcWait) for the Go runtime to complete a GC cycle,
// which it forces at least every two minutes, then reads the heap that
// cycle found live and the RSS. Waiting for the runtime's own cycle keeps
// the operator's code untouched: no hook has to force one.
func (op *Operator) Memory(ctx context.Context, gcWait time.Duration) (Memory, error) {
	start, err := op.Stats(ctx)
	if err != nil {
		return Memory{}, err
	}
	var now OperatorStats
	observed := false
	if gcWait > 0 {
		err = poll(ctx, gcWait, func() (bool, error) {
			s, err := op.Stats(ctx)
			if err != nil {
				return false, err
			}
			now = s
			return s.GCCycles > start.GCCycles, nil
		})
		observed = err == nil
		if err != nil && !wait.Interrupted(err) {
			return Memory{}, err
		}
	}
	if !observed {
		now = start
	}
	rss, err := op.RSS()
	if err != nil {
		return Memory{}, err
	}
	return Memory{HeapLive: int64(now.HeapLive), RSS: rss, GCObserved: observed}, nil
}

// Stop terminates the operator (SIGTERM, then SIGKILL after 30s) and its
// proxy.
func (op *Operator) Stop() {
	if op.cmd != nil && op.cmd.Process != nil {
		_ = op.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-op.done:
			_ = err // the exit status of a stopped operator is not interesting
		case <-time.After(30 * time.Second):
			_ = op.cmd.Process.Kill()
			err := <-op.done
			_ = err
		}
	}
	_ = op.proxy.Close()
}

func writeKubeconfig(path, server string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: server}
	cfg.AuthInfos["bench"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	cfg.CurrentContext = "bench"
	return clientcmd.WriteToFile(*cfg, path)
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parsing VmRSS of pid %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS in /proc/%d/status", pid, pid)
}

// poll calls cond every 250ms (at once first) until it returns true or an
// error, ctx is done, or timeout elapses; wait.Interrupted(err) tells the
// last two apart from cond's errors.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	return pollEvery(ctx, 250*time.Millisecond, timeout, cond)
}

func pollEvery(ctx context.Context, interval, timeout time.Duration, cond func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, interval, timeout, true,
		func(context.Context) (bool, error) { return cond() })
}

// profileChunk is the length of each CPU profile Profile takes: the phase's
// profile is the chunks together (`go tool pprof` merges the files it is
// given); the last one runs up to this long past the phase's end.
const profileChunk = 5 * time.Second

// Profile writes pprof profiles of the operator to dir/<name>-<label>-*.pprof
// until ctx is done: CPU profiles back to back and, when ctx ends, the heap.
// It does nothing for an operator started without profile. Profiling costs
// the operator CPU, so the figures of a profiled run are not reported.
func (op *Operator) Profile(ctx context.Context, dir, label string) <-chan error {
	done := make(chan error, 1)
	if op.pprofURL == "" {
		done <- nil
		return done
	}
	go func() {
		var errs []error
		// Each chunk runs to its end, even past the phase's (Go's handler
		// writes the profile only then, and holds the profiler until it
		// has): a cut-off chunk would be lost, and the next phase's first
		// request refused.
		for i := 0; ctx.Err() == nil; i++ {
			file := filepath.Join(dir, fmt.Sprintf("%s-%s-cpu-%03d.pprof", op.Name, label, i))
			cctx, cancel := context.WithTimeout(context.Background(), profileChunk+time.Minute)
			err := fetchTo(cctx, op.pprofURL+fmt.Sprintf("profile?seconds=%d", int(profileChunk.Seconds())), file)
			cancel()
			if err != nil {
				errs = append(errs, err)
				break
			}
		}
		// The heap once the phase is over, after a forced GC (gc=1).
		hctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		errs = append(errs, fetchTo(hctx, op.pprofURL+"heap?gc=1", filepath.Join(dir, fmt.Sprintf("%s-%s-heap.pprof", op.Name, label))))
		done <- errors.Join(errs...)
	}()
	return done
}

// fetchTo writes the body of GET url to file; a request cut off by ctx
// leaves no file.
func fetchTo(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return os.WriteFile(file, b, 0o644)
}

// profiledMemRate is the heap sampling rate of a profiled operator: Go's
// default (one sample per 512 KiB) cannot tell apart two operators whose
// heaps differ by a MiB; one per 4 KiB can, for a few percent of CPU.
const profiledMemRate = 4096

// profiledGODEBUG returns godebug with the profiled heap sampling rate
// added, unless it already sets one.
func profiledGODEBUG(godebug string) string {
	if strings.Contains(godebug, "memprofilerate=") {
		return godebug
	}
	rate := fmt.Sprintf("memprofilerate=%d", profiledMemRate)
	if godebug == "" {
		return rate
	}
	return godebug + "," + rate
}
