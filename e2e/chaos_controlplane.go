//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// controlPlaneComponent is one process of the kwok provider's cluster
// (kwokctl --runtime binary), e.g. kube-apiserver or etcd, which the chaos
// suite kills and starts again. kwokctl v0.8 has no command to stop or start
// a single component, so this does what its binary runtime does: the same
// command line, working directory and environment, output appended to the
// component's log, the pid in its pid file (so `kwokctl delete cluster` and
// `hack/cluster.sh down` still find it), detached in a session of its own.
type controlPlaneComponent struct {
	name    string
	workdir string // <repo>/.cluster/kwok/clusters/<cluster name>
}

// component returns the named component of the suite's kwok cluster; other
// providers have no such processes.
func (h *Harness) component(name string) (*controlPlaneComponent, error) {
	if h.opts.Provider != ProviderKwok {
		return nil, fmt.Errorf("restarting %s needs the kwok provider, not %s", name, h.opts.Provider)
	}
	return &controlPlaneComponent{name: name, workdir: filepath.Join(h.opts.RepoRoot, ".cluster", "kwok", "clusters", h.opts.ClusterName)}, nil
}

func (c *controlPlaneComponent) pidFile() string {
	return filepath.Join(c.workdir, "pids", c.name+".pid")
}

// processSpec is what it takes to start a process again as it was.
type processSpec struct {
	argv []string
	dir  string
	env  []string
}

// inspect returns the component's running process and how to start it
// again as it is.
func (c *controlPlaneComponent) inspect() (int, processSpec, error) {
	b, err := os.ReadFile(c.pidFile())
	if err != nil {
		return 0, processSpec{}, fmt.Errorf("%s: %w", c.name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, processSpec{}, fmt.Errorf("%s: pid file %s: %w", c.name, c.pidFile(), err)
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return 0, processSpec{}, fmt.Errorf("%s (pid %d): %w", c.name, pid, err)
	}
	spec := processSpec{argv: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")}
	// Never touch a process that is not this cluster's component.
	if len(spec.argv) == 0 || !strings.HasPrefix(spec.argv[0], c.workdir+"/") {
		return 0, processSpec{}, fmt.Errorf("%s: pid %d runs %q, not a binary of %s", c.name, pid, spec.argv, c.workdir)
	}
	if spec.dir, err = os.Readlink(proc + "/cwd"); err != nil {
		return 0, processSpec{}, fmt.Errorf("%s (pid %d): %w", c.name, pid, err)
	}
	environ, err := os.ReadFile(proc + "/environ")
	if err != nil {
		return 0, processSpec{}, fmt.Errorf("%s (pid %d): %w", c.name, pid, err)
	}
	spec.env = strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	return pid, spec, nil
}

// running says whether the process in the component's pid file is alive
// (not gone, not a zombie).
func (c *controlPlaneComponent) running() bool {
	b, err := os.ReadFile(c.pidFile())
	if err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
	if err != nil {
		return false
	}
	fields := bytes.Fields(stat)
	return len(fields) > 2 && string(fields[2]) != "Z"
}

// supervise restarts the named components whenever they exit, as a
// kubelet restarts static control-plane pods (kwokctl's binary runtime
// does not): kube-controller-manager and kube-scheduler exit on purpose
// when they lose their leader Lease, which an apiserver down for longer
// than their renew deadline makes them do. It returns after capturing
// every component's command line; stop ends the supervision and reports
// the restarts.
func (h *Harness) supervise(ctx context.Context, names ...string) (stop func() []string, err error) {
	type watched struct {
		c    *controlPlaneComponent
		spec processSpec
	}
	var ws []watched
	for _, n := range names {
		c, err := h.component(n)
		if err != nil {
			return nil, err
		}
		_, spec, err := c.inspect()
		if err != nil {
			return nil, err
		}
		ws = append(ws, watched{c, spec})
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan []string)
	go func() {
		var restarts []string
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, w := range ws {
				if w.c.running() {
					continue
				}
				if err := w.c.start(w.spec); err != nil {
					restarts = append(restarts, fmt.Sprintf("%s: restart failed: %v", w.c.name, err))
					continue
				}
				restarts = append(restarts, fmt.Sprintf("%s restarted at %s", w.c.name, time.Now().Format(time.TimeOnly)))
			}
			select {
			case <-ctx.Done():
				done <- restarts
				return
			case <-tick.C:
			}
		}
	}()
	return func() []string { cancel(); return <-done }, nil
}

// kill SIGKILLs the component and returns how to start it again, once
// the process is gone.
func (c *controlPlaneComponent) kill(ctx context.Context) (processSpec, error) {
	pid, spec, err := c.inspect()
	if err != nil {
		return processSpec{}, err
	}
	proc := fmt.Sprintf("/proc/%d", pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return processSpec{}, fmt.Errorf("killing %s (pid %d): %w", c.name, pid, err)
	}
	// Gone means reaped, or a zombie: either way its ports are free.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		stat, err := os.ReadFile(proc + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			return true, nil
		}
		fields := bytes.Fields(stat)
		return len(fields) > 2 && string(fields[2]) == "Z", nil
	})
	if err != nil {
		return processSpec{}, fmt.Errorf("%s (pid %d) survived SIGKILL: %w", c.name, pid, err)
	}
	return spec, nil
}

// start runs spec as the component again.
func (c *controlPlaneComponent) start(spec processSpec) error {
	logPath := filepath.Join(c.workdir, "logs", c.name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s log: %w", c.name, err)
	}
	defer log.Close() // the child has its own descriptor
	cmd := exec.Command(spec.argv[0], spec.argv[1:]...)
	cmd.Dir, cmd.Env = spec.dir, spec.env
	cmd.Stdout, cmd.Stderr = log, log
	// Detached like kwokctl's own: it belongs to the cluster, which
	// `hack/cluster.sh down` stops, not to this test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", c.name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it exits while we run
	if err := os.WriteFile(c.pidFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return fmt.Errorf("%s pid file: %w", c.name, err)
	}
	return nil
}

// restart kills the component and starts it again as it was.
func (c *controlPlaneComponent) restart(ctx context.Context) error {
	spec, err := c.kill(ctx)
	if err != nil {
		return err
	}
	return c.start(spec)
}
