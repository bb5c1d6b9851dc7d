//go:build e2e

package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// TestWebAppAPI checks what users see of the API before the controller does
// anything: the CRD's documentation and columns, and admission (schema and
// webhooks).
func TestWebAppAPI(t *testing.T) {
	crd := features.New("the WebApp CRD is installed").
		WithLabel("area", "api").
		Assess("kubectl explain shows the field documentation", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			// kubectl wraps long descriptions: compare with whitespace folded.
			fold := func(s string) string { return strings.Join(strings.Fields(s), " ") }
			// v1 is still served: its documentation is there too.
			for version, wants := range map[string][]string{
				"apps.example.com/v1": {"dbRef names the app's database", "resources are the CPU and memory each pod requests and is limited to."},
				"apps.example.com/v2": {"database is the app's database", "requests are the CPU and memory the scheduler reserves"},
			} {
				spec := fold(harness.MustKubectl(ctx, t, "explain", "--api-version="+version, "webapp.spec"))
				if version == "apps.example.com/v2" {
					spec += fold(harness.MustKubectl(ctx, t, "explain", "--api-version="+version, "webapp.spec.resources"))
				}
				for _, want := range append(wants,
					"image is the container image to run. It must carry a tag or a digest",
					"replicas is the number of pods to run, 1 to 100. Defaults to 1.",
					"image <string> -required-") {
					if !strings.Contains(spec, want) {
						t.Errorf("kubectl explain --api-version=%s webapp.spec: missing %q in:\n%s", version, want, spec)
					}
				}
			}
			if got := fold(harness.MustKubectl(ctx, t, "explain", "wa.status.conditions")); !strings.Contains(got, "conditions are Ready, Reconciling, Stalled (kstatus), DatabaseReady and Available, one of each type.") {
				t.Errorf("kubectl explain wa.status.conditions (short name): missing the conditions' documentation in:\n%s", got)
			}
			return ctx
		}).
		Assess("kubectl get wa prints READY REPLICAS IMAGE AGE", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			w := newWebApp(ns, "columns", "registry.example.com/web:v1.0.0")
			w.Spec.Replicas = new(int32(2))
			createWebApp(ctx, t, cfg, w)
			waitWebAppReady(ctx, t, cfg, ns, w.Name, 2)

			out := harness.MustKubectl(ctx, t, "get", "wa", "-n", ns)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 2 {
				t.Fatalf("kubectl get wa: want a header and one row, got:\n%s", out)
			}
			if header := strings.Fields(lines[0]); !slices.Equal(header, []string{"NAME", "READY", "REPLICAS", "IMAGE", "AGE"}) {
				t.Errorf("kubectl get wa: header %v, want NAME READY REPLICAS IMAGE AGE", header)
			}
			if row := strings.Fields(lines[1]); len(row) != 5 || !slices.Equal(row[:4], []string{"columns", "true", "2", "registry.example.com/web:v1.0.0"}) {
				t.Errorf("kubectl get wa: row %v, want columns true 2 registry.example.com/web:v1.0.0 <age>", row)
			}
			return ctx
		}).
		Feature()

	admission := features.New("admission: the schema and the webhooks").
		WithLabel("area", "api").
		Assess("the schema rejects what it can express, naming the field", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			c := cfg.Client().Resources().GetControllerRuntimeClient()
			tests := []struct {
				name string
				spec map[string]any
				want []string // all in the error message
				// One input never reaches the schema as sent: the mutating
				// webhook runs before schema validation and decodes the
				// object into the Go type first, and "three" for an int32
				// fails that decoding, so the webhook denies it with Go's
				// decode error (HTTP 400), which still names spec.replicas.
				// (A missing image does reach the schema as missing because
				// the Go field is omitempty; without it the webhook's patch
				// would add "" and the schema would report minLength.)
				anyOf     []string // at least one in the error message
				anyStatus bool     // not necessarily 422 Invalid
			}{
				{name: "an image without tag or digest", spec: map[string]any{"image": "registry.example.com/web"},
					want: []string{`spec.image: Invalid value: "registry.example.com/web": spec.image in body should match`}},
				{name: "no image", spec: map[string]any{"replicas": 2},
					want: []string{"spec.image: Required value"}},
				{name: "replicas 0", spec: map[string]any{"image": "web:v1", "replicas": 0},
					want: []string{"spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1"}},
				{name: "replicas 101", spec: map[string]any{"image": "web:v1", "replicas": 101},
					want: []string{"spec.replicas: Invalid value: 101: spec.replicas in body should be less than or equal to 100"}},
				{name: "replicas of the wrong type", spec: map[string]any{"image": "web:v1", "replicas": "three"},
					want: []string{"spec.replicas"}, anyOf: []string{"must be of type integer", "cannot unmarshal string"}, anyStatus: true},
				{name: "dbRef that is no DNS label", spec: map[string]any{"image": "web:v1", "dbRef": "Postgres_DB"},
					want: []string{`spec.dbRef: Invalid value: "Postgres_DB": spec.dbRef in body should match`}},
			}
			for _, tt := range tests {
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": webappv1.GroupVersion.String(), "kind": "WebApp",
					"metadata": map[string]any{"name": "invalid", "namespace": ns},
					"spec":     tt.spec,
				}}
				err := c.Create(ctx, u)
				switch {
				case err == nil:
					t.Errorf("%s: created, want rejected", tt.name)
				case !tt.anyStatus && !apierrors.IsInvalid(err):
					t.Errorf("%s: want 422 Invalid, got %v", tt.name, err)
				case !hasAll(err.Error(), tt.want...):
					t.Errorf("%s: error %q does not contain all of %q", tt.name, err, tt.want)
				case len(tt.anyOf) > 0 && !slices.ContainsFunc(tt.anyOf, func(s string) bool { return strings.Contains(err.Error(), s) }):
					t.Errorf("%s: error %q contains none of %q", tt.name, err, tt.anyOf)
				default:
					t.Logf("%s: rejected: %v", tt.name, err)
				}
			}
			return ctx
		}).
		Assess("the webhook rejects what a schema cannot, every field in one message", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			w := newWebApp(ns, "tiny", "registry.example.com/web:v1.0.0")
			w.Spec.Resources = &webappv1.ContainerResources{CPU: new(quantity("0")), Memory: new(quantity("1Mi"))}
			err := cfg.Client().Resources().Create(ctx, w)
			requireWebhookInvalid(t, "create with cpu 0 and memory 1Mi", err, map[string]string{
				"spec.resources.cpu":    `spec.resources.cpu: Invalid value: "0": must be positive`,
				"spec.resources.memory": `spec.resources.memory: Invalid value: "1Mi": must be at least 16Mi`,
			})

			// Updates are validated as well.
			ok := newWebApp(ns, "valid", "registry.example.com/web:v1.0.0")
			createWebApp(ctx, t, cfg, ok)
			w = &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: ok.Name, Namespace: ns}}
			err = cfg.Client().Resources().GetControllerRuntimeClient().Patch(ctx, w,
				rawMergePatch(`{"spec":{"resources":{"cpu":"0"}}}`))
			requireWebhookInvalid(t, "update to cpu 0", err, map[string]string{
				"spec.resources.cpu": `spec.resources.cpu: Invalid value: "0": must be positive`,
			})
			return ctx
		}).
		Assess("the webhook defaults replicas and resources", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			w := newWebApp(ns, "defaults", "registry.example.com/web:v1.0.0")
			createWebApp(ctx, t, cfg, w)
			stored, err := getWebApp(ctx, cfg, ns, w.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []*webappv1.WebApp{w, stored} { // the create's answer and what was stored
				if got.Spec.Replicas == nil || *got.Spec.Replicas != 1 {
					t.Errorf("spec.replicas = %v, want 1", got.Spec.Replicas)
				}
				r := got.Spec.Resources
				if r == nil || r.CPU == nil || r.Memory == nil || r.CPU.Cmp(quantity("500m")) != 0 || r.Memory.Cmp(quantity("256Mi")) != 0 {
					t.Errorf("spec.resources = %+v, want cpu 500m, memory 256Mi", r)
				}
			}
			return ctx
		}).
		Assess("the :latest warning reaches the client", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			c, warnings := clientWithWarnings(t, cfg)
			if err := c.Create(ctx, newWebApp(ns, "floating", "registry.example.com/web:latest")); err != nil {
				t.Fatalf("create with :latest (allowed, with a warning): %v", err)
			}
			want := `spec.image: the tag "latest" can change under a running WebApp; pin a version or a digest`
			if got := warnings.all(); !slices.Contains(got, want) {
				t.Errorf("warnings %q, want %q", got, want)
			}
			return ctx
		}).
		Feature()

	testenv.Test(t, crd, admission)
}

// requireWebhookInvalid fails t unless err is the validating webhook's 422
// naming every field of want (field -> text) in one message and in the
// status causes.
func requireWebhookInvalid(t *testing.T, what string, err error, want map[string]string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: admitted, want rejected by the validating webhook", what)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("%s: want a 422 Invalid status, got %v", what, err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `admission webhook "vwebapp-v1.kb.io" denied the request`) {
		t.Errorf("%s: %q is not the validating webhook's answer", what, msg)
	}
	causes := map[string]bool{}
	if d := status.Status().Details; d != nil {
		for _, c := range d.Causes {
			causes[c.Field] = true
		}
	}
	for field, text := range want {
		if !strings.Contains(msg, text) {
			t.Errorf("%s: message %q lacks %q", what, msg, text)
		}
		if !causes[field] {
			t.Errorf("%s: status causes %v lack field %s", what, causes, field)
		}
	}
}
