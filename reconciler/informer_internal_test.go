package reconciler

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// untilAvailable retries only the API server's unavailability, and stops
// when its context ends.
func TestUntilAvailable(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "widgets"}, "", errors.New("no"))

	calls := 0
	got, err := untilAvailable(context.Background(), func() (int, error) {
		calls++
		if calls == 1 {
			return 0, refused
		}
		return 42, nil
	})
	assert.NoError(t, err)
	assert.Equal(t, 42, got)
	assert.Equal(t, 2, calls, "tried again after the refusal")

	badCA := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/x", Err: x509.UnknownAuthorityError{}}
	timeout := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/x", Err: context.DeadlineExceeded}
	for _, other := range []error{forbidden, badCA, timeout} {
		calls = 0
		_, err = untilAvailable(context.Background(), func() (int, error) { calls++; return 0, other })
		assert.Equal(t, other, err, "another error reaches the reflector at once, which logs it and backs off")
		assert.Equal(t, 1, calls)
	}
	for _, away := range []error{refused, io.ErrUnexpectedEOF, apierrors.NewServiceUnavailable("x"), apierrors.NewTooManyRequests("storage is (re)initializing", 1),
		apierrors.NewInternalError(errors.New("rpc error: code = Unavailable desc = etcd"))} {
		assert.True(t, serverAway(away), "%v", away)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = untilAvailable(ctx, func() (int, error) { return 0, refused })
	assert.Equal(t, refused, err, "the last answer once the informer stops")
}

// scriptedLister answers its lists with errs, one per call, then with an
// empty list; it records when, on its clock, each call came.
type scriptedLister struct {
	clock clock.PassiveClock
	errs  []error
	calls []time.Time
}

func (s *scriptedLister) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	s.calls = append(s.calls, s.clock.Now())
	if i := len(s.calls) - 1; i < len(s.errs) {
		return nil, s.errs[i]
	}
	return &metav1.List{}, nil
}

func (s *scriptedLister) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errors.New("scriptedLister: no watch")
}

// gaps returns the time between consecutive calls.
func (s *scriptedLister) gaps() []time.Duration {
	var gaps []time.Duration
	for i := 1; i < len(s.calls); i++ {
		gaps = append(gaps, s.calls[i].Sub(s.calls[i-1]))
	}
	return gaps
}

// listOnFakeClock lists through NewInformer's ListerWatcher around lw, on
// a fake clock it steps by tick whenever the retry waits, until the list
// returns; and log collects what the retry logs.
func listOnFakeClock(t *testing.T, fc *clocktesting.FakeClock, tick time.Duration, lw toolscache.ListerWatcherWithContext, log *logLines) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := outageListerWatcher{lw: lw, rt: retrier{clock: fc, log: log.logger()}}.ListWithContext(ctx, metav1.ListOptions{})
		done <- err
	}()
	start, deadline := fc.Now(), time.Now().Add(30*time.Second)
	for {
		select {
		case err := <-done:
			return err
		default:
		}
		switch {
		case time.Now().After(deadline), fc.Since(start) > 2*time.Hour:
			t.Fatalf("the list did not return within %v of the fake clock (30 s real)", fc.Since(start))
		case fc.HasWaiters():
			fc.Step(tick)
		default:
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// logLines collects what a logr.Logger logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// throttled is the error client-go's REST client returns for API Priority
// and Fairness' answer, a plain-text 429 with a Retry-After header
// (retryAfter 0: none), once its own retries are spent.
func throttled(retryAfter int) error {
	return apierrors.NewGenericServerResponse(http.StatusTooManyRequests, "GET", schema.GroupResource{Resource: "widgets"}, "",
		"Too many requests, please try again later.", retryAfter, true)
}

// A 429 is tried again no sooner than its Retry-After says, also when that
// is beyond the backoff's cap (issue #48: it was tried again about a
// second later, whatever the server asked).
func TestInformerWaitsTheRetryAfterOfA429(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	lw := &scriptedLister{clock: fc, errs: []error{throttled(2), throttled(40)}}
	const tick = 10 * time.Millisecond
	require.NoError(t, listOnFakeClock(t, fc, tick, lw, &logLines{}))
	gaps := lw.gaps()
	require.Len(t, gaps, 2, "two 429s, then the list")
	assert.GreaterOrEqual(t, gaps[0], 2*time.Second, "Retry-After: 2")
	assert.Less(t, gaps[0], 3*time.Second+tick, "Retry-After: 2, and up to half as much again of jitter")
	assert.GreaterOrEqual(t, gaps[1], 40*time.Second, "Retry-After: 40, beyond the cap")
	assert.Less(t, gaps[1], 60*time.Second+tick)
}

// Consecutive 429s without a Retry-After are tried again after waits that
// double from a second up to the cap, each up to half as long again of
// jitter (issue #48: about every second, forever, under APF throttling).
func TestInformerBacksOffConsecutive429s(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	errs := make([]error, 8)
	for i := range errs {
		errs[i] = throttled(0)
	}
	lw := &scriptedLister{clock: fc, errs: errs}
	const tick = 10 * time.Millisecond
	require.NoError(t, listOnFakeClock(t, fc, tick, lw, &logLines{}))
	gaps := lw.gaps()
	require.Len(t, gaps, len(errs))
	for i, want := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		want *= time.Second
		assert.GreaterOrEqual(t, gaps[i], want, "wait %d: %v", i+1, gaps)
		assert.Less(t, gaps[i], want*3/2+tick, "wait %d: %v", i+1, gaps)
	}
}

// An aggregated API that stays unavailable (503) is backed off from like a
// 429, and said in the log more than once: at each doubling of the wait,
// and then every informerLogEvery while it lasts (issue #48: logged once,
// then retried every second in silence).
func TestInformerLogsAPersistent503(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	unavailable := apierrors.NewGenericServerResponse(http.StatusServiceUnavailable, "GET",
		schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}, "", "service unavailable", 0, true)
	errs := make([]error, 24)
	for i := range errs {
		errs[i] = unavailable
	}
	lw := &scriptedLister{clock: fc, errs: errs}
	var log logLines
	require.NoError(t, listOnFakeClock(t, fc, 50*time.Millisecond, lw, &log))
	gaps := lw.gaps()
	require.Len(t, gaps, len(errs))
	assert.GreaterOrEqual(t, gaps[len(gaps)-1], 30*time.Second, "backed off to the 30 s cap: %v", gaps)

	lines := log.get()
	// Six doublings (1, 2, 4, 8, 16, 30 s) in the first minute, then a
	// reminder every five minutes: 18 waits of 30 to 45 s at the cap last
	// 9 to 13.5 minutes.
	assert.GreaterOrEqual(t, len(lines), 6+1, "logged at each doubling and again later:\n%s", strings.Join(lines, "\n"))
	assert.LessOrEqual(t, len(lines), 6+3, "not at every retry:\n%s", strings.Join(lines, "\n"))
	for _, l := range lines {
		assert.Contains(t, l, "the server is currently unable to handle the request (get pods.metrics.k8s.io)")
	}
}

// An answer that carries a Retry-After is waited out inside the call like
// a 429, whatever its status (it reached the reflector, which ignores the
// Retry-After); one without is not, unless it is a 429 or a 503.
func TestServerAwayIncludesAnyRetryAfter(t *testing.T) {
	busy := apierrors.NewGenericServerResponse(http.StatusInternalServerError, "GET", schema.GroupResource{Resource: "widgets"}, "", "busy", 5, true)
	assert.True(t, serverAway(busy), "%v with Retry-After: 5", busy)
	broken := apierrors.NewGenericServerResponse(http.StatusInternalServerError, "GET", schema.GroupResource{Resource: "widgets"}, "", "broken", 0, true)
	assert.False(t, serverAway(broken), "%v without a Retry-After", broken)
}

// A refused connection (an API server restarting) is still tried again
// about every second, however long it lasts: that is what NewInformer is
// for.
func TestInformerRetriesARefusedConnectionPromptly(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Now())
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	errs := make([]error, 10)
	for i := range errs {
		errs[i] = refused
	}
	lw := &scriptedLister{clock: fc, errs: errs}
	const tick = 10 * time.Millisecond
	require.NoError(t, listOnFakeClock(t, fc, tick, lw, &logLines{}))
	for i, gap := range lw.gaps() {
		assert.GreaterOrEqual(t, gap, informerRetry/2, "wait %d", i+1)
		assert.Less(t, gap, informerRetry*3/2+tick, "wait %d", i+1)
	}
}
