package webhookkit

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The fuzz targets check that the helpers never panic and that their answers
// are consistent with each other. Seeds live in testdata/fuzz/<FuzzName>/ and
// run as ordinary tests; `go test -fuzz=FuzzImageReference ./webhookkit`
// explores further.

var fuzzPath = field.NewPath("spec", "x")

func FuzzImageReference(f *testing.F) {
	f.Add("nginx:1.25")
	f.Fuzz(func(t *testing.T, s string) {
		errs := ImageReference(fuzzPath, s)
		ref, err := parseImageReference(s)
		if err != nil {
			if len(errs) != 1 {
				t.Fatalf("%q: parse error %v but %d field errors", s, err, len(errs))
			}
			return
		}
		if got := ref.String(); got != s {
			t.Fatalf("%q: round trip gave %q", s, got)
		}
		if errs == nil {
			if ref.tag == "" && ref.digest == "" {
				t.Fatalf("%q accepted without tag or digest", s)
			}
			if strings.ContainsAny(s, " \t\n") {
				t.Fatalf("%q accepted with whitespace", s)
			}
		} else if ref.tag != "" || ref.digest != "" {
			t.Fatalf("%q parsed with tag/digest but rejected: %v", s, errs)
		}
	})
}

func FuzzQuantity(f *testing.F) {
	f.Add("1Gi")
	f.Fuzz(func(t *testing.T, s string) {
		errs := Quantity(fuzzPath, s)
		perrs := PositiveQuantity(fuzzPath, s)
		if errs != nil {
			if perrs == nil {
				t.Fatalf("%q: positive but not a quantity", s)
			}
			return
		}
		q := resource.MustParse(s) // must not panic for accepted input
		if (perrs == nil) != (q.Sign() > 0) {
			t.Fatalf("%q: PositiveQuantity=%v but sign %d", s, perrs, q.Sign())
		}
	})
}

func FuzzDNS1123(f *testing.F) {
	f.Add("my-service")
	f.Fuzz(func(t *testing.T, s string) {
		label := DNS1123Label(fuzzPath, s)
		sub := DNS1123Subdomain(fuzzPath, s)
		if label == nil {
			if sub != nil {
				t.Fatalf("%q: a valid label must be a valid subdomain: %v", s, sub)
			}
			if len(s) > 63 || strings.ToLower(s) != s || strings.Contains(s, ".") {
				t.Fatalf("%q accepted as a label", s)
			}
		}
		if sub == nil && (len(s) > 253 || s == "") {
			t.Fatalf("%q accepted as a subdomain", s)
		}
	})
}
