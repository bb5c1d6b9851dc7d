package reconcilertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest/cachelag"
)

// Verbs, named as the apiserver names them in audit logs and in the
// apiserver_request_total metric, so client-side and server-side counts can
// be compared.
const (
	Get         = "get"
	List        = "list"
	Create      = "create"
	Update      = "update"
	Patch       = "patch"
	Apply       = "apply"
	Delete      = "delete"
	DeleteAllOf = "deletecollection"
)

// Call identifies one kind of request the [Client] recorded: a verb on a
// kind, optionally on a subresource ("status", "scale").
type Call struct {
	Verb        string
	Kind        string
	Subresource string
}

// String renders the request as "patch Widget/status".
func (r Call) String() string {
	s := r.Verb + " " + r.Kind
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	return s
}

// Mutating reports whether the request changes state on the server.
func (r Call) Mutating() bool {
	return r.Verb != Get && r.Verb != List
}

// Injected errors for [Fault]. They satisfy apierrors.IsConflict,
// apierrors.IsInternalError and apierrors.IsTimeout respectively, like the
// real thing, so code under test takes its real error paths.
var (
	ErrConflict = apierrors.NewConflict(schema.GroupResource{Group: "reconcilertest", Resource: "injected"}, "injected",
		errors.New("injected conflict"))
	ErrServer  = apierrors.NewInternalError(errors.New("injected server error"))
	ErrTimeout = apierrors.NewTimeoutError("injected timeout", 1)
)

// Fault makes matching requests fail with Err instead of reaching the
// server. Empty Verb, Kind and Subresource match anything; Verb "mutating"
// matches every mutating verb.
type Fault struct {
	Verb        string
	Kind        string
	Subresource string
	// Err is returned to the caller; use ErrConflict, ErrServer, ErrTimeout
	// or any error.
	Err error
	// Rate is the probability in (0,1] that a matching request fails; 0
	// (unset) means 1, so a Fault without a Rate fails every matching
	// request instead of silently none. The random source is seeded (see
	// [WithSeed]) so a failing run repeats.
	Rate float64
	// Times limits how many requests this fault fails; 0 means no limit.
	Times int

	failed int
}

func (f *Fault) matches(r Call) bool {
	switch {
	case f.Verb == "mutating" && !r.Mutating():
		return false
	case f.Verb != "" && f.Verb != "mutating" && f.Verb != r.Verb:
		return false
	case f.Kind != "" && f.Kind != r.Kind:
		return false
	case f.Subresource != "" && f.Subresource != r.Subresource:
		return false
	}
	return f.Times == 0 || f.failed < f.Times
}

// Client wraps a client.Client: it counts every request by verb, kind and
// subresource, and fails the requests chosen by its faults. It is safe for
// concurrent use, so it can stand in for a manager's client.
//
// Caveats: requests served by the cache count as reads like any other; the
// count is what the code under test asked for, not necessarily what reached
// the apiserver (cross-check with apiserver_request_total where it matters).
type Client struct {
	client.WithWatch

	mu     sync.Mutex
	counts map[Call]int
	log    []Call
	faults []*Fault
	rand   *rand.Rand
	lag    *cachelag.Cache // nil without WithCacheLag
}

// ClientOption configures a [Client].
type ClientOption func(*Client)

// WithSeed seeds the random source that decides which requests a Fault
// with a Rate below 1 fails. The default seed is 1.
func WithSeed(seed int64) ClientOption {
	return func(c *Client) { c.rand = rand.New(rand.NewSource(seed)) }
}

// WithFaults installs faults from the start.
func WithFaults(faults ...Fault) ClientOption {
	return func(c *Client) {
		for i := range faults {
			c.faults = append(c.faults, &faults[i])
		}
	}
}

// NewClient wraps c.
func NewClient(c client.Client, opts ...ClientOption) *Client {
	tc := &Client{counts: map[Call]int{}, rand: rand.New(rand.NewSource(1))}
	for _, o := range opts {
		o(tc)
	}
	ww, ok := c.(client.WithWatch)
	if !ok {
		ww = noWatch{c}
	}
	tc.WithWatch = interceptor.NewClient(ww, tc.funcs())
	return tc
}

// Inject adds a fault; it applies to requests made from now on.
func (c *Client) Inject(f Fault) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, &f)
}

// ClearFaults removes every fault.
func (c *Client) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = nil
}

// Reset forgets every count (and, with [WithCacheLag], which objects were
// read, for [ReconcileUntilQuiet]).
func (c *Client) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = map[Call]int{}
	c.log = nil
	if c.lag != nil {
		c.lag.ForgetReads()
	}
}

// Count returns how many requests with this verb on this kind (any
// subresource) were made.
func (c *Client) Count(verb, kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for r, v := range c.counts {
		if r.Verb == verb && r.Kind == kind {
			n += v
		}
	}
	return n
}

// Counts returns a copy of every count.
func (c *Client) Counts() map[Call]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Call]int, len(c.counts))
	for r, v := range c.counts {
		out[r] = v
	}
	return out
}

// Mutations returns how many mutating requests were made, including the
// ones a fault failed.
func (c *Client) Mutations() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for r, v := range c.counts {
		if r.Mutating() {
			n += v
		}
	}
	return n
}

// MutatingRequests lists the mutating requests in the order they were made,
// for failure messages.
func (c *Client) MutatingRequests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, r := range c.log {
		if r.Mutating() {
			out = append(out, r.String())
		}
	}
	return out
}

// String summarises the counts, sorted, one request kind per line.
func (c *Client) String() string {
	counts := c.Counts()
	lines := make([]string, 0, len(counts))
	for r, n := range counts {
		lines = append(lines, fmt.Sprintf("%s: %d", r, n))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// record counts r and returns the injected error for it, if any.
func (c *Client) record(r Call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[r]++
	c.log = append(c.log, r)
	for _, f := range c.faults {
		if !f.matches(r) {
			continue
		}
		if f.Rate <= 0 || f.Rate >= 1 || c.rand.Float64() < f.Rate {
			f.failed++
			return f.Err
		}
	}
	return nil
}

func (c *Client) kind(obj runtime.Object) string {
	if gvk, err := c.GroupVersionKindFor(obj); err == nil {
		return gvk.Kind
	}
	return fmt.Sprintf("%T", obj)
}

func (c *Client) listKind(list client.ObjectList) string {
	return strings.TrimSuffix(c.kind(list), "List")
}

func applyKind(obj runtime.ApplyConfiguration) string {
	switch k := obj.(type) {
	case interface{ GetKind() *string }: // typed apply configurations
		if k.GetKind() != nil {
			return *k.GetKind()
		}
	case interface{ GetKind() string }: // client.ApplyConfigurationFromUnstructured
		return k.GetKind()
	}
	return fmt.Sprintf("%T", obj)
}

func (c *Client) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.record(Call{Verb: Get, Kind: c.kind(obj)}); err != nil {
				return err
			}
			if c.lag != nil {
				if handled, err := c.lag.Get(ctx, cl, key, obj); handled {
					return err
				}
			}
			return cl.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.record(Call{Verb: List, Kind: c.listKind(list)}); err != nil {
				return err
			}
			if c.lag != nil {
				if handled, err := c.lag.List(ctx, cl, list, opts...); handled {
					return err
				}
			}
			return cl.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if err := c.record(Call{Verb: Create, Kind: c.kind(obj)}); err != nil {
				return err
			}
			return c.write(ctx, cl, obj, len((&client.CreateOptions{}).ApplyOptions(opts).DryRun) == 0, func() error {
				return cl.Create(ctx, obj, opts...)
			})
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := c.record(Call{Verb: Update, Kind: c.kind(obj)}); err != nil {
				return err
			}
			return c.write(ctx, cl, obj, len((&client.UpdateOptions{}).ApplyOptions(opts).DryRun) == 0, func() error {
				return cl.Update(ctx, obj, opts...)
			})
		},
		Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := c.record(Call{Verb: patchVerb(patch), Kind: c.kind(obj)}); err != nil {
				return err
			}
			return c.write(ctx, cl, obj, len((&client.PatchOptions{}).ApplyOptions(opts).DryRun) == 0, func() error {
				return cl.Patch(ctx, obj, patch, opts...)
			})
		},
		Apply: func(ctx context.Context, cl client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			if err := c.record(Call{Verb: Apply, Kind: applyKind(obj)}); err != nil {
				return err
			}
			return c.write(ctx, cl, obj, len((&client.ApplyOptions{}).ApplyOptions(opts).DryRun) == 0, func() error {
				return cl.Apply(ctx, obj, opts...)
			})
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := c.record(Call{Verb: Delete, Kind: c.kind(obj)}); err != nil {
				return err
			}
			// Not recorded: the answer is not the object. The informer
			// delivers the tombstone.
			return c.write(ctx, cl, obj, false, func() error {
				return cl.Delete(ctx, obj, opts...)
			})
		},
		DeleteAllOf: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteAllOfOption) error {
			if err := c.record(Call{Verb: DeleteAllOf, Kind: c.kind(obj)}); err != nil {
				return err
			}
			return c.write(ctx, cl, obj, false, func() error {
				return cl.DeleteAllOf(ctx, obj, opts...)
			})
		},
		SubResourceGet: func(ctx context.Context, cl client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceGetOption) error {
			if err := c.record(Call{Verb: Get, Kind: c.kind(obj), Subresource: sub}); err != nil {
				return err
			}
			return cl.SubResource(sub).Get(ctx, obj, subObj, opts...)
		},
		SubResourceCreate: func(ctx context.Context, cl client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
			if err := c.record(Call{Verb: Create, Kind: c.kind(obj), Subresource: sub}); err != nil {
				return err
			}
			return cl.SubResource(sub).Create(ctx, obj, subObj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if err := c.record(Call{Verb: Update, Kind: c.kind(obj), Subresource: sub}); err != nil {
				return err
			}
			o := (&client.SubResourceUpdateOptions{}).ApplyOptions(opts)
			return c.write(ctx, cl, obj, len(o.DryRun) == 0 && o.SubResourceBody == nil, func() error {
				return cl.SubResource(sub).Update(ctx, obj, opts...)
			})
		},
		SubResourcePatch: func(ctx context.Context, cl client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := c.record(Call{Verb: patchVerb(patch), Kind: c.kind(obj), Subresource: sub}); err != nil {
				return err
			}
			o := (&client.SubResourcePatchOptions{}).ApplyOptions(opts)
			return c.write(ctx, cl, obj, len(o.DryRun) == 0 && o.SubResourceBody == nil, func() error {
				return cl.SubResource(sub).Patch(ctx, obj, patch, opts...)
			})
		},
		SubResourceApply: func(ctx context.Context, cl client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			if err := c.record(Call{Verb: Apply, Kind: applyKind(obj), Subresource: sub}); err != nil {
				return err
			}
			o := (&client.SubResourceApplyOptions{}).ApplyOpts(opts)
			return c.write(ctx, cl, obj, len(o.DryRun) == 0 && o.SubResourceBody == nil, func() error {
				return cl.SubResource(sub).Apply(ctx, obj, opts...)
			})
		},
	}
}

// write runs do, a write of obj; with a cache lag it registers the kind's
// informer first and, if record, records the answer in obj.
func (c *Client) write(ctx context.Context, cl client.Client, obj any, record bool, do func() error) error {
	if c.lag == nil {
		return do()
	}
	return c.lag.Write(ctx, cl, obj, record, do)
}

// patchVerb names a server-side apply patch "apply", as the apiserver does.
func patchVerb(p client.Patch) string {
	if p.Type() == "application/apply-patch+yaml" {
		return Apply
	}
	return Patch
}

// noWatch adapts a client without Watch (a manager's client) to the
// interceptor, which needs client.WithWatch.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("reconcilertest: the wrapped client does not support Watch")
}
