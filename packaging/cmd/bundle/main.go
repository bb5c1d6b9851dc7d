// Command bundle writes the WebApp operator's OLM bundle
// (examples/webapp/bundle, bundle.Dockerfile), its file-based catalog
// (examples/webapp/catalog) and the Helm chart's CRD from
// examples/webapp/config: `make bundle`. packaging's tests fail when what
// is committed differs from what this writes.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/reconcilekit/reconcilekit/packaging/internal/olm"
)

func main() {
	r := olm.Default
	root := flag.String("root", "..", "the repository root")
	flag.StringVar(&r.Version, "version", r.Version, "operator version (semver)")
	flag.StringVar(&r.Image, "image", "", "operator image (default "+olm.ImageRepo+":v<version>)")
	flag.StringVar(&r.BundleImage, "bundle-image", "", "bundle image the catalog refers to (default "+olm.ImageRepo+"-bundle:v<version>)")
	flag.StringVar(&r.Replaces, "replaces", r.Replaces, "the CSV this release replaces, e.g. webapp-operator.v0.1.0")
	flag.StringVar(&r.SkipRange, "skip-range", r.SkipRange, "olm.skipRange, e.g. '>=0.1.0 <0.2.0'")
	channels := flag.String("channels", strings.Join(r.Channels, ","), "channels, the default first")
	flag.Parse()
	r.Channels = strings.Split(*channels, ",")

	files, err := olm.Generate(*root, r)
	if err == nil {
		err = olm.Write(*root, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bundle:", err)
		os.Exit(1)
	}
	for p := range files {
		fmt.Println("wrote", p)
	}
}
