package webhookkit

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/distribution/reference"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The differential tests compare ImageReference with the maintained
// github.com/distribution/reference (what docker, containerd and the
// kubelet's runtimes use to read an image field), so that keeping our own
// parser, for its field-specific error messages, cannot drift from it.
//
// upstreamImage is what ImageReference means in terms of the library: the
// string parses with reference.ParseNormalizedNamed (a name is required, so
// not ParseAnyReference, which also takes a name-less "<64 hex>" or
// "sha256:<64 hex>" as a bare digest) and pins a version: it has a tag, a
// digest or both.
func upstreamImage(s string) (reference.Named, bool) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return nil, false
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	return named, tagged || digested
}

// stricterThanUpstream reports the only strings ImageReference rejects and
// the library accepts: a registry port that is not a TCP port (0, above
// 65535; the library takes any digits) and a bracketed host that is not an
// IPv6 address (the library takes any hex digits and colons, "[1:2]" or
// "[::ffff:102:304]", an IPv4-mapped address).
func stricterThanUpstream(named reference.Named) bool {
	d := reference.Domain(named)
	port := ""
	if strings.HasPrefix(d, "[") {
		end := strings.IndexByte(d, ']')
		port = strings.TrimPrefix(d[end+1:], ":")
		if ip := net.ParseIP(d[1:end]); ip == nil || ip.To4() != nil {
			return true
		}
	} else if i := strings.IndexByte(d, ':'); i >= 0 {
		port = d[i+1:]
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		return err != nil || n < 1 || n > 65535
	}
	return false
}

// normalized returns ref's parts as reference.ParseNormalizedNamed reports
// them: the default registry is docker.io (also for index.docker.io), where
// a one-component path is under library/.
func (r imageRef) normalized() (domain, path string) {
	domain, path = r.domain, r.path
	if domain == "" || domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(path, "/") {
		path = "library/" + path
	}
	return domain, path
}

// compareWithUpstream fails t when ImageReference and the library disagree
// on s, beyond the documented stricterThanUpstream cases, or when they agree
// but split s into different parts.
func compareWithUpstream(t *testing.T, s string) {
	t.Helper()
	ours := ImageReference(fuzzPath, s) == nil
	named, theirs := upstreamImage(s)
	switch {
	case ours && !theirs:
		t.Fatalf("%q: accepted by ImageReference, rejected by distribution/reference", s)
	case !ours && theirs:
		if stricterThanUpstream(named) {
			return
		}
		t.Fatalf("%q: rejected by ImageReference (%v), accepted by distribution/reference as %s", s, ImageReference(fuzzPath, s), named)
	case !ours:
		return
	}
	ref, err := parseImageReference(s)
	if err != nil {
		t.Fatalf("%q: accepted but does not parse: %v", s, err)
	}
	domain, path := ref.normalized()
	var tag, digest string
	if tg, ok := named.(reference.Tagged); ok {
		tag = tg.Tag()
	}
	if dg, ok := named.(reference.Digested); ok {
		digest = dg.Digest().String()
	}
	if domain != reference.Domain(named) || path != reference.Path(named) || tag != ref.tag || digest != ref.digest {
		t.Fatalf("%q: parts differ: ours %q %q %q %q, upstream %q %q %q %q", s,
			domain, path, ref.tag, ref.digest, reference.Domain(named), reference.Path(named), tag, digest)
	}
}

func FuzzImageReferenceMatchesUpstream(f *testing.F) {
	for _, s := range imageCorpus {
		f.Add(s)
	}
	f.Fuzz(compareWithUpstream)
}

var imageCorpus = []string{
	"nginx", "nginx:1.25", "nginx:", "nginx:.bad", "Nginx:1", "nginx@sha256:" + hex64,
	"nginx:1.25@sha256:" + hex64, "nginx@sha256:short", "nginx@sha256:" + strings.ToUpper(hex64),
	"nginx@sha384:" + hex64 + hex64[:32], "nginx@sha512:" + hex64 + hex64, "nginx@md5:" + hex64,
	"nginx@" + hex64, "nginx:1@", "@", ":1", hex64, hex64 + ":1", "sha256:" + hex64,
	"docker.io/nginx:1", "docker.io/library/nginx:latest", "index.docker.io/nginx:1",
	"registry:5000/team/app:v1", "registry:5000/team/app", "registry:/app:1", "registry:0/app:1",
	"registry:99999/app:1", "registry:+80/app:1", "registry:05000/app:1", "localhost:5000",
	"localhost/app:dev", "localhost:5000/app@sha512:" + hex64 + hex64,
	"[::1]:5000/app:v1", "[2001:db8::1]/app:v1", "[::1/app:1", "[1.2.3.4]/app:1", "[::1]x/app:1",
	"[1]/app:1", "[1:2]/app:1", "[::ffff:102:304]/app:1", "[::1]:/app:1",
	"Registry/app:v1", "Registry.IO/App:1", "Registry.IO/app:1", "-registry.io/app:1", "registry-.io/app:1",
	"a/b_c/d__e/f-g/h--i/j.k:TAG_1.0-rc", "team//app:1", "/app:1", "app/:1", "team/-app:1",
	"team/app_:1", "team/a___b:1", "a//b:1", "x:1@", "app:v/1", "a b:1", "nginx:1 ",
	"registry.io/" + strings.Repeat("a", 255) + ":1", "registry.io/" + strings.Repeat("a", 256) + ":1",
	strings.Repeat("a", 247) + ":1", strings.Repeat("a", 248) + ":1",
	"team/" + strings.Repeat("a", 250) + ":1", "team/" + strings.Repeat("a", 251) + ":1",
	"nginx:" + strings.Repeat("a", 128), "nginx:" + strings.Repeat("a", 129),
	"registry.io./app:1", "[1:2:3:4:5:6:7:8:9]/app:1", "[fe80::1%eth0]/app:1", "[::A]/app:1",
	"ñ/app:1", "Ñ/app:1", "a@b@sha256:" + hex64, "LOCALHOST/app:1", "docker.io/Team/app:1",
	"registry:5000/App:1", "REG:5000/app:1",
}

// TestImageReferenceDifferencesFromUpstream pins every known difference, so
// that each is deliberate: stricter registry hosts, name-less digests (which
// only ParseAnyReference takes), and the error messages that are the reason
// the kit keeps its own parser.
func TestImageReferenceDifferencesFromUpstream(t *testing.T) {
	for _, s := range []string{
		"registry:0/app:1", "registry:99999/app:1", "[1:2]/app:1", "[::ffff:102:304]/app:1",
		"[1:2:3:4:5:6:7:8:9]/app:1",
	} {
		named, ok := upstreamImage(s)
		require.True(t, ok, "%q: the library accepts any port digits and bracketed hex", s)
		assert.True(t, stricterThanUpstream(named), s)
		assert.NotNil(t, ImageReference(fuzzPath, s), "%q: ImageReference rejects it", s)
	}

	// ParseAnyReference also takes a bare digest, without a name; a
	// container image needs one, so ImageReference is compared with
	// ParseNormalizedNamed, which agrees.
	for _, s := range []string{hex64, "sha256:" + hex64} {
		any, err := reference.ParseAnyReference(s)
		require.NoError(t, err)
		_, named := any.(reference.Named)
		assert.False(t, named, "%q is a name-less digest for ParseAnyReference", s)
	}
	_, ok := upstreamImage(hex64)
	assert.False(t, ok)
	assert.NotNil(t, ImageReference(fuzzPath, hex64))
	// "sha256:<hex>" is image "sha256" with a tag for both.
	named, ok := upstreamImage("sha256:" + hex64)
	require.True(t, ok)
	assert.Equal(t, "docker.io/library/sha256:"+hex64, named.String())
	assert.Nil(t, ImageReference(fuzzPath, "sha256:"+hex64))

	// Same verdict, better message: the library says only "invalid
	// reference format" where ImageReference names the part.
	for s, ours := range map[string]string{
		"nginx:":             "tag after ':' must not be empty",
		"nginx@sha256:short": "sha256 digest must be 64 lower-case hex characters",
		"team//app:1":        `repository path component ""`,
		"registry:/app:1":    "port must not be empty",
		"-registry.io/app:1": `host component "-registry"`,
	} {
		_, err := reference.ParseNormalizedNamed(s)
		require.Error(t, err, s)
		assert.Equal(t, "invalid reference format", err.Error(), s)
		errs := ImageReference(fuzzPath, s)
		require.Len(t, errs, 1, s)
		assert.Contains(t, errs[0].Detail, ours, s)
	}
}

func TestImageReferenceMatchesUpstream(t *testing.T) {
	for _, s := range imageCorpus {
		t.Run(s, func(t *testing.T) { compareWithUpstream(t, s) })
	}
}
