package ownership_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	gadgetac "github.com/reconcilekit/reconcilekit/internal/testapi/v1/applyconfiguration/testapi/v1"
	"github.com/reconcilekit/reconcilekit/ownership"
)

// hangingProxy is a reverse proxy on 127.0.0.1 in front of envtest's
// apiserver that holds every request whose path starts with a prefix (e.g.
// /openapi/v3/apis/apps/v1, one group version's OpenAPI v3 document) until
// released: an apiserver whose document for that group version hangs.
// Everything else passes.
type hangingProxy struct {
	srv     *httptest.Server
	held    chan struct{} // one value per request held
	dropped chan struct{} // one value per held request its client gave up
	release chan struct{}
	once    sync.Once
}

func newHangingProxy(t *testing.T, prefix string) *hangingProxy {
	t.Helper()
	target, err := url.Parse(env.Config.Host)
	require.NoError(t, err)
	tr, err := rest.TransportFor(env.Config)
	require.NoError(t, err)
	p := &hangingProxy{held: make(chan struct{}, 16), dropped: make(chan struct{}, 16), release: make(chan struct{})}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, Transport: tr}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, prefix) {
			p.held <- struct{}{}
			select {
			case <-p.release:
			case <-t.Context().Done(): // the test ended: let its workers finish
				return
			case <-r.Context().Done():
				p.dropped <- struct{}{}
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	t.Cleanup(p.unblock) // before Close, which waits for held requests
	return p
}

func (p *hangingProxy) unblock() { p.once.Do(func() { close(p.release) }) }

// schemas reads OpenAPI documents through the proxy as a
// reconciler.Reconciler does through its manager: an HTTP client with no
// timeout of its own. Only timeout ends a fetch the proxy holds.
func (p *hangingProxy) schemas(t *testing.T, timeout time.Duration) *ownership.SchemaCache {
	t.Helper()
	cfg := &rest.Config{Host: p.srv.URL}
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	d, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, hc)
	require.NoError(t, err)
	s := ownership.NewSchemaCache(d.OpenAPIV3())
	s.Timeout = timeout
	return s
}

// wait receives from ch, failing the test if ctx ends first.
func wait[T any](t *testing.T, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("%s: still waiting when the test's context ended", what)
		panic("unreachable")
	}
}

type result struct {
	op  ownership.ApplyResult
	err error
}

// applyAsync runs Apply in a worker of its own, as a controller's other
// workers would; the test waits for it before it ends.
func (f *fixture) applyAsync(t *testing.T, ctx context.Context, a *ownership.Applier, desired runtime.ApplyConfiguration) <-chan result {
	t.Helper()
	done, out := make(chan struct{}), make(chan result, 1)
	go func() {
		defer close(done)
		op, err := a.Apply(ctx, f.owner, desired)
		out <- result{op, err}
	}()
	t.Cleanup(func() { <-done })
	return out
}

// A hung fetch of one group version's document blocks only the workers
// applying its kinds: a worker applying a kind of another group version goes
// on.
func TestSchemaFetchHangingForOneGroupVersionBlocksNoOtherKind(t *testing.T) {
	f := setup(t)
	p := newHangingProxy(t, "/openapi/v3/apis/apps/v1")
	a := &ownership.Applier{Client: f.c, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager, Schemas: p.schemas(t, time.Hour)}

	dep := f.applyAsync(t, f.ctx, a, deployment("nginx:1.27", map[string]string{"app": "web"}))
	wait(t, f.ctx, p.held, "the Deployment's apply fetching the apps/v1 document")

	cm := f.applyAsync(t, f.ctx, a, configMap("c", map[string]string{"k": "v"}))
	select {
	case got := <-cm:
		require.NoError(t, got.err)
		assert.Equal(t, ownership.Created, got.op)
	case got := <-dep:
		t.Fatalf("the ConfigMap's apply waited for the hung apps/v1 document (the Deployment's apply ended first: %v %v)", got.op, got.err)
	case <-f.ctx.Done():
		t.Fatal("the ConfigMap's apply waited for the hung apps/v1 document")
	}
	select {
	case got := <-dep:
		t.Fatalf("the Deployment's apply ended while its document hung: %v %v", got.op, got.err)
	default:
	}

	p.unblock()
	got := wait(t, f.ctx, dep, "the Deployment's apply once its document is served")
	require.NoError(t, got.err)
	assert.Equal(t, ownership.Created, got.op)
}

// A worker whose context ends (a shutdown) returns at once; the fetch that
// no one waits for any more is cancelled, not left hanging.
func TestSchemaFetchReturnsWhenTheContextEnds(t *testing.T) {
	f := setup(t)
	p := newHangingProxy(t, "/openapi/v3/apis/apps/v1")
	a := &ownership.Applier{Client: f.c, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager, Schemas: p.schemas(t, time.Hour)}

	ctx, cancel := context.WithCancel(f.ctx)
	dep := f.applyAsync(t, ctx, a, deployment("nginx:1.27", map[string]string{"app": "web"}))
	wait(t, f.ctx, p.held, "the Deployment's apply fetching the apps/v1 document")
	cancel()
	got := wait(t, f.ctx, dep, "the Deployment's apply after its context was cancelled")
	require.ErrorIs(t, got.err, context.Canceled)
	assert.ErrorContains(t, got.err, "apps/v1")
	wait(t, f.ctx, p.dropped, "the abandoned fetch to be cancelled")
	assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())

	// The next pass fetches again, and is served.
	p.unblock()
	again := wait(t, f.ctx, f.applyAsync(t, f.ctx, a, deployment("nginx:1.27", map[string]string{"app": "web"})), "the next apply")
	require.NoError(t, again.err)
	assert.Equal(t, ownership.Created, again.op)
}

// A fetch that gets no answer ends at SchemaCache.Timeout. A built-in kind is
// then compared by client-go's compiled-in schema; a custom resource, which
// has none, gets an error naming the timeout. (That the failure is
// remembered rather than waited for on every Apply is
// TestUnreadableSchemaFallsBackOnce's.)
func TestSchemaFetchDeadline(t *testing.T) {
	f := setup(t)
	const timeout = 200 * time.Millisecond
	p := newHangingProxy(t, "/openapi/v3")
	a := &ownership.Applier{Client: f.c, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager, Schemas: p.schemas(t, timeout)}

	got := wait(t, f.ctx, f.applyAsync(t, f.ctx, a, deployment("nginx:1.27", map[string]string{"app": "web"})), "the Deployment's apply")
	require.NoError(t, got.err)
	assert.Equal(t, ownership.Created, got.op)
	f.requireUnchanged(t, deployment("nginx:1.27", map[string]string{"app": "web"}))

	f.c.Reset()
	got = wait(t, f.ctx, f.applyAsync(t, f.ctx, a, gadget(gadgetac.GadgetSpec().WithTags("a"))), "the Gadget's apply")
	require.ErrorIs(t, got.err, context.DeadlineExceeded)
	assert.ErrorContains(t, got.err, "no answer within "+timeout.String())
	assert.ErrorContains(t, got.err, "test.reconcilekit.io/v1")
	assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
}
