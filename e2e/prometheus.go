//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// prometheusServer is Debian's Prometheus (hack/prometheus.sh installs it)
// run by the suite as a host process: its own config, data directory and
// port, listening on 127.0.0.1 only and scraping only 127.0.0.1 targets.
// It is not the package's service: nothing else on the host is touched.
type prometheusServer struct {
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// prometheusTarget is one scrape job: a loopback address and the file
// holding the bearer token Prometheus sends.
type prometheusTarget struct {
	job, address, tokenFile string
}

// prometheusBinary returns the prometheus server from hack/prometheus.sh,
// which installs the package when it is missing. missing is set, with why,
// when it cannot be installed (no Debian mirror, no root): the caller passes
// it to prereq.Missing, which skips outside CI and fails under CI=true.
func prometheusBinary(ctx context.Context, repoRoot string) (bin, missing string, err error) {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repoRoot, "hack", "prometheus.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 3 {
		return "", "Prometheus is not installed and hack/prometheus.sh cannot install it: " + strings.TrimSpace(stderr.String()), nil
	}
	if err != nil {
		return "", "", fmt.Errorf("hack/prometheus.sh: %w\n%s", err, stderr.String())
	}
	dir, err := lastLine(string(out))
	if err != nil {
		return "", "", fmt.Errorf("hack/prometheus.sh printed no bin dir: %w", err)
	}
	return filepath.Join(dir, "prometheus"), "", nil
}

// startPrometheus writes prometheus.yml (1s scrapes and rule evaluations,
// so an alert follows a change within seconds) and rules.yaml into dir and
// starts the server on a free loopback port.
func startPrometheus(ctx context.Context, bin, dir string, rules []byte, targets []prometheusTarget) (*prometheusServer, error) {
	var b strings.Builder
	b.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\nscrape_configs:\n")
	for _, t := range targets {
		host, _, err := splitHostPort(t.address)
		if err != nil || host != "127.0.0.1" {
			return nil, fmt.Errorf("scrape target %q: only 127.0.0.1 may be scraped", t.address)
		}
		// The operator serves metrics with a self-signed certificate.
		fmt.Fprintf(&b, "- job_name: %s\n  scheme: https\n  tls_config: {insecure_skip_verify: true}\n"+
			"  authorization: {credentials_file: %s}\n  static_configs: [{targets: [%q]}]\n", t.job, t.tokenFile, t.address)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(b.String()), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o600); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port),
	)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, and killed with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &prometheusServer{dir: dir, port: port, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, errors.New("prometheus exited")
		default:
		}
		return httpOK(ctx, http.DefaultClient, p.url("/-/ready")), nil
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("prometheus on 127.0.0.1:%d not ready: %w; end of its log:\n%s", port, err, tail(filepath.Join(dir, "prometheus.log"), 20))
	}
	return p, nil
}

func splitHostPort(address string) (string, string, error) {
	u, err := url.Parse("//" + address)
	if err != nil {
		return "", "", err
	}
	return u.Hostname(), u.Port(), nil
}

func (p *prometheusServer) url(path string) string {
	return "http://127.0.0.1:" + strconv.Itoa(p.port) + path
}

// stop ends the server (SIGTERM, then SIGKILL after 20s) and waits for it.
func (p *prometheusServer) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// api GETs an /api/v1 path and decodes its data field into out.
func (p *prometheusServer) api(ctx context.Context, path string, query url.Values, out any) error {
	u := p.url("/api/v1/" + path)
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("GET %s: HTTP %d: %w: %.200s", u, resp.StatusCode, err, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: %s: %s", u, env.Status, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// alerts returns the alerts Prometheus holds now, pending and firing.
func (p *prometheusServer) alerts(ctx context.Context) ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := p.api(ctx, "alerts", nil, &data)
	return data.Alerts, err
}

type promTarget struct {
	Labels    map[string]string `json:"labels"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

func (p *prometheusServer) targets(ctx context.Context) ([]promTarget, error) {
	var data struct {
		Active []promTarget `json:"activeTargets"`
	}
	err := p.api(ctx, "targets", nil, &data)
	return data.Active, err
}

// metricNames returns the names of every series Prometheus ingested from
// job.
func (p *prometheusServer) metricNames(ctx context.Context, job string) (map[string]bool, error) {
	var names []string
	if err := p.api(ctx, "label/__name__/values", url.Values{"match[]": {fmt.Sprintf("{job=%q}", job)}}, &names); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
	}
	return set, nil
}

// query evaluates expr now and returns how many samples it gave.
func (p *prometheusServer) query(ctx context.Context, expr string) (int, error) {
	var data struct {
		Result []json.RawMessage `json:"result"`
	}
	err := p.api(ctx, "query", url.Values{"query": {expr}}, &data)
	return len(data.Result), err
}
