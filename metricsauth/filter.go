package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The cache lifetimes and the review timeout of controller-runtime's filter.
const (
	tokenTTL      = time.Minute
	allowTTL      = 5 * time.Minute
	denyTTL       = 30 * time.Second
	reviewTimeout = 10 * time.Second
)

// FilterProvider returns a filter for metricsserver.Options.FilterProvider
// that serves a request only when its "Authorization: Bearer" token is
// authenticated by a TokenReview and its user is allowed the request's verb
// (the method, lower-cased) on its path by a SubjectAccessReview. It answers
// 401 when the token is missing or not authenticated, 403 when the user is
// not allowed and 500 when the API server cannot be asked, and removes the
// Authorization header before the metrics handler sees the request.
//
// Answers are cached as controller-runtime's filter caches them: a token's
// review for 1 minute, an allowed request for 5 and a denied one for 30
// seconds; errors are not cached. The operator needs create on
// authentication.k8s.io tokenreviews and authorization.k8s.io
// subjectaccessreviews (kubebuilder's metrics_auth_role). A nil httpClient
// is made from cfg (the manager passes its own).
func FilterProvider(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	if httpClient == nil {
		var err error
		if httpClient, err = rest.HTTPClientFor(cfg); err != nil {
			return nil, fmt.Errorf("metrics review client: %w", err)
		}
	}
	authn, err := authenticationv1.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authentication client: %w", err)
	}
	authz, err := authorizationv1.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	r := newReviewer(authn.TokenReviews(), authz.SubjectAccessReviews(), time.Now)
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return r.handler(log, next), nil
	}, nil
}

// reviewer asks the API server who a token is and what it may do,
// remembering the answers.
type reviewer struct {
	tokens    authenticationv1.TokenReviewInterface
	access    authorizationv1.SubjectAccessReviewInterface
	users     *ttlCache[*authnv1.UserInfo] // nil: not authenticated
	decisions *ttlCache[bool]
}

func newReviewer(tokens authenticationv1.TokenReviewInterface, access authorizationv1.SubjectAccessReviewInterface, now func() time.Time) *reviewer {
	return &reviewer{tokens: tokens, access: access, users: newTTLCache[*authnv1.UserInfo](now), decisions: newTTLCache[bool](now)}
}

func (r *reviewer) handler(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token, ok := bearerToken(req.Header.Get("Authorization"))
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := r.authenticate(req.Context(), token)
		if err != nil {
			log.Error(err, "Authentication failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			log.V(4).Info("Authentication failed")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb := strings.ToLower(req.Method)
		allowed, err := r.authorize(req.Context(), user, verb, req.URL.Path)
		if err != nil {
			msg := "Authorization for user " + user.Username + " failed"
			log.Error(err, msg)
			http.Error(w, msg, http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := "Authorization denied for user " + user.Username
			log.V(4).Info(msg, "verb", verb, "path", req.URL.Path)
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		req.Header.Del("Authorization")
		next.ServeHTTP(w, req)
	})
}

// bearerToken reads an Authorization header as the API server does
// (k8s.io/apiserver's bearertoken authenticator): "Bearer", in any case, a
// space, and a non-empty token.
func bearerToken(header string) (string, bool) {
	parts := strings.SplitN(strings.TrimSpace(header), " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return "", false
	}
	return parts[1], true
}

// authenticate returns the token's user, nil when the API server does not
// authenticate it. The cache is keyed by the token's SHA-256, never the token.
func (r *reviewer) authenticate(ctx context.Context, token string) (*authnv1.UserInfo, error) {
	sum := sha256.Sum256([]byte(token))
	key := string(sum[:])
	if user, ok := r.users.get(key); ok {
		return user, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.tokens.Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("TokenReview: %w", err)
	}
	var user *authnv1.UserInfo
	if review.Status.Authenticated && review.Status.Error == "" {
		user = &review.Status.User
	}
	r.users.put(key, user, tokenTTL)
	return user, nil
}

// authorize asks whether user may do verb on the non-resource path.
func (r *reviewer) authorize(ctx context.Context, user *authnv1.UserInfo, verb, path string) (bool, error) {
	spec := authzv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authzv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	key := decisionKey(&spec)
	if allowed, ok := r.decisions.get(key); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.access.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	r.decisions.put(key, allowed, ttl)
	return allowed, nil
}

// decisionKey is everything a SubjectAccessReview is asked, NUL-separated
// (no name, group or path holds a NUL), groups and extra in a fixed order.
func decisionKey(s *authzv1.SubjectAccessReviewSpec) string {
	var b strings.Builder
	for _, f := range []string{s.User, s.UID, s.NonResourceAttributes.Verb, s.NonResourceAttributes.Path} {
		b.WriteString(f)
		b.WriteByte(0)
	}
	b.WriteString(strings.Join(slices.Sorted(slices.Values(s.Groups)), "\x01"))
	for _, k := range slices.Sorted(maps.Keys(s.Extra)) {
		b.WriteByte(0)
		b.WriteString(k + "\x02" + strings.Join(s.Extra[k], "\x01"))
	}
	return b.String()
}
