package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

func TestIsAPIServerUnavailable(t *testing.T) {
	gr := schema.GroupResource{Group: "apps.example.com", Resource: "widgets"}
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"connection refused", refused, true},
		{"connection refused, wrapped by a step and joined with a status write's", errors.Join(fmt.Errorf("step deploy: %w", refused), errors.New("writing status")), true},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"EOF", fmt.Errorf("patching: %w", io.ErrUnexpectedEOF), true},
		{"client timeout", &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}, true},
		{"503", apierrors.NewServiceUnavailable("the server is currently unable to handle the request"), true},
		{"504 timeout", apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "patch", 1), true},
		{"etcd timed out", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true},
		{"etcd unreachable", apierrors.NewInternalError(errors.New("rpc error: code = Unavailable desc = connection error")), true},
		{"webhook down", apierrors.NewInternalError(errors.New(`failed calling webhook "v.example.com": dial tcp 10.0.0.1:443: connect: connection refused`)), false},
		{"429", apierrors.NewTooManyRequests("slow down", 1), false},
		{"conflict", apierrors.NewConflict(gr, "w", errors.New("changed")), false},
		{"forbidden", apierrors.NewForbidden(gr, "w", errors.New("no")), false},
		{"canceled", &url.Error{Op: "Get", URL: "https://x", Err: context.Canceled}, false},
		{"a step's own error", errors.New("bucket quota exceeded"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, reconciler.IsAPIServerUnavailable(tc.err))
		})
	}
}

// TestOutageRecoveryRequeuesWhatFailedWhileTheAPIServerWasDown runs a
// controller whose manager reaches the apiserver through a proxy that the
// test takes down. The Widget's passes fail while it is down until the
// rate limiter schedules the next one an hour away (a stand-in for the
// default limiter's 1000 s after a long outage); once the proxy is back,
// the Widget must be reconciled again long before that: its backoff is the
// outage's, not the work's.
func TestOutageRecoveryRequeuesWhatFailedWhileTheAPIServerWasDown(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	proxy := startProxy(t, env.Config.Host)
	mgr, err := ctrl.NewManager(proxy.config(), ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: new(true)}})
	require.NoError(t, err)

	key := types.NamespacedName{Namespace: ns, Name: "w"}
	var succeeded, failed atomic.Int32
	r, err := reconciler.New(mgr, reconciler.Options[*testv1.Widget]{Name: "outage", Steps: []widgetStep{{
		Name: "read",
		Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			// A read from the apiserver, as a step's apply would make;
			// passes come every 50 ms while it answers.
			if err := mgr.GetAPIReader().Get(ctx, key, &testv1.Widget{}); err != nil {
				failed.Add(1)
				return reconciler.Retry(err)
			}
			succeeded.Add(1)
			return reconciler.Continue().RequeueAfter(50 * time.Millisecond)
		},
	}}})
	require.NoError(t, err)
	// Five quick retries, then an hour.
	limiter := &recordingLimiter{TypedRateLimiter: workqueue.NewTypedItemFastSlowRateLimiter[reconcile.Request](10*time.Millisecond, time.Hour, 5)}
	require.NoError(t, ctrl.NewControllerManagedBy(mgr).Named("outage").For(&testv1.Widget{}).
		WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == ns })).
		WithOptions(controller.Options{RateLimiter: limiter}).
		WatchesRawSource(r.OutageRecovery()).
		Complete(r))
	ctx := testenv.RunManager(t, mgr)

	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}))
	// Converged: its status written, and the cache holding that write, so
	// no watch event is still owed to the controller when the proxy goes
	// down (one would wake the Widget after the outage by itself).
	require.Eventually(t, func() bool {
		truth, cached := &testv1.Widget{}, &testv1.Widget{}
		return succeeded.Load() >= 3 && env.Client.Get(ctx, key, truth) == nil && mgr.GetClient().Get(ctx, key, cached) == nil &&
			truth.ResourceVersion == cached.ResourceVersion
	}, time.Minute, 10*time.Millisecond, "the Widget never converged through the proxy")

	proxy.down()
	require.Eventually(t, func() bool { return limiter.longest(reconcile.Request{NamespacedName: key}) >= time.Hour },
		time.Minute, 10*time.Millisecond, "the Widget's passes never failed into the hour-long backoff with the apiserver down")
	before, failures := succeeded.Load(), failed.Load()
	require.GreaterOrEqual(t, failures, int32(6), "the Widget failed fewer times than the limiter's quick retries")

	proxy.up()
	require.Eventually(t, func() bool { return succeeded.Load() > before }, time.Minute, 10*time.Millisecond,
		"the Widget was not reconciled again within a minute of the apiserver coming back: it is waiting out the hour of backoff the outage built up")
}

// recordingLimiter records the longest delay its limiter gave each item.
type recordingLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	mu  sync.Mutex
	max map[reconcile.Request]time.Duration
}

func (l *recordingLimiter) When(item reconcile.Request) time.Duration {
	d := l.TypedRateLimiter.When(item)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.max == nil {
		l.max = map[reconcile.Request]time.Duration{}
	}
	l.max[item] = max(l.max[item], d)
	return d
}

func (l *recordingLimiter) longest(item reconcile.Request) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.max[item]
}

// tcpProxy forwards connections on 127.0.0.1 to an apiserver; down closes
// its listener and every connection (new ones are refused), up listens on
// the same address again.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func startProxy(t *testing.T, host string) *tcpProxy {
	t.Helper()
	u, err := url.Parse(host)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{t: t, addr: ln.Addr().String(), target: u.Host, conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

// config is env.Config reaching the apiserver through the proxy.
func (p *tcpProxy) config() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://" + p.addr
	return cfg
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			upstream, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			if !p.track(c, upstream) {
				_ = c.Close()
				_ = upstream.Close()
				continue
			}
			go p.pipe(c, upstream)
			go p.pipe(upstream, c)
		}
	}()
}

// track records a connection pair unless the proxy went down meanwhile.
func (p *tcpProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *tcpProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	clear(p.conns)
}

func (p *tcpProxy) up() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err, "listening on the proxy's address again")
	p.serve(ln)
}
