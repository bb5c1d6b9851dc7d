package main

import (
	"bytes"
	"embed"
	"fmt"
	"go/format"
	"path"
	"regexp"
	"strings"
	"text/template"
)

//go:embed templates
var templates embed.FS

// resource is what create api scaffolds for: read from the files go/v4
// just wrote, so that names agree with the scaffold's.
type resource struct {
	Kind, Group, Version string
	// Package is the controller's package; Reconciler its type.
	Package, Reconciler string
	// APIAlias and APIPath import the API package.
	APIAlias, APIPath string
	// RBAC is the scaffold's marker prefix: groups=…,[namespace=…,]
	// resources=; Plural is the plural, QualifiedGroup the API group.
	RBAC, Plural, QualifiedGroup string
	// Name is the controller's name (Named in the scaffold), the field
	// manager the project's name.
	Name, FieldManager string
	// Namespace and ServiceAccount are those config/default deploys the
	// operator as.
	Namespace, ServiceAccount string
	// Up is the controller test's way up to the project's root, as
	// filepath.Join's arguments.
	Up string
	// Markers, Defaulting, Validating and HasImage are create webhook's:
	// the scaffold's +kubebuilder:webhook markers, which webhooks it made,
	// and whether the type has create api's image field.
	Markers                          []string
	Defaulting, Validating, HasImage bool

	typesFile, controllerFile, testFile string
}

// createAPI rewrites the scaffold's types, controller and controller test.
func createAPI(req request) (map[string]string, error) {
	args := parseArgs(req.Args)
	r := resource{Kind: args["kind"], Group: args["group"], Version: args["version"]}
	if r.Kind == "" || r.Version == "" {
		return nil, fmt.Errorf("create api: --kind and --version are required")
	}
	if args["controller"] == "false" || args["resource"] == "false" {
		return nil, fmt.Errorf("create api: the reconcilekit plugin scaffolds a resource and its controller together (--resource --controller)")
	}
	project, _ := req.Config["projectName"].(string)
	if project == "" {
		return nil, fmt.Errorf("create api: PROJECT has no projectName")
	}
	r.FieldManager, r.Namespace, r.ServiceAccount = project, project+"-system", project+"-controller-manager"
	lower := strings.ToLower(r.Kind)
	r.typesFile, r.controllerFile = path.Join("api", r.Version, lower+"_types.go"), path.Join("internal", "controller", lower+"_controller.go")
	if multi, _ := req.Config["multigroup"].(bool); multi && r.Group != "" {
		r.typesFile, r.controllerFile = path.Join("api", r.Group, r.Version, lower+"_types.go"), path.Join("internal", "controller", r.Group, lower+"_controller.go")
	}
	r.Up = strings.TrimSuffix(strings.Repeat(`"..", `, strings.Count(r.controllerFile, "/")), ", ")
	r.testFile = strings.TrimSuffix(r.controllerFile, ".go") + "_test.go"

	controller, ok := req.Universe[r.controllerFile]
	if !ok {
		return nil, fmt.Errorf("%s: not found; run the plugin after go/v4, with --controller", r.controllerFile)
	}
	if err := r.readController(controller); err != nil {
		return nil, fmt.Errorf("%s: %w", r.controllerFile, err)
	}
	types, ok := req.Universe[r.typesFile]
	if !ok {
		return nil, fmt.Errorf("%s: not found; run the plugin after go/v4, with --resource", r.typesFile)
	}
	newTypes, err := r.editTypes(types)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.typesFile, err)
	}
	header := boilerplate(controller)
	out := map[string]string{r.typesFile: newTypes}
	sample := path.Join("config", "samples", sampleName(r.Group, r.Version, lower))
	if src, ok := req.Universe[sample]; ok {
		// The scaffold's sample has a null spec, which the CRD refuses
		// (spec is required); every field has a default.
		spec := "spec:\n  # TODO(user): Add fields here\n"
		if !strings.Contains(src, spec) {
			return nil, fmt.Errorf("%s: no %q: not the sample go/v4 scaffolds (already edited?)", sample, spec)
		}
		out[sample] = strings.Replace(src, spec, "spec:\n  replicas: 1\n", 1)
	}
	for file, tmpl := range map[string]string{r.controllerFile: "controller.go.tmpl", r.testFile: "controller_test.go.tmpl"} {
		if out[file], err = r.renderGo(tmpl, header); err != nil {
			return nil, err
		}
	}
	dashboard, err := r.render("dashboard.json.tmpl")
	if err != nil {
		return nil, err
	}
	out[path.Join("config", "grafana", r.Name+"-reconcilekit.json")] = dashboard
	gomod, err := requireKit(req.Universe)
	if err != nil {
		return nil, err
	}
	for k, v := range gomod {
		out[k] = v
	}
	return out, nil
}

// parseArgs reads --name value and --name=value pairs; a flag followed by
// another flag (or nothing) is "true".
func parseArgs(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			continue
		}
		if k, v, eq := strings.Cut(name, "="); eq {
			out[k] = v
			continue
		}
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			out[name] = args[i+1]
			i++
			continue
		}
		out[name] = "true"
	}
	return out
}

var (
	packageRE    = regexp.MustCompile(`(?m)^package (\w+)$`)
	reconcilerRE = regexp.MustCompile(`(?m)^type (\w+Reconciler) struct`)
	rbacRE       = regexp.MustCompile(`(?m)^// \+kubebuilder:rbac:(groups=([^,]*),(?:namespace=[^,]*,)?resources=)(\w+),verbs=`)
	namedRE      = regexp.MustCompile(`Named\("([^"]+)"\)`)
)

// readController reads the names go/v4 chose from its controller.
func (r *resource) readController(src string) error {
	find := func(re *regexp.Regexp, what string) ([]string, error) {
		m := re.FindStringSubmatch(src)
		if m == nil {
			return nil, fmt.Errorf("no %s: not the controller go/v4 scaffolds (already edited?)", what)
		}
		return m, nil
	}
	for _, f := range []struct {
		re   *regexp.Regexp
		what string
		set  func(m []string)
	}{
		{packageRE, "package clause", func(m []string) { r.Package = m[1] }},
		{reconcilerRE, "Reconciler type", func(m []string) { r.Reconciler = m[1] }},
		{rbacRE, "+kubebuilder:rbac marker", func(m []string) { r.RBAC, r.QualifiedGroup, r.Plural = m[1], m[2], m[3] }},
		{namedRE, "Named(...) controller name", func(m []string) { r.Name = m[1] }},
		{regexp.MustCompile(`(?m)^\s*(\w+) "([^"]+/` + regexp.QuoteMeta(r.Version) + `)"$`), "import of the API package", func(m []string) { r.APIAlias, r.APIPath = m[1], m[2] }},
	} {
		m, err := find(f.re, f.what)
		if err != nil {
			return err
		}
		f.set(m)
	}
	return nil
}

// boilerplate is the license header above the package clause.
func boilerplate(src string) string {
	if i := packageRE.FindStringIndex(src); i != nil {
		return src[:i[0]]
	}
	return ""
}

// renderGo renders a Go template below the scaffold's license header,
// formatted as gofmt does (a template's alignment depends on which of its
// optional lines it keeps).
func (r *resource) renderGo(name, header string) (string, error) {
	text, err := r.render(name)
	if err != nil {
		return "", err
	}
	src, err := format.Source([]byte(header + text))
	if err != nil {
		return "", fmt.Errorf("template %s: the Go it makes does not parse: %w", name, err)
	}
	return string(src), nil
}

func (r *resource) render(name string) (string, error) {
	// [[ ]]: Go code has {{ (a slice of structs' literals).
	t, err := template.New(name).Delims("[[", "]]").ParseFS(templates, "templates/"+name)
	if err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, r); err != nil {
		return "", fmt.Errorf("template %s: %w", name, err)
	}
	return b.String(), nil
}

// sampleName is the file name go/v4 gives a resource's sample.
func sampleName(group, version, lowerKind string) string {
	if group == "" {
		return version + "_" + lowerKind + ".yaml"
	}
	return group + "_" + version + "_" + lowerKind + ".yaml"
}
