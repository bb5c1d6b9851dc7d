package packaging

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	"github.com/operator-framework/api/pkg/validation/errors"
	validator "github.com/operator-framework/api/pkg/validation/interfaces"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/reconcilekit/reconcilekit/packaging/internal/olm"
)

const (
	repoRoot  = ".."
	bundleDir = repoRoot + "/" + olm.BundleDir
)

// TestBundleValidators runs every validator suite operator-framework/api
// ships on the committed bundle, each on its own so that a finding names
// its suite. Every error fails; every warning fails unless it is listed in
// acceptedWarnings with the reason it does not apply.
func TestBundleValidators(t *testing.T) {
	bundle, err := manifests.GetBundleFromDir(bundleDir)
	require.NoError(t, err)
	require.NotNil(t, bundle.CSV)

	// The options some suites read: the Kubernetes version deprecated and
	// removed APIs are judged against (the toolchain's), the bundle image's
	// Dockerfile (community), and no container tool: the multi-arch suite
	// would pull the operator image, which is not published from here.
	opts := map[string]string{
		"k8s-version":     "1.37",
		"index-path":      filepath.Join(repoRoot, olm.BundleDocker),
		"container-tools": "none",
	}
	objs := append(bundle.ObjectsToValidate(), bundle, opts)

	suites := map[string]validator.Validator{
		"ClusterServiceVersion":    validation.ClusterServiceVersionValidator,
		"CustomResourceDefinition": validation.CustomResourceDefinitionValidator,
		"Bundle":                   validation.BundleValidator,
		"OperatorHub":              validation.OperatorHubValidator, //nolint:staticcheck // deprecated for OperatorHubV2, still shipped: run both
		"OperatorHubV2":            validation.OperatorHubV2Validator,
		"StandardCategories":       validation.StandardCategoriesValidator,
		"StandardCapabilities":     validation.StandardCapabilitiesValidator,
		"Object":                   validation.ObjectValidator,
		"OperatorGroup":            validation.OperatorGroupValidator,
		"CommunityOperator":        validation.CommunityOperatorValidator, //nolint:staticcheck // deprecated, still shipped: run it
		"AlphaDeprecatedAPIs":      validation.AlphaDeprecatedAPIsValidator,
		"GoodPractices":            validation.GoodPracticesValidator,
		"MultipleArchitectures":    validation.MultipleArchitecturesValidator,
		"PackageManifest":          validation.PackageManifestValidator,
	}
	assert.Len(t, suites, len(validation.AllValidators)+1, "every suite of AllValidators, plus the deprecated OperatorHub one")

	var errs, warns int
	for name, v := range suites {
		if name == "MultipleArchitectures" {
			// It runs `docker pull` of the operator image, which is in no
			// registry and must not be fetched from one here: without a
			// docker on PATH it checks the CSV's labels and affinity only.
			t.Setenv("PATH", t.TempDir())
		}
		seen := map[string]bool{}
		for _, res := range v.Validate(objs...) {
			for _, e := range res.Errors {
				errs++
				t.Errorf("%s: error: %s", name, e)
			}
			for _, w := range res.Warnings {
				// A suite that reads both the bundle and its CSV reports
				// a CSV finding twice.
				if seen[w.Error()] {
					continue
				}
				seen[w.Error()] = true
				warns++
				if why, ok := accepted(name, w); ok {
					t.Logf("%s: accepted warning: %s (%s)", name, w, why)
					continue
				}
				t.Errorf("%s: warning: %s", name, w)
			}
		}
	}
	t.Logf("%d suites: %d errors, %d warnings", len(suites), errs, warns)
}

// acceptedWarnings are warnings that do not apply to this bundle, each
// with why, keyed by suite and a substring of the warning.
var acceptedWarnings = map[string]map[string]string{
	// The deprecated-API checks warn about any RBAC rule on events in
	// events.k8s.io because events.k8s.io/v1beta1 was removed in 1.25; a
	// rule names a group, never a version. The operator records events
	// with events.k8s.io/v1 (GA since 1.19, client-go's events package).
	"AlphaDeprecatedAPIs": {"Migrate the API(s) for events": "events.k8s.io/v1, not the removed v1beta1"},
	"OperatorHubV2":       {"Migrate the API(s) for events": "events.k8s.io/v1, not the removed v1beta1"},
	"OperatorHub": {
		"Migrate the API(s) for events": "events.k8s.io/v1, not the removed v1beta1",
		// The suite's own deprecation notice; OperatorHubV2,
		// StandardCapabilities and StandardCategories run too.
		`"operatorhub" validator is deprecated`: "its replacements run as well",
	},
	// The image is built offline (hack/image.sh) and published to no
	// registry, so its platforms cannot be read; the CSV's labels and the
	// Deployment's node affinity declare linux/amd64.
	// Comparing the declared platforms with the image's is then comparing
	// with "error/error", the suite's placeholder for an image it could
	// not read.
	"MultipleArchitectures": {
		"unable to inspect the image": "the image is in no registry",
		`["error/error"]`:             "the image's platforms are unknown, see above",
	},
}

func accepted(suite string, w errors.Error) (string, bool) {
	for sub, why := range acceptedWarnings[suite] {
		if strings.Contains(w.Error(), sub) {
			return why, true
		}
	}
	return "", false
}

// TestBundleUpToDate regenerates the bundle, the catalog and the chart's
// CRD from config/ (what `make bundle` does) and compares them with what is
// committed, like `make verify-generated` for controller-gen's output.
func TestBundleUpToDate(t *testing.T) {
	files, err := olm.Generate(repoRoot, olm.Default)
	require.NoError(t, err)
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(repoRoot, p))
		if !assert.NoError(t, err, "%s is not committed: run `make bundle`", p) {
			continue
		}
		assert.Equal(t, string(want), string(got), "%s is stale: run `make bundle`", p)
	}
	for _, dir := range []string{olm.BundleDir, olm.CatalogDir} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(repoRoot, p)
			if err != nil {
				return err
			}
			assert.Contains(t, files, filepath.ToSlash(rel), "%s is not generated by `make bundle`: remove it", rel)
			return nil
		})
		require.NoError(t, err, fmt.Sprint(dir))
	}
}

// TestCatalog checks the file-based catalog the way `opm validate` would
// for one package (opm is not on the module proxy): one olm.package whose
// default channel exists, channel entries that are bundles of the catalog,
// and a bundle whose olm.package and olm.gvk properties are the bundle
// directory's CSV and CRD.
func TestCatalog(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, olm.CatalogFile))
	require.NoError(t, err)
	docs, err := olm.Decode(b)
	require.NoError(t, err)
	bundle, err := manifests.GetBundleFromDir(bundleDir)
	require.NoError(t, err)

	bySchema := map[string][]map[string]any{}
	for _, d := range docs {
		schema, _ := d.Object["schema"].(string)
		bySchema[schema] = append(bySchema[schema], d.Object)
	}
	require.Len(t, bySchema["olm.package"], 1)
	pkg := bySchema["olm.package"][0]
	assert.Equal(t, olm.Package, pkg["name"])
	require.Len(t, bySchema["olm.bundle"], 1)
	bun := bySchema["olm.bundle"][0]
	assert.Equal(t, bundle.CSV.Name, bun["name"])
	assert.Equal(t, olm.Package, bun["package"])

	channels := map[string]bool{}
	for _, ch := range bySchema["olm.channel"] {
		channels[ch["name"].(string)] = true
		assert.Equal(t, olm.Package, ch["package"])
		entries, _ := ch["entries"].([]any)
		require.NotEmpty(t, entries)
		for _, e := range entries {
			assert.Equal(t, bun["name"], e.(map[string]any)["name"], "channel %s lists a bundle of the catalog", ch["name"])
		}
	}
	assert.True(t, channels[pkg["defaultChannel"].(string)], "the default channel %v exists", pkg["defaultChannel"])

	props := map[string]map[string]any{}
	var gvks []any
	for _, p := range bun["properties"].([]any) {
		p := p.(map[string]any)
		props[p["type"].(string)] = p["value"].(map[string]any)
		if p["type"] == "olm.gvk" {
			gvks = append(gvks, p["value"])
		}
	}
	assert.Equal(t, map[string]any{"packageName": olm.Package, "version": bundle.CSV.Spec.Version.String()}, props["olm.package"])
	require.Len(t, bundle.V1CRDs, 1)
	crd := bundle.V1CRDs[0]
	var want []any
	for _, v := range crd.Spec.Versions {
		want = append(want, map[string]any{"group": crd.Spec.Group, "kind": crd.Spec.Names.Kind, "version": v.Name})
	}
	assert.Equal(t, want, gvks, "one olm.gvk per served version")
}
