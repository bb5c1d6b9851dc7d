package main

import (
	"bytes"
	"encoding/json"
	"go/format"
	"os"
	"strings"
	"testing"
)

// scaffold is the universe kubebuilder v4.16.0 sends after go/v4's
// `create api --group web --version v1 --kind Site` in a project made with
// `init --domain example.com --repo example.com/site-operator`
// (testdata/scaffold holds the files the plugin edits).
func scaffold(t *testing.T) request {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile("testdata/scaffold/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return request{
		APIVersion: "v1alpha1",
		Command:    "create api",
		Args:       []string{"--group", "web", "--version=v1", "--kind", "Site", "--resource", "--controller"},
		Config:     map[string]any{"projectName": "site-operator", "domain": "example.com", "repo": "example.com/site-operator"},
		Universe: map[string]string{
			"go.mod":                                 "module example.com/site-operator\n\ngo 1.26.0\n\nrequire sigs.k8s.io/controller-runtime v0.25.0\n",
			"api/v1/site_types.go":                   read("site_types.go.txt"),
			"internal/controller/site_controller.go": read("site_controller.go.txt"),
			"config/samples/web_v1_site.yaml":        read("web_v1_site.yaml.txt"),
		},
	}
}

// TestCreateAPI: over the scaffold's files, create api writes the
// controller, its test and the type (gofmt-clean, with the scaffold's
// license header and names) and requires the kit in go.mod.
func TestCreateAPI(t *testing.T) {
	res := handle(scaffold(t))
	if res.Error {
		t.Fatal(res.ErrorMsgs)
	}
	var files []string
	for name, src := range res.Universe {
		files = append(files, name)
		if !strings.HasSuffix(name, ".go") {
			continue
		}
		formatted, err := format.Source([]byte(src))
		if err != nil {
			t.Errorf("%s does not parse: %v", name, err)
		} else if string(formatted) != src {
			t.Errorf("%s is not gofmt-clean", name)
		}
		if !strings.HasPrefix(src, "/*\nCopyright") {
			t.Errorf("%s lost the scaffold's license header", name)
		}
	}
	if len(files) != 6 {
		t.Errorf("wrote %v, want the type, the controller, its test, the sample, a dashboard and go.mod", files)
	}
	if d := res.Universe["config/grafana/site-reconcilekit.json"]; !strings.Contains(d, `reconcilekit_noop_passes_total{controller=\"site\"}`) {
		t.Error("no dashboard of the site controller")
	}
	if sample := res.Universe["config/samples/web_v1_site.yaml"]; !strings.HasSuffix(sample, "\nspec:\n  replicas: 1\n") {
		t.Errorf("the sample's spec is not valid:\n%s", sample)
	}
	controller := res.Universe["internal/controller/site_controller.go"]
	for _, want := range []string{
		"type SiteReconciler struct",
		`name = "site"`,
		`fieldManager = "site-operator"`,
		`finalizer = "web.example.com/cleanup"`,
		"// +kubebuilder:rbac:groups=web.example.com,resources=sites,verbs=get;list;watch;patch\n",
		"// +kubebuilder:rbac:groups=web.example.com,resources=sites/status,verbs=get;patch\n",
		`webv1 "example.com/site-operator/api/v1"`,
		"reconciler.Options[*webv1.Site]{",
		"Condition: webv1.Available",
	} {
		if !strings.Contains(controller, want) {
			t.Errorf("the controller lacks %q", want)
		}
	}
	if test := res.Universe["internal/controller/site_controller_test.go"]; !strings.Contains(test, `filepath.Join("..", "..", "config", "rbac", "role.yaml")`) ||
		!strings.Contains(test, `"site-operator-system", "site-operator-controller-manager"`) {
		t.Error("the test does not find the generated role or the operator's ServiceAccount")
	}
	types := res.Universe["api/v1/site_types.go"]
	for _, want := range []string{
		"Image string `json:\"image,omitempty\"`",
		"Replicas *int32 `json:\"replicas,omitempty\"`",
		"ObservedGeneration int64 `json:\"observedGeneration,omitempty\"`",
		"Conditions []metav1.Condition `json:\"conditions,omitempty\"`",
		"+kubebuilder:printcolumn:name=\"Ready\"",
		"func (o *Site) SetConditions(conds []metav1.Condition)",
		"+kubebuilder:validation:Pattern=`^[^\\s@]*(",
	} {
		if !strings.Contains(types, want) {
			t.Errorf("the type lacks %q", want)
		}
	}
	if strings.Contains(types, "Foo") {
		t.Error("the scaffold's example field foo is still there")
	}
	if gomod := res.Universe["go.mod"]; !strings.Contains(gomod, "\nrequire github.com/reconcilekit/reconcilekit "+Version+"\n") {
		t.Errorf("go.mod does not require the kit at %s:\n%s", Version, gomod)
	}
}

// TestCreateAPIRefusesEditedFiles: a controller or type that is not the
// scaffold's is refused with its file named, never half edited.
func TestCreateAPIRefusesEditedFiles(t *testing.T) {
	for _, tc := range []struct {
		file, from, to, want string
	}{
		{"internal/controller/site_controller.go", "type SiteReconciler struct", "type X struct", "internal/controller/site_controller.go: no Reconciler type"},
		{"api/v1/site_types.go", "Foo *string", "Bar *string", "api/v1/site_types.go: found the example field foo in SiteSpec 0 times"},
		{"go.mod", "module", "", ""},
	} {
		req := scaffold(t)
		if tc.to == "" {
			delete(req.Universe, tc.file)
			tc.want = "go.mod: not found"
		} else {
			req.Universe[tc.file] = strings.Replace(req.Universe[tc.file], tc.from, tc.to, 1)
		}
		res := handle(req)
		if !res.Error || len(res.ErrorMsgs) != 1 || !strings.Contains(res.ErrorMsgs[0], tc.want) || res.Universe != nil {
			t.Errorf("%s edited: %v %q, want an error with %q and no files", tc.file, res.Error, res.ErrorMsgs, tc.want)
		}
	}
	req := scaffold(t)
	req.Args = append(req.Args, "--controller=false")
	if res := handle(req); !res.Error {
		t.Error("--controller=false accepted")
	}
}

// TestRequireKit: init adds the requirement (and the replace directive of
// a plugin built from a checkout) once.
func TestRequireKit(t *testing.T) {
	defer func(r string) { Replace = r }(Replace)
	Replace = "/src/reconcilekit"
	mod := "module m\n\ngo 1.26.0\n"
	out, err := requireKit(map[string]string{"go.mod": mod})
	if err != nil {
		t.Fatal(err)
	}
	want := mod + "\nrequire github.com/reconcilekit/reconcilekit " + Version + "\n\nreplace github.com/reconcilekit/reconcilekit => /src/reconcilekit\n"
	if out["go.mod"] != want {
		t.Fatalf("go.mod:\n%s\nwant:\n%s", out["go.mod"], want)
	}
	// After go mod tidy: in a block, the replace kept.
	tidied := "module m\n\nrequire (\n\tgithub.com/reconcilekit/reconcilekit v0.1.0\n)\n\nreplace github.com/reconcilekit/reconcilekit => /src/reconcilekit\n"
	if out, _ := requireKit(map[string]string{"go.mod": tidied}); len(out) != 0 {
		t.Errorf("rewrote a go.mod that has both: %q", out["go.mod"])
	}
	// Tidy dropped the requirement (nothing imported the kit yet): the
	// replace alone does not count.
	dropped := "module m\n\nreplace github.com/reconcilekit/reconcilekit => /src/reconcilekit\n"
	if out, _ := requireKit(map[string]string{"go.mod": dropped}); !strings.Contains(out["go.mod"], "require github.com/reconcilekit/reconcilekit ") {
		t.Errorf("a replace directive was taken for a requirement: %q", out["go.mod"])
	}
}

// TestServe: the protocol's other commands, over stdin and stdout.
func TestServe(t *testing.T) {
	for _, tc := range []struct {
		req  request
		want func(response) bool
	}{
		{request{Command: "metadata", Args: []string{"--api"}}, func(r response) bool { return strings.Contains(r.Metadata.Description, "reconcilekit reconciler") }},
		{request{Command: "flags", Args: []string{"--api"}}, func(r response) bool { return !r.Error && len(r.Flags) == 0 }},
		{request{Command: "create webhook", Args: []string{"--kind", "Site", "--version", "v1", "--conversion"}}, func(r response) bool {
			return r.Error && strings.Contains(r.ErrorMsgs[0], "--conversion is not supported")
		}},
		{request{Command: "bogus"}, func(r response) bool { return r.Error && strings.Contains(r.ErrorMsgs[0], `unknown command "bogus"`) }},
	} {
		in, _ := json.Marshal(tc.req)
		var out bytes.Buffer
		if err := serve(bytes.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		var res response
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if res.APIVersion != "v1alpha1" || res.Command != tc.req.Command || !tc.want(res) {
			t.Errorf("%s: %+v", tc.req.Command, res)
		}
	}
	if err := serve(strings.NewReader("not json"), &bytes.Buffer{}); err == nil {
		t.Error("a request that is not JSON was served")
	}
}

func TestParseArgs(t *testing.T) {
	got := parseArgs([]string{"--group", "web", "--version=v1", "--resource", "--kind", "Site", "--make=false", "stray"})
	want := map[string]string{"group": "web", "version": "v1", "resource": "true", "kind": "Site", "make": "false"}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// TestCreateWebhook: over go/v4's webhook (after create api of this
// plugin), create webhook serves the same webhooks with webhookkit: the
// scaffold's markers verbatim (so the paths and configurations stay),
// Setup<Kind>WebhookWithManager kept for the suite and main.go, the image
// checked with webhookkit's grammar, and a test through the API server.
func TestCreateWebhook(t *testing.T) {
	api := handle(scaffold(t))
	if api.Error {
		t.Fatal(api.ErrorMsgs)
	}
	read := func(name string) string {
		b, err := os.ReadFile("testdata/scaffold/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	scaffolded := read("site_webhook.go.txt")
	req := request{Command: "create webhook", Config: scaffold(t).Config,
		Args: []string{"--group", "web", "--version", "v1", "--kind", "Site", "--defaulting", "--programmatic-validation"},
		Universe: map[string]string{
			"api/v1/site_types.go":                     api.Universe["api/v1/site_types.go"],
			"internal/webhook/v1/site_webhook.go":      scaffolded,
			"internal/webhook/v1/site_webhook_test.go": read("site_webhook_test.go.txt"),
		}}
	res := handle(req)
	if res.Error {
		t.Fatal(res.ErrorMsgs)
	}
	if len(res.Universe) != 2 {
		t.Errorf("wrote %d files, want the webhook and its test", len(res.Universe))
	}
	for name, src := range res.Universe {
		formatted, err := format.Source([]byte(src))
		if err != nil {
			t.Errorf("%s does not parse: %v", name, err)
		} else if string(formatted) != src {
			t.Errorf("%s is not gofmt-clean", name)
		}
	}
	wh := res.Universe["internal/webhook/v1/site_webhook.go"]
	markers := webhookMarkerRE.FindAllString(scaffolded, -1)
	if len(markers) != 2 {
		t.Fatalf("the scaffold has %d webhook markers, want 2", len(markers))
	}
	for _, want := range append(markers,
		"func SetupSiteWebhookWithManager(mgr ctrl.Manager) error {",
		"webhookkit.Register(mgr, webhookkit.Webhook[*webv1.Site]{",
		"Default:        defaultSite,", // gofmt-aligned with the Validate functions
		"ValidateUpdate: validateSiteUpdate,",
		`webhookkit.ImageReference(spec.Child("image"), obj.Spec.Image)`,
		"webhookkit.Ratchet(") {
		if !strings.Contains(wh, want) {
			t.Errorf("the webhook lacks %q", want)
		}
	}
	if test := res.Universe["internal/webhook/v1/site_webhook_test.go"]; !strings.Contains(test, `obj.Spec.Image = "Nginx:1.29"`) {
		t.Error("the test does not try an invalid image")
	}

	// A webhook without the image field gets a validation stub, and only
	// the webhooks the scaffold made.
	req.Universe["api/v1/site_types.go"] = read("site_types.go.txt")
	req.Universe["internal/webhook/v1/site_webhook.go"] = scaffolded[:strings.Index(scaffolded, "// TODO(user): change verbs")]
	res = handle(req)
	if res.Error {
		t.Fatal(res.ErrorMsgs)
	}
	wh = res.Universe["internal/webhook/v1/site_webhook.go"]
	if strings.Contains(wh, "ValidateCreate") || strings.Contains(wh, "Image") || !strings.Contains(wh, "Default: defaultSite,") {
		t.Errorf("a defaulting webhook alone:\n%s", wh)
	}
	if _, err := format.Source([]byte(wh)); err != nil {
		t.Errorf("does not parse: %v", err)
	}
}
