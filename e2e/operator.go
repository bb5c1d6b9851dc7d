//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// operatorProcess is one webapp-operator running as a host process,
// authenticated with a ServiceAccount token (never admin credentials), as
// `make demo` runs it. Every address it binds is on 127.0.0.1.
//
// Guarantees:
//   - argv[0] is "webapp-operator-<name>", so the apiserver records this
//     instance's non-apply writes (the status patches, the finalizer
//     update) under the field manager "webapp-operator-<name>": client-go
//     derives the user agent, and the apiserver the manager of writes
//     without a fieldManager, from argv[0]. managedFields therefore show
//     which instance wrote an object.
//   - Output goes to its own log file; a restart appends to it and
//     [operatorProcess.logs] returns the current run's part only.
//   - The process dies with the test binary (Pdeathsig), so not even a
//     SIGKILLed `go test` leaves an operator running.
//
// Caveats: only one instance may serve webhooks at a time, on
// primaryWebhookPort, where the installed webhook configurations point.
type operatorProcess struct {
	name       string
	binary     string
	kubeconfig string
	namespace  string
	webhooks   bool
	// noLeaderElection runs the instance as a lone replica would, without
	// a Lease: a restarted process reconciles at once instead of waiting
	// out its killed predecessor's Lease (the chaos suite's crash loop).
	noLeaderElection bool
	// extraArgs are appended to the flags (the chaos suite asks for log
	// timestamps with sub-second precision).
	extraArgs []string
	// argv, when set, is the whole command line instead of the flags above
	// (the bundle test runs the CSV's container args); the ports below must
	// still name what it binds, and kubeconfig what it authenticates with.
	argv []string
	// env is added to the operator's environment (operatorEnv).
	env         []string
	webhookPort int
	probePort   int
	metricsPort int
	logPath     string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current run's process has exited
	logStart int64         // offset of the current run's output in logPath
}

// primaryWebhookPort is where the webhook configurations installed from
// config/local send admission requests: https://127.0.0.1:9443/..., as in
// `make demo`, unless E2E_WEBHOOK_PORT names another port, so that two
// suites (on two clusters) can run on one host at once.
var primaryWebhookPort = webhookPortFromEnv()

func webhookPortFromEnv() int {
	v := os.Getenv("E2E_WEBHOOK_PORT")
	if v == "" {
		return localWebhookPort
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		panic(fmt.Sprintf("E2E_WEBHOOK_PORT=%q: want a port number (1-65535)", v))
	}
	return p
}

// localWebhookPort is the port config/local's webhook configurations name.
const localWebhookPort = 9443

// readyTimeout bounds an operator's start: building its cache, and for the
// webhook instance issuing or loading its serving certificate.
const readyTimeout = 2 * time.Minute

// stopTimeout bounds a graceful stop; the manager's own graceful shutdown
// timeout is 30s.
const stopTimeout = 45 * time.Second

// argv0 is the instance's process name and so its field manager.
func (o *operatorProcess) argv0() string { return "webapp-operator-" + o.name }

func (o *operatorProcess) args() []string {
	if o.argv != nil {
		return append([]string(nil), o.argv...)
	}
	return append([]string{
		"--kubeconfig", o.kubeconfig,
		"--namespace", o.namespace,
		"--leader-elect=" + strconv.FormatBool(!o.noLeaderElection),
		"--enable-webhooks=" + strconv.FormatBool(o.webhooks),
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strconv.Itoa(o.webhookPort),
		"--webhook-cert-ips", "127.0.0.1",
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(o.probePort),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(o.metricsPort),
	}, o.extraArgs...)
}

// start runs the operator and waits until its /readyz answers 200 (for the
// webhook instance that includes serving a valid certificate). An operator
// that exits meanwhile is an error carrying the end of its log.
func (o *operatorProcess) start(ctx context.Context) error {
	cmd, exited, err := o.spawn()
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", o.probePort)
	httpClient := &http.Client{Timeout: 2 * time.Second}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if isClosed(exited) {
			return false, errors.New("exited")
		}
		return httpOK(ctx, httpClient, url), nil
	})
	if err != nil {
		o.kill()
		return fmt.Errorf("operator %s (pid %d) not ready at %s: %w; end of %s:\n%s",
			o.name, cmd.Process.Pid, url, err, o.logPath, tail(o.logPath, 30))
	}
	return nil
}

// spawn starts the process with its output appended to the log file.
func (o *operatorProcess) spawn() (*exec.Cmd, chan struct{}, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd != nil && !isClosed(o.exited) {
		return nil, nil, fmt.Errorf("operator %s: already running (pid %d)", o.name, o.cmd.Process.Pid)
	}
	for _, p := range []int{o.webhookPort, o.probePort, o.metricsPort} {
		if err := portFree(p); err != nil {
			return nil, nil, fmt.Errorf("operator %s: %w (is another webapp-operator running, e.g. `make demo`'s? `make cluster-down` stops it)", o.name, err)
		}
	}
	log, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("operator %s: log file: %w", o.name, err)
	}
	if o.logStart, err = log.Seek(0, io.SeekEnd); err != nil {
		_ = log.Close()
		return nil, nil, fmt.Errorf("operator %s: log file: %w", o.name, err)
	}
	cmd := exec.Command(o.binary, o.args()...)
	cmd.Args[0] = o.argv0()
	cmd.Env = append(operatorEnv(), o.env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group: a Ctrl-C in the terminal reaches only go
		// test, whose signal handler stops the operators in order.
		Setpgid: true,
		// Backstop for a test binary killed outright.
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, nil, fmt.Errorf("operator %s: starting %s: %w", o.name, o.binary, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status is in the log and irrelevant to callers
		_ = log.Close()
		close(exited)
	}()
	o.cmd, o.exited = cmd, exited
	return cmd, exited, nil
}

// stop sends SIGTERM and waits for a graceful exit (the leader releases
// its Lease); after stopTimeout it sends SIGKILL and reports that.
func (o *operatorProcess) stop() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil || isClosed(o.exited) {
		return nil
	}
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-o.exited:
		return nil
	case <-time.After(stopTimeout):
		o.killLocked()
		return fmt.Errorf("operator %s (pid %d) did not stop within %v of SIGTERM; killed", o.name, o.cmd.Process.Pid, stopTimeout)
	}
}

// kill sends SIGKILL, as a crashed node or an OOM kill would: no cleanup,
// the Lease is not released. It returns once the process is gone.
func (o *operatorProcess) kill() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.killLocked()
}

func (o *operatorProcess) killLocked() {
	if o.cmd == nil || isClosed(o.exited) {
		return
	}
	_ = o.cmd.Process.Kill()
	<-o.exited
}

// running reports whether the current run's process has not exited.
func (o *operatorProcess) running() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cmd != nil && !isClosed(o.exited)
}

// logs returns what the current (or last) run has written so far.
func (o *operatorProcess) logs() (string, error) {
	o.mu.Lock()
	start := o.logStart
	o.mu.Unlock()
	f, err := os.Open(o.logPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	return string(b), err
}

// httpOK reports whether GET url answers 200; not listening yet is false.
func httpOK(ctx context.Context, c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// operatorEnv is the test's environment without what would point the
// operator elsewhere than its --kubeconfig and --namespace flags.
func operatorEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "POD_NAMESPACE=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// Ports for the processes the suite stops and starts again on the same
// port (operators, Prometheus) come from [fixedPortMin, fixedPortMax): below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 and up by
// default), from which every outgoing connection on this machine takes its
// source port, so that none can hold the port while its process is stopped
// (a restart in chaos 5 failed with "address already in use" on a port the
// kernel had handed out with :0); and below kwokctl's ports, which it takes
// downwards from 32767.
const (
	fixedPortMin = 20000
	fixedPortMax = 30000
)

// freePort returns a port on 127.0.0.1 that is free now, from
// [fixedPortMin, fixedPortMax).
func freePort() (int, error) {
	for range 200 {
		port := fixedPortMin + rand.IntN(fixedPortMax-fixedPortMin)
		if portFree(port) == nil {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on 127.0.0.1 in [%d, %d) after 200 tries", fixedPortMin, fixedPortMax)
}

// portFree fails when something already listens on 127.0.0.1:port.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port 127.0.0.1:%d is taken: %w", port, err)
	}
	return l.Close()
}

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// tail returns the last n lines of the file at path, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", path, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
