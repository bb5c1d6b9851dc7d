//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// incarnation is one run of an operator process in a chaos scenario. Each
// has a name of its own, so its non-apply writes (status, finalizers) carry
// the field manager webapp-operator-<name>, and its own log file.
type incarnation struct {
	p       *operatorProcess
	started time.Time

	mu    sync.Mutex
	ended time.Time // when it was seen gone; zero while it runs
}

func (inc *incarnation) end() time.Time {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	return inc.ended
}

// leadStart is when the incarnation started its controllers (the log line
// controllersStarted), i.e. began to write as the leader; false if it never
// did. Chaos instances log with nanosecond timestamps.
func (inc *incarnation) leadStart() (time.Time, bool) {
	f, err := os.Open(inc.p.logPath)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), controllersStarted) {
			continue
		}
		var line struct {
			TS string `json:"ts"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if ts, err := time.Parse(time.RFC3339Nano, line.TS); err == nil {
			return ts, true
		}
	}
	return time.Time{}, false
}

// fleet runs the operator incarnations of one scenario and remembers them
// for the leader invariant and the restart count.
type fleet struct {
	prefix string

	mu   sync.Mutex
	incs []*incarnation
}

// chaosWorkers is the operator incarnations' --max-concurrent-reconciles.
const chaosWorkers = 4

// instanceOptions say how an incarnation runs.
type instanceOptions struct {
	role        string // part of the name: leader, standby, crash...
	webhooks    bool   // serve the webhooks on primaryWebhookPort (one instance at a time)
	leaderElect bool
	kubeconfig  string // default: the ServiceAccount's kubeconfig
	// sharding runs it as a sharded replica (--sharding) named after the
	// incarnation; proxy, when set, is its way to the apiserver, told the
	// incarnation's name (the sharding scenarios).
	sharding bool
	proxy    *faultProxy
	args     []string // more flags
}

// spawn starts a new incarnation and waits for its /readyz.
func (f *fleet) spawn(ctx context.Context, o instanceOptions) (*incarnation, error) {
	f.mu.Lock()
	name := fmt.Sprintf("%s-%s-%d", f.prefix, o.role, len(f.incs)+1)
	f.mu.Unlock()
	p, err := operator.newProcess(name, o.webhooks)
	if err != nil {
		return nil, err
	}
	p.noLeaderElection = !o.leaderElect
	// Four workers, as make bench runs it: with the default one, a pass
	// of some 0.5-1 s under this machine's load paces a scenario's
	// hundreds of WebApps by the operator's queue, not by the faults
	// (docs/reliability.md).
	p.extraArgs = []string{"--zap-time-encoding=rfc3339nano", fmt.Sprintf("--max-concurrent-reconciles=%d", chaosWorkers)}
	p.extraArgs = append(p.extraArgs, o.args...)
	if o.sharding {
		p.extraArgs = append(p.extraArgs, "--sharding", "--shard-identity="+name)
	}
	if o.kubeconfig != "" {
		p.kubeconfig = o.kubeconfig
	}
	if o.proxy != nil {
		o.proxy.setReplica(name)
		p.kubeconfig = filepath.Join(operator.workDir, name+".kubeconfig")
		if err := o.proxy.writeKubeconfig(operator.saKubeconfig, p.kubeconfig); err != nil {
			return nil, err
		}
	}
	inc := &incarnation{p: p, started: time.Now()}
	f.mu.Lock()
	f.incs = append(f.incs, inc)
	f.mu.Unlock()
	if err := p.start(ctx); err != nil {
		inc.markEnded()
		return nil, err
	}
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	go func() {
		<-exited
		inc.markEnded()
	}()
	return inc, nil
}

func (inc *incarnation) markEnded() {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if inc.ended.IsZero() {
		inc.ended = time.Now()
	}
}

// kill SIGKILLs the incarnation and returns once it is gone.
func (inc *incarnation) kill() {
	inc.p.kill()
	inc.markEnded()
}

// restarts counts the incarnations started to replace one that had ended
// (killed or exited); a standby started beside a leader is not one.
func (f *fleet) restarts() int {
	incs := f.all()
	n := 0
	for i, inc := range incs {
		for _, prev := range incs[:i] {
			if end := prev.end(); !end.IsZero() && !end.After(inc.started) {
				n++
				break
			}
		}
	}
	return n
}

// all lists the incarnations, in the order they were started.
func (f *fleet) all() []*incarnation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*incarnation(nil), f.incs...)
}

// checkLeaders is the invariant "no object was written by two leaders at
// once", as far as the API and the logs show it:
//   - leadership intervals do not overlap: an incarnation started its
//     controllers only after every earlier leader was gone (a leader
//     elector that handed the Lease to a second writer while the first
//     still ran would fail this);
//   - every write an incarnation made to a WebApp (its field manager in
//     managedFields, webapp-operator-<name> for the finalizer and
//     .../status for the status) is stamped inside its leadership interval.
//     managedFields times have a resolution of one second, hence the slack.
func (f *fleet) checkLeaders(apps []webappv1.WebApp) []string {
	type interval struct {
		name       string
		start, end time.Time
	}
	var ivs []interval
	byManager := map[string]interval{}
	for _, inc := range f.all() {
		start, ok := inc.leadStart()
		if !ok {
			continue
		}
		iv := interval{name: inc.p.name, start: start, end: inc.end()}
		ivs = append(ivs, iv)
		byManager[inc.p.argv0()] = iv
	}
	sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
	var out []string
	for i := 1; i < len(ivs); i++ {
		for _, prev := range ivs[:i] {
			if prev.end.IsZero() || prev.end.After(ivs[i].start) {
				out = append(out, fmt.Sprintf("two leaders: %s started its controllers at %s while %s (leading since %s) was still running (ended %s)",
					ivs[i].name, ivs[i].start.Format(time.RFC3339Nano), prev.name, prev.start.Format(time.RFC3339Nano), fmtEnd(prev.end)))
			}
		}
	}
	for i := range apps {
		for _, e := range apps[i].ManagedFields {
			iv, ok := byManager[e.Manager]
			if !ok || e.Time == nil {
				continue
			}
			at := e.Time.Time
			end := iv.end
			if end.IsZero() {
				end = time.Now()
			}
			if at.Before(iv.start.Truncate(time.Second)) || at.After(end.Add(time.Second)) {
				out = append(out, fmt.Sprintf("WebApp %s written by %s (%s) at %s, outside its leadership %s..%s",
					apps[i].Name, iv.name, e.Subresource, at.Format(time.RFC3339), iv.start.Format(time.RFC3339Nano), fmtEnd(iv.end)))
			}
		}
	}
	return out
}

func fmtEnd(t time.Time) string {
	if t.IsZero() {
		return "still running"
	}
	return t.Format(time.RFC3339Nano)
}

// supervisor keeps one incarnation running, as a kubelet restarts a
// crashed container: whenever the current one exits (a lost Lease makes
// the manager exit), it spawns the next.
type supervisor struct {
	f    *fleet
	o    instanceOptions
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	current *incarnation
	err     error
}

// supervise starts the first incarnation and the supervision.
func (f *fleet) supervise(ctx context.Context, o instanceOptions) (*supervisor, error) {
	inc, err := f.spawn(ctx, o)
	if err != nil {
		return nil, err
	}
	s := &supervisor{f: f, o: o, current: inc, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop(ctx)
	return s, nil
}

func (s *supervisor) loop(ctx context.Context) {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		s.mu.Lock()
		running := s.current.p.running()
		s.mu.Unlock()
		if running {
			continue
		}
		inc, err := s.f.spawn(ctx, s.o)
		s.mu.Lock()
		if err != nil {
			// Starting may fail while the faults last (the
			// certificate Secret unreadable); the next round retries.
			s.err = err
		} else {
			s.current, s.err = inc, nil
		}
		s.mu.Unlock()
	}
}

// halt ends the supervision and makes sure an incarnation runs (the one
// the invariants will wait for), spawning one if the last attempt failed.
func (s *supervisor) halt(ctx context.Context) (*incarnation, error) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.current.p.running() {
		inc, err := s.f.spawn(ctx, s.o)
		if err != nil {
			return nil, fmt.Errorf("restarting operator after the faults: %w (previous error: %v)", err, s.err)
		}
		s.current = inc
	}
	return s.current, nil
}
