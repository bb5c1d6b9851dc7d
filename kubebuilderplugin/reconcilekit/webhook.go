package main

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

var webhookMarkerRE = regexp.MustCompile(`(?m)^// \+kubebuilder:webhook:.*$`)

// createWebhook rewrites the webhook go/v4 scaffolds (and its test) to
// serve the same webhooks, on the same paths, with webhookkit.
func createWebhook(req request) (map[string]string, error) {
	args := parseArgs(req.Args)
	r := resource{Kind: args["kind"], Group: args["group"], Version: args["version"]}
	if r.Kind == "" || r.Version == "" {
		return nil, fmt.Errorf("create webhook: --kind and --version are required")
	}
	if args["conversion"] == "true" {
		return nil, fmt.Errorf("create webhook: --conversion is not supported by the reconcilekit plugin; scaffold conversion webhooks with go/v4 alone")
	}
	lower := strings.ToLower(r.Kind)
	dir, typesDir := path.Join("internal", "webhook", r.Version), path.Join("api", r.Version)
	if multi, _ := req.Config["multigroup"].(bool); multi && r.Group != "" {
		dir, typesDir = path.Join("internal", "webhook", r.Group, r.Version), path.Join("api", r.Group, r.Version)
	}
	file, testFile := path.Join(dir, lower+"_webhook.go"), path.Join(dir, lower+"_webhook_test.go")
	src, ok := req.Universe[file]
	if !ok {
		return nil, fmt.Errorf("%s: not found; run the plugin after go/v4, with --defaulting or --programmatic-validation", file)
	}
	m := packageRE.FindStringSubmatch(src)
	imp := regexp.MustCompile(`(?m)^\s*(\w+) "([^"]+/` + regexp.QuoteMeta(r.Version) + `)"$`).FindStringSubmatch(src)
	if m == nil || imp == nil || !strings.Contains(src, "func Setup"+r.Kind+"WebhookWithManager(") {
		return nil, fmt.Errorf("%s: not the webhook go/v4 scaffolds (already edited?)", file)
	}
	r.Package, r.APIAlias, r.APIPath = m[1], imp[1], imp[2]
	r.Markers = webhookMarkerRE.FindAllString(src, -1)
	r.Defaulting = strings.Contains(src, r.Kind+"Defaulter struct")
	r.Validating = strings.Contains(src, r.Kind+"Validator struct")
	if !r.Defaulting && !r.Validating || len(r.Markers) == 0 {
		return nil, fmt.Errorf("%s: no defaulting or validating webhook to serve", file)
	}
	r.HasImage = strings.Contains(req.Universe[path.Join(typesDir, lower+"_types.go")], "Image string `json:\"image,omitempty\"`")
	header := boilerplate(src)
	out := map[string]string{}
	for f, tmpl := range map[string]string{file: "webhook.go.tmpl", testFile: "webhook_test.go.tmpl"} {
		var err error
		if out[f], err = r.renderGo(tmpl, header); err != nil {
			return nil, err
		}
	}
	return out, nil
}
