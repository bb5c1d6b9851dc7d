//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// The database Services a chaos WebApp may reference: chaosDB exists (the
// scenario creates it), chaosMissingDB never does, so a WebApp pointing at
// it must end Ready=False with DatabaseNotFound, the condition that
// explains why.
const (
	chaosDB        = "db"
	chaosMissingDB = "missing-db"
)

// appModel is what the user last asked of a WebApp: the spec fields the
// workload sets, or deleted. The invariant checker compares the cluster
// against it.
type appModel struct {
	Image    string
	Replicas int32
	DBRef    string
	Deleted  bool
}

// opKind is a user operation on a WebApp.
type opKind string

const (
	opCreate opKind = "create"
	opUpdate opKind = "update"
	opDelete opKind = "delete"
)

// chaosOp is one scheduled operation; spec is the model after it.
type chaosOp struct {
	kind opKind
	app  string
	spec appModel
}

// schedule is a seed-determined list of operations over apps WebApps and
// the model they end in. Every app is created once; updates change image,
// replicas or dbRef; deletes remove a live app (never recreated, so the
// final state does not depend on the order concurrent workers run apps in).
type schedule struct {
	ops   []chaosOp
	final map[string]appModel
}

// newSchedule draws the operations from seed: creates interleaved with
// updates (about one per app) and deletes (about one app in six).
func newSchedule(seed uint64, apps int) schedule {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := schedule{final: map[string]appModel{}}
	var live []string
	created := 0
	spec := func(name string, version int) appModel {
		m := appModel{Image: fmt.Sprintf("registry.example.com/chaos/%s:v%d", name, version), Replicas: int32(1 + rng.IntN(3))}
		switch r := rng.IntN(10); {
		case r < 3:
			m.DBRef = chaosDB
		case r == 3:
			m.DBRef = chaosMissingDB
		}
		return m
	}
	versions := map[string]int{}
	for created < apps || len(s.ops) < apps*2 {
		r := rng.IntN(10)
		switch {
		case created < apps && (r < 5 || len(live) == 0):
			name := fmt.Sprintf("app-%03d", created)
			created++
			m := spec(name, 1)
			versions[name] = 1
			s.ops = append(s.ops, chaosOp{kind: opCreate, app: name, spec: m})
			s.final[name] = m
			live = append(live, name)
		case len(live) == 0:
			// Every app was deleted: nothing left to do.
			return s
		case r < 9 || len(live) <= 1:
			name := live[rng.IntN(len(live))]
			versions[name]++
			m := spec(name, versions[name])
			s.ops = append(s.ops, chaosOp{kind: opUpdate, app: name, spec: m})
			s.final[name] = m
		default:
			i := rng.IntN(len(live))
			name := live[i]
			live = append(live[:i], live[i+1:]...)
			s.ops = append(s.ops, chaosOp{kind: opDelete, app: name, spec: appModel{Deleted: true}})
			s.final[name] = appModel{Deleted: true}
		}
	}
	return s
}

// creates is the schedule with only its create operations, each with the
// app's final spec, and no deletes: for scenarios whose faults make every
// write impossible for a while, the load is all there before the fault.
func (s schedule) creates() schedule {
	out := schedule{final: map[string]appModel{}}
	for _, op := range s.ops {
		if op.kind != opCreate {
			continue
		}
		m := s.final[op.app]
		if m.Deleted {
			m = op.spec
		}
		out.ops = append(out.ops, chaosOp{kind: opCreate, app: op.app, spec: m})
		out.final[op.app] = m
	}
	return out
}

// runner executes a schedule against the apiserver as a user would: each
// operation retried until it succeeds (a webhook that is down or an
// apiserver that restarts refuses writes for a while), operations on one
// app in order, apps spread over a few concurrent workers.
type runner struct {
	c       client.Client
	ns      string
	workers int
	// deadline bounds the retries of one operation.
	deadline time.Duration

	issued  atomic.Int64 // requests sent, retries included
	refused atomic.Int64 // requests that failed and were retried
	// writes, when not nil, records when each app's operations succeeded.
	writes *writeLog
}

// writeLog is when the workload last wrote each app (its last operation
// on it succeeded): an app cannot converge to a write not yet made, so the
// figures also time each app from the later of the last fault and this.
type writeLog struct {
	mu   sync.Mutex
	last map[string]time.Time
	end  time.Time // the last write of all
}

func (w *writeLog) record(app string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]time.Time{}
	}
	w.last[app] = at
	if at.After(w.end) {
		w.end = at
	}
}

// snapshot returns a copy of the per-app times and the last write of all.
func (w *writeLog) snapshot() (map[string]time.Time, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.last))
	for k, v := range w.last {
		out[k] = v
	}
	return out, w.end
}

// run executes s.ops and returns the first operation that could not be
// done within the deadline.
func (r *runner) run(ctx context.Context, s schedule) error {
	queues := make([][]chaosOp, r.workers)
	worker := map[string]int{}
	for _, op := range s.ops {
		w, ok := worker[op.app]
		if !ok {
			w = len(worker) % r.workers
			worker[op.app] = w
		}
		queues[w] = append(queues[w], op)
	}
	var wg sync.WaitGroup
	errs := make(chan error, r.workers)
	for _, q := range queues {
		wg.Go(func() {
			for _, op := range q {
				if err := r.do(ctx, op); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// do runs one operation until it succeeds. A create whose response was
// lost (AlreadyExists on a retry) and a delete of a WebApp already gone
// are done.
func (r *runner) do(ctx context.Context, op chaosOp) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, r.deadline, true, func(ctx context.Context) (bool, error) {
		r.issued.Add(1)
		last = r.try(ctx, op)
		switch {
		case last == nil,
			op.kind == opCreate && apierrors.IsAlreadyExists(last),
			op.kind == opDelete && apierrors.IsNotFound(last):
			return true, nil
		case apierrors.IsInvalid(last) || apierrors.IsForbidden(last) && !strings.Contains(last.Error(), "webhook"):
			// The request itself is wrong: retrying cannot help.
			return false, last
		}
		r.refused.Add(1)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s WebApp %s/%s: %w (last error: %v)", op.kind, r.ns, op.app, err, last)
	}
	if r.writes != nil {
		r.writes.record(op.app, time.Now())
	}
	return nil
}

func (r *runner) try(ctx context.Context, op chaosOp) error {
	switch op.kind {
	case opCreate:
		// Small requests: the default 500m CPU per pod would fill the
		// simulated nodes' CPU after 64 pods, leaving pods Pending and
		// WebApps unready for want of capacity, not of correctness.
		w := &webappv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: op.app, Namespace: r.ns},
			Spec: webappv1.WebAppSpec{Image: op.spec.Image, Replicas: new(op.spec.Replicas), DBRef: nonEmpty(op.spec.DBRef),
				Resources: &webappv1.ContainerResources{CPU: new(resource.MustParse("10m")), Memory: new(resource.MustParse("16Mi"))}},
		}
		return r.c.Create(ctx, w)
	case opUpdate:
		// A merge patch of exactly the fields the user sets; "dbRef": null
		// removes it.
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{
			"image": op.spec.Image, "replicas": op.spec.Replicas, "dbRef": nonEmpty(op.spec.DBRef),
		}})
		if err != nil {
			return err
		}
		w := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: op.app, Namespace: r.ns}}
		return r.c.Patch(ctx, w, rawMergePatch(string(patch)))
	case opDelete:
		w := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: op.app, Namespace: r.ns}}
		return r.c.Delete(ctx, w)
	}
	return fmt.Errorf("unknown operation %q", op.kind)
}

// createDatabase creates the Service chaosDB that WebApps may reference.
// It is not the operator's: it carries no managed-by label.
func createDatabase(ctx context.Context, c client.Client, ns string) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: chaosDB, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "db"},
			Ports:    []corev1.ServicePort{{Name: "pg", Port: 5432, TargetPort: intstr.FromInt32(5432)}},
		},
	}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("creating database Service %s/%s: %w", ns, chaosDB, err)
	}
	return nil
}

// nonEmpty is s as an optional field: nil when empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
