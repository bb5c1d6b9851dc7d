package metricsauth

import (
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

	"github.com/reconcilekit/reconcilekit/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

// tokens are bearer tokens of two ServiceAccounts: reader is bound to a
// ClusterRole allowing GET /metrics (as config/rbac's metrics-reader),
// other to nothing.
type tokens struct{ reader, other string }

func serviceAccountTokens(t *testing.T) tokens {
	t.Helper()
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	ns := env.Namespace(t)
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	role, err = cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "metrics-reader-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "reader"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	token := func(name string) string {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	return tokens{reader: token("reader"), other: token("other")}
}

// countingTransport counts the requests that reach the API server.
type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) take() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = 0
	return n
}

// serve sends one request through h and returns its status and whether the
// metrics handler behind the filter saw it (with no Authorization header).
func serve(t *testing.T, h http.Handler, method, path, authorization string) (int, bool) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header().Get("X-Served") == "true"
}

var metricsHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		http.Error(w, "the filter passed the token on", http.StatusTeapot)
		return
	}
	w.Header().Set("X-Served", "true")
})

// TestFilterAnswersAsTheAPIServerDecides: the answers controller-runtime's
// filter gives, from a real TokenReview and SubjectAccessReview.
func TestFilterAnswersAsTheAPIServerDecides(t *testing.T) {
	testenv.Require(t)
	tok := serviceAccountTokens(t)
	filter, err := FilterProvider(env.Config, nil)
	require.NoError(t, err)
	h, err := filter(logr.Discard(), metricsHandler)
	require.NoError(t, err)

	for _, c := range []struct {
		name, method, path, authorization string
		want                              int
	}{
		{"the reader's token", http.MethodGet, "/metrics", "Bearer " + tok.reader, http.StatusOK},
		{"the scheme in any case", http.MethodGet, "/metrics", "bearer " + tok.reader, http.StatusOK},
		{"no Authorization header", http.MethodGet, "/metrics", "", http.StatusUnauthorized},
		{"Bearer without a token", http.MethodGet, "/metrics", "Bearer ", http.StatusUnauthorized},
		{"another scheme", http.MethodGet, "/metrics", "Basic " + tok.reader, http.StatusUnauthorized},
		{"a token the API server did not issue", http.MethodGet, "/metrics", "Bearer not-a-token", http.StatusUnauthorized},
		{"a user without the role", http.MethodGet, "/metrics", "Bearer " + tok.other, http.StatusForbidden},
		{"a path the role does not name", http.MethodGet, "/debug/pprof/", "Bearer " + tok.reader, http.StatusForbidden},
		{"a verb the role does not grant", http.MethodPost, "/metrics", "Bearer " + tok.reader, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, served := serve(t, h, c.method, c.path, c.authorization)
			assert.Equal(t, c.want, code)
			assert.Equal(t, c.want == http.StatusOK, served, "the metrics handler ran")
		})
	}
}

// TestFilterAsksOncePerLifetime: answers are reused for controller-runtime's
// lifetimes (a token 1 minute, an allowed request 5, a denied one 30 s), so
// a Prometheus scraping every 15 s costs the API server about one review a
// minute, not two per scrape.
func TestFilterAsksOncePerLifetime(t *testing.T) {
	testenv.Require(t)
	tok := serviceAccountTokens(t)
	cfg := rest.CopyConfig(env.Config)
	counter := &countingTransport{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter })
	httpClient, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	authn, err := authenticationv1.NewForConfigAndClient(cfg, httpClient)
	require.NoError(t, err)
	authz, err := authorizationv1.NewForConfigAndClient(cfg, httpClient)
	require.NoError(t, err)
	now := time.Now()
	clock := func() time.Time { return now }
	h := newReviewer(authn.TokenReviews(), authz.SubjectAccessReviews(), clock).handler(logr.Discard(), metricsHandler)

	scrape := func(token string, want int) int {
		t.Helper()
		code, _ := serve(t, h, http.MethodGet, "/metrics", "Bearer "+token)
		require.Equal(t, want, code)
		return counter.take()
	}
	assert.Equal(t, 2, scrape(tok.reader, http.StatusOK), "first scrape: a TokenReview and a SubjectAccessReview")
	assert.Equal(t, 0, scrape(tok.reader, http.StatusOK), "within the lifetimes: no request")
	assert.Equal(t, 2, scrape(tok.other, http.StatusForbidden), "another token is reviewed")
	assert.Equal(t, 0, scrape(tok.other, http.StatusForbidden))
	assert.Equal(t, 1, scrape("not-a-token", http.StatusUnauthorized), "an unauthenticated token: one TokenReview")
	assert.Equal(t, 0, scrape("not-a-token", http.StatusUnauthorized), "and it is remembered")

	now = now.Add(31 * time.Second)
	assert.Equal(t, 0, scrape(tok.reader, http.StatusOK))
	assert.Equal(t, 1, scrape(tok.other, http.StatusForbidden), "a denial is asked again after 30 s")

	now = now.Add(30 * time.Second) // 61 s
	assert.Equal(t, 1, scrape(tok.reader, http.StatusOK), "the token again after 1 minute, the allowance still remembered")

	now = now.Add(4 * time.Minute) // 5 min 1 s
	assert.Equal(t, 2, scrape(tok.reader, http.StatusOK), "and the allowance after 5")
}

// TestFilterFailsClosedWhenTheAPIServerCannotBeAsked: a review that cannot
// be made answers 500, never serves, and is not remembered.
func TestFilterFailsClosedWhenTheAPIServerCannotBeAsked(t *testing.T) {
	counter := &countingTransport{next: http.DefaultTransport}
	cfg := &rest.Config{Host: "http://127.0.0.1:1"}
	httpClient := &http.Client{Transport: counter}
	filter, err := FilterProvider(cfg, httpClient)
	require.NoError(t, err)
	h, err := filter(logr.Discard(), metricsHandler)
	require.NoError(t, err)
	for range 2 {
		code, served := serve(t, h, http.MethodGet, "/metrics", "Bearer some-token")
		assert.Equal(t, http.StatusInternalServerError, code)
		assert.False(t, served)
		assert.Equal(t, 1, counter.take(), "each request asks: errors are not cached")
	}
}

// TestCacheIsBounded: a flood of distinct tokens cannot grow the cache past
// maxEntries; expired entries go first.
func TestCacheIsBounded(t *testing.T) {
	now := time.Now()
	c := newTTLCache[bool](func() time.Time { return now })
	c.put("old", true, time.Second)
	c.put("kept", true, time.Hour)
	now = now.Add(2 * time.Second)
	for i := range maxEntries - 2 {
		c.put(string(rune(i+0x100)), true, time.Hour)
	}
	require.Len(t, c.entries, maxEntries)
	c.put("new", true, time.Hour)
	assert.Len(t, c.entries, maxEntries, "the expired entry made room")
	_, ok := c.get("kept")
	assert.True(t, ok, "entries still alive stay while expired ones can go")
	c.put("another", true, time.Hour)
	assert.Len(t, c.entries, 1, "nothing expired: the cache starts over")
	_, ok = c.get("another")
	assert.True(t, ok)
}
