//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// invalidField is one way to make a WebApp invalid, and the field path
// the rejection must name.
type invalidField struct {
	field string
	set   func(rng *rand.Rand, spec map[string]any)
}

// The schema's classes (checked by the apiserver) and the webhook's
// (checked by the validating webhook, which the apiserver calls only once
// the schema passed): a rejection names every field of its class.
var (
	schemaInvalid = []invalidField{
		{"spec.image", func(rng *rand.Rand, s map[string]any) {
			s["image"] = []string{"registry.example.com/web", "web:", "web@sha256:xyz", "with space:v1"}[rng.IntN(4)]
		}},
		{"spec.replicas", func(rng *rand.Rand, s map[string]any) { s["replicas"] = []int{0, -3, 101, 1 << 30}[rng.IntN(4)] }},
		{"spec.dbRef", func(rng *rand.Rand, s map[string]any) {
			s["dbRef"] = []string{"Bad_Ref", "-db", "db-", strings.Repeat("d", 64)}[rng.IntN(4)]
		}},
	}
	webhookInvalid = []invalidField{
		{"spec.resources.cpu", func(rng *rand.Rand, s map[string]any) {
			res, _ := s["resources"].(map[string]any)
			if res == nil {
				res = map[string]any{}
			}
			res["cpu"] = []string{"0", "-1", "-500m"}[rng.IntN(3)]
			s["resources"] = res
		}},
		{"spec.resources.memory", func(rng *rand.Rand, s map[string]any) {
			res, _ := s["resources"].(map[string]any)
			if res == nil {
				res = map[string]any{}
			}
			res["memory"] = []string{"1Mi", "1", "15Mi"}[rng.IntN(3)]
			s["resources"] = res
		}},
	}
)

// chaosBadInput is scenario 7: every class of invalid WebApp, in random
// combinations, through the apiserver (each rejection names all of its
// fields; nothing is stored), then a seeded corpus of malformed
// AdmissionReview bodies posted straight to the webhook server on
// 127.0.0.1:primaryWebhookPort (it answers every one, never panics, and keeps serving).
func chaosBadInput() features.Feature {
	var sc *scenario
	return features.New("chaos 7: bad input").
		WithLabel("area", "chaos").
		Assess("invalid WebApps are refused, naming every field", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			sc = newScenario(ctx, t, cfg, 7, "bad input: invalid WebApps and fuzzed AdmissionReview bodies", 7)
			sc.res.FaultsWhat = "invalid WebApps and malformed AdmissionReviews"
			for i := range size(12, 300) {
				class := schemaInvalid
				if sc.rng.IntN(2) == 1 {
					class = webhookInvalid
				}
				spec := map[string]any{"image": "registry.example.com/web:v1"}
				var fields []string
				for _, f := range class {
					if sc.rng.IntN(2) == 0 || len(fields) == 0 && f.field == class[len(class)-1].field {
						f.set(sc.rng, spec)
						fields = append(fields, f.field)
					}
				}
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": webappv1.GroupVersion.String(), "kind": "WebApp",
					"metadata": map[string]any{"name": fmt.Sprintf("bad-%03d", i), "namespace": sc.ns},
					"spec":     spec,
				}}
				sc.res.Ops++
				sc.res.Faults++
				err := sc.c.Create(ctx, u)
				switch {
				case err == nil:
					t.Errorf("invalid WebApp %v admitted: %v", fields, spec)
				case !apierrors.IsInvalid(err):
					t.Errorf("invalid WebApp %v: want 422 Invalid, got %v", fields, err)
				case !hasAll(err.Error(), fields...):
					t.Errorf("invalid WebApp %v (%v): the rejection does not name every field: %v", fields, spec, err)
				default:
					continue
				}
				sc.res.Violations++
			}
			requireEmpty(ctx, t, sc)
			return ctx
		}).
		Assess("malformed AdmissionReviews: every one answered, no panic, still serving", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			hc, err := webhookHTTPClient(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			pidBefore := operator.primary.cmd.Process.Pid
			base := fmt.Sprintf("https://127.0.0.1:%d", primaryWebhookPort)
			readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", operator.primary.probePort)
			corpus := fuzzCorpus(sc.rng, size(300, 5000))
			for i, body := range corpus {
				path := []string{"/mutate-apps-example-com-v1-webapp", "/validate-apps-example-com-v1-webapp"}[i%2]
				sc.res.Ops++
				sc.res.Faults++
				if msg := postReview(ctx, hc, base+path, body); msg != "" {
					sc.res.Violations++
					t.Errorf("body %d (%q...) to %s: %s", i, truncate(body, 80), path, msg)
				}
				if i%50 == 49 && !httpOK(ctx, &http.Client{Timeout: 2 * time.Second}, readyz) {
					sc.res.Violations++
					t.Errorf("after %d bodies the webhook server's /readyz fails", i+1)
				}
			}
			// A well-formed review of an invalid WebApp: denied, naming both fields.
			review := validReview(map[string]any{"image": "web:v1", "resources": map[string]any{"cpu": "0", "memory": "1Mi"}})
			sc.res.Ops++
			if msg := postReview(ctx, hc, base+"/validate-apps-example-com-v1-webapp", review, "spec.resources.cpu", "spec.resources.memory"); msg != "" {
				sc.res.Violations++
				t.Errorf("a review of an invalid WebApp: %s", msg)
			}
			logs, err := operator.primary.logs()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(logs, "panic") {
				sc.res.Violations++
				t.Errorf("the operator logged a panic:\n%s", tail(operator.primary.logPath, 40))
			}
			if !operator.primary.running() || operator.primary.cmd.Process.Pid != pidBefore {
				sc.res.Violations++
				sc.res.Restarts++
				t.Errorf("the operator process did not survive the corpus")
			}
			if err := operator.waitWebhookServing(ctx, cfg); err != nil {
				sc.res.Violations++
				t.Error(err)
			}
			recordChaos(sc.res)
			t.Logf("scenario 7: %d bad inputs, %d violations", sc.res.Faults, sc.res.Violations)
			return ctx
		}).
		Feature()
}

// webhookHTTPClient trusts the CA the operator injected into the webhook
// configuration, exactly as the apiserver does.
func webhookHTTPClient(ctx context.Context, cfg *envconf.Config) (*http.Client, error) {
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := cfg.Client().Resources().Get(ctx, "webapp-mutating-webhook-configuration", "", &mwc); err != nil {
		return nil, fmt.Errorf("reading the webhook configuration: %w", err)
	}
	pool := x509.NewCertPool()
	if len(mwc.Webhooks) == 0 || !pool.AppendCertsFromPEM(mwc.Webhooks[0].ClientConfig.CABundle) {
		return nil, fmt.Errorf("webhook configuration %s has no CA bundle", mwc.Name)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}, nil
}

// postReview posts body and returns what is wrong with the answer, ""
// when it is fine: any HTTP answer but a dropped connection or a 5xx; for a
// 200, a decodable AdmissionReview; and when names are given, a denial
// whose message names each of them.
func postReview(ctx context.Context, hc *http.Client, url string, body []byte, names ...string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "no answer: " + err.Error()
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "reading the answer: " + err.Error()
	}
	if resp.StatusCode >= 500 {
		return fmt.Sprintf("HTTP %d: %s", resp.StatusCode, truncate(out, 200))
	}
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &review); err != nil || review.Response == nil {
		return fmt.Sprintf("HTTP 200 without an AdmissionReview response (%v): %s", err, truncate(out, 200))
	}
	if len(names) == 0 {
		return ""
	}
	if review.Response.Allowed || review.Response.Result == nil || !hasAll(review.Response.Result.Message, names...) {
		return fmt.Sprintf("want a denial naming %v, got allowed=%t %+v", names, review.Response.Allowed, review.Response.Result)
	}
	return ""
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// validReview is a well-formed AdmissionReview creating a WebApp with spec.
func validReview(spec map[string]any) []byte {
	b, _ := json.Marshal(reviewObject(spec, "CREATE"))
	return b
}

func reviewObject(spec map[string]any, operation string) map[string]any {
	gvk := map[string]any{"group": "apps.example.com", "version": "v1", "kind": "WebApp"}
	return map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid": "00000000-0000-0000-0000-000000000007", "kind": gvk, "requestKind": gvk,
			"resource":  map[string]any{"group": "apps.example.com", "version": "v1", "resource": "webapps"},
			"namespace": "fuzz", "name": "fuzz", "operation": operation,
			"userInfo": map[string]any{"username": "fuzz"},
			"object": map[string]any{
				"apiVersion": "apps.example.com/v1", "kind": "WebApp",
				"metadata": map[string]any{"name": "fuzz", "namespace": "fuzz"},
				"spec":     spec,
			},
		},
	}
}

// fuzzCorpus draws n malformed AdmissionReview bodies: random bytes,
// truncated JSON, reviews with values of the wrong type, missing or odd
// fields, unknown operations, deep nesting and huge strings.
func fuzzCorpus(rng *rand.Rand, n int) [][]byte {
	out := make([][]byte, 0, n)
	for range n {
		r := reviewObject(map[string]any{"image": "registry.example.com/web:v1"}, []string{"CREATE", "UPDATE", "DELETE", "CONNECT", "", "PATCH"}[rng.IntN(6)])
		for range 1 + rng.IntN(3) {
			mutate(rng, r, 0)
		}
		b, _ := json.Marshal(r)
		switch rng.IntN(6) {
		case 0: // random bytes
			b = make([]byte, rng.IntN(2048))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
		case 1: // truncated
			if len(b) > 0 {
				b = b[:rng.IntN(len(b))]
			}
		case 2: // invalid UTF-8 and control bytes inside
			i := rng.IntN(len(b) + 1)
			b = append(b[:i:i], append([]byte{0xff, 0xfe, 0x00, '"', '\\'}, b[i:]...)...)
		}
		out = append(out, b)
	}
	return out
}

// junk returns a value of a random type, sometimes big.
func junk(rng *rand.Rand) any {
	switch rng.IntN(9) {
	case 0:
		return nil
	case 1:
		return rng.Float64() * 1e308
	case 2:
		return -rng.Int64()
	case 3:
		return strings.Repeat("x", rng.IntN(200000))
	case 4:
		return rng.IntN(2) == 0
	case 5:
		return []any{junk(rng), "a", 1}
	case 6:
		var v any = "deep"
		for range 100 + rng.IntN(2000) {
			v = []any{v}
		}
		return v
	case 7:
		return map[string]any{"kind": "Pod", "apiVersion": "v1"}
	default:
		return "\u0000\u202e" + fmt.Sprint(rng.Int())
	}
}

// mutate replaces or deletes a random node of m (depth-limited).
func mutate(rng *rand.Rand, m map[string]any, depth int) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	// Map order is random; sort for a reproducible corpus.
	slices.Sort(keys)
	k := keys[rng.IntN(len(keys))]
	if child, ok := m[k].(map[string]any); ok && depth < 4 && rng.IntN(3) > 0 {
		mutate(rng, child, depth+1)
		return
	}
	if rng.IntN(4) == 0 {
		delete(m, k)
		return
	}
	m[k] = junk(rng)
}
