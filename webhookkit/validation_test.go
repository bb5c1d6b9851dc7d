package webhookkit

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestImageReference(t *testing.T) {
	p := field.NewPath("spec", "image")
	tests := []struct {
		ref     string
		wantErr string // substring of the error detail; "" means valid
	}{
		{"nginx:1.25", ""},
		{"registry:5000/team/app:v1", ""},
		{"nginx@sha256:" + hex64, ""},
		{"nginx:1.25@sha256:" + hex64, ""},
		{"docker.io/library/nginx:latest", ""},
		{"localhost/app:dev", ""},
		{"localhost:5000/app@sha512:" + hex64 + hex64, ""},
		{"[::1]:5000/app:v1", ""},
		{"[2001:db8::1]/app:v1", ""},
		{"Registry/app:v1", ""}, // upper-case first component is a registry
		{"a/b_c/d__e/f-g/h--i/j.k:TAG_1.0-rc", ""},
		{"nginx", "must include a tag"},
		{"registry:5000/team/app", "must include a tag"},
		{"nginx:", "tag after ':' must not be empty"},
		{"nginx:.bad", "tag"},
		{"nginx:" + strings.Repeat("a", 129), "tag"},
		{"nginx@sha256:short", "sha256 digest must be 64"},
		{"nginx@sha256:" + strings.ToUpper(hex64), "sha256 digest must be 64"},
		{"nginx@md5:" + hex64, "not supported"},
		{"nginx@" + hex64, "must be algorithm:hex"},
		{"nginx:1@", "must be algorithm:hex"},
		{"Nginx:1", "repository path component"},
		{"team//app:1", "repository path component"},
		{"/app:1", "repository path component"},
		{"app/:1", "repository path component"},
		{"team/-app:1", "repository path component"},
		{"team/app_:1", "repository path component"},
		{"team/a___b:1", "repository path component"},
		{"registry:/app:1", "port must not be empty"},
		{"registry:99999/app:1", "port"},
		{"registry:+80/app:1", "port"},
		{"-registry.io/app:1", "host component"},
		{"[::1/app:1", "unterminated"},
		{"[1.2.3.4]/app:1", "not an IPv6"},
		{"[::1]x/app:1", "unexpected"},
		{":1", "image name must not be empty"},
		{"@sha256:" + hex64, "image name must not be empty"},
		{"registry.io/" + strings.Repeat("a", 255) + ":1", ""}, // the host does not count
		{"registry.io/" + strings.Repeat("a", 256) + ":1", "repository path must be at most 255"},
		{strings.Repeat("a", 247) + ":1", ""},
		{strings.Repeat("a", 248) + ":1", "at most 255 characters (is 256)"}, // library/ + 248
		{"nginx@sha384:" + hex64 + hex64[:32], ""},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			errs := ImageReference(p, tt.ref)
			if tt.wantErr == "" {
				assert.Empty(t, errs)
				return
			}
			if assert.Len(t, errs, 1) {
				assert.Equal(t, field.ErrorTypeInvalid, errs[0].Type)
				assert.Equal(t, "spec.image", errs[0].Field)
				assert.Contains(t, errs[0].Detail, tt.wantErr)
			}
		})
	}
	assert.Equal(t, field.ErrorList{field.Required(p, "")}, ImageReference(p, ""))
}

func TestParseImageReferenceParts(t *testing.T) {
	ref, err := parseImageReference("registry:5000/team/app:v1@sha256:" + hex64)
	assert.NoError(t, err)
	assert.Equal(t, imageRef{domain: "registry:5000", path: "team/app", tag: "v1", digest: "sha256:" + hex64}, ref)

	ref, err = parseImageReference("team/app:v1")
	assert.NoError(t, err)
	assert.Equal(t, imageRef{path: "team/app", tag: "v1"}, ref, "a first component without '.', ':' or upper case is a path")
}

func TestImmutable(t *testing.T) {
	p := field.NewPath("spec", "color")
	assert.Nil(t, Immutable(p, "red", "red"))
	errs := Immutable(p, "red", "blue")
	if assert.Len(t, errs, 1) {
		assert.Equal(t, `spec.color: Invalid value: "blue": field is immutable`, errs[0].Error())
	}
	// Semantic equality: the same quantity written differently is unchanged.
	assert.Nil(t, Immutable(p, resource.MustParse("1"), resource.MustParse("1000m")))
	assert.Len(t, Immutable(p, resource.MustParse("1"), resource.MustParse("2")), 1)
	assert.Nil(t, Immutable(p, []string{"a"}, []string{"a"}))
	assert.Len(t, Immutable(p, []string{"a"}, []string{"a", "b"}), 1)
}

// TestRatchet: an update keeps the errors the old object had, and is
// refused for every error it introduced.
func TestRatchet(t *testing.T) {
	memory := field.NewPath("spec", "memory")
	replicas := field.NewPath("spec", "replicas")
	tooSmall := func(v string) *field.Error { return field.Invalid(memory, v, "must be at least 16Mi") }
	old := field.ErrorList{tooSmall("8Mi")}

	assert.Nil(t, Ratchet(old, field.ErrorList{tooSmall("8Mi")}), "unchanged invalid field: ratcheted")
	assert.Equal(t, field.ErrorList{tooSmall("4Mi")}, Ratchet(old, field.ErrorList{tooSmall("4Mi")}),
		"changed from one invalid value to another: refused")

	outOfRange := field.Invalid(replicas, 0, "must be between 1 and 100")
	assert.Equal(t, field.ErrorList{outOfRange}, Ratchet(old, field.ErrorList{tooSmall("8Mi"), outOfRange}),
		"the new error is reported, the old one is not")
	assert.Equal(t, field.ErrorList{outOfRange}, Ratchet(nil, field.ErrorList{outOfRange}), "a valid old object ratchets nothing")

	// Same path and value, another detail (a cross-field rule whose other
	// side changed), or another type: not the same error.
	assert.Len(t, Ratchet(old, field.ErrorList{field.Invalid(memory, "8Mi", "must be at least 32Mi")}), 1)
	assert.Len(t, Ratchet(old, field.ErrorList{field.Forbidden(memory, "must be at least 16Mi")}), 1)
	// Values compare under equality.Semantic.
	q := resource.MustParse("1")
	assert.Nil(t, Ratchet(field.ErrorList{field.Invalid(memory, q, "x")},
		field.ErrorList{field.Invalid(memory, resource.MustParse("1000m"), "x")}))
}

func TestDNS1123(t *testing.T) {
	p := field.NewPath("spec", "secretRef", "name")
	assert.Nil(t, DNS1123Label(p, "my-svc"))
	assert.Nil(t, DNS1123Subdomain(p, "my.config-map"))
	assert.Equal(t, field.ErrorList{field.Required(p, "")}, DNS1123Label(p, ""))
	assert.Equal(t, field.ErrorList{field.Required(p, "")}, DNS1123Subdomain(p, ""))

	errs := DNS1123Label(p, "my.svc")
	if assert.NotEmpty(t, errs) {
		assert.Equal(t, field.ErrorTypeInvalid, errs[0].Type)
		assert.Equal(t, "spec.secretRef.name", errs[0].Field)
	}
	assert.NotEmpty(t, DNS1123Subdomain(p, "Upper"))
	assert.NotEmpty(t, DNS1123Label(p, strings.Repeat("a", 64)))
	assert.Nil(t, DNS1123Subdomain(p, strings.Repeat("a", 63)+"."+strings.Repeat("b", 63)))
}

func TestQuantity(t *testing.T) {
	p := field.NewPath("metadata", "annotations").Key("memory")
	tests := []struct {
		value           string
		valid, positive bool
	}{
		{"1Gi", true, true},
		{"500m", true, true},
		{"0", true, false},
		{"-1", true, false},
		{"1e3", true, true},
		{"1.5.5", false, false},
		{"Gi", false, false},
		{"+", false, false},
		{".", false, false},
		{"1 Gi", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			assert.Equal(t, tt.valid, Quantity(p, tt.value) == nil, "Quantity")
			assert.Equal(t, tt.positive, PositiveQuantity(p, tt.value) == nil, "PositiveQuantity")
		})
	}
	errs := PositiveQuantity(p, "0")
	if assert.Len(t, errs, 1) {
		assert.Equal(t, `metadata.annotations[memory]: Invalid value: "0": must be greater than zero`, errs[0].Error())
	}
	assert.Equal(t, field.ErrorList{field.Required(p, "")}, Quantity(p, ""))
}
