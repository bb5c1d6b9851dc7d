package webhookkit

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// imageRef is a parsed image reference. Joining the parts back with
// [imageRef.String] yields the input exactly.
type imageRef struct {
	domain string // registry host[:port], empty for the default registry
	path   string // repository path, e.g. "library/nginx"
	tag    string // empty when absent
	digest string // "algorithm:hex", empty when absent
}

func (r imageRef) String() string {
	s := r.path
	if r.domain != "" {
		s = r.domain + "/" + s
	}
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// maxRepositoryLength bounds the repository path as the registry sees it
// (reference.RepositoryNameTotalLengthMax): without the host, and with the
// library/ that Docker Hub puts before a one-component name.
const maxRepositoryLength = 255

// maxTagLength bounds a tag, as the reference grammar does.
const maxTagLength = 128

var (
	// pathComponentRE: lower-case alphanumerics separated by '.', '_', '__'
	// or one or more '-'.
	pathComponentRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$`)
	// domainComponentRE: a DNS label, either case.
	domainComponentRE = regexp.MustCompile(`^(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])$`)
	// tagRE is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127} with the length checked
	// apart: the bounded repetition compiles to 128 copies of its class,
	// 130 KiB of heap held by every operator from init on.
	tagRE      = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
	lowerHexRE = regexp.MustCompile(`^[a-f0-9]+$`)
)

// digestHexLength lists the digest algorithms accepted and the length of
// their hex encoding: those of github.com/opencontainers/go-digest.
var digestHexLength = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}

// parseImageReference parses s per the distribution reference grammar. It
// does not require a tag or digest; ImageReference does.
//
// Why not github.com/distribution/reference (ParseNormalizedNamed), which
// docker and containerd use? Its errors do not say what is wrong: "nginx:",
// "nginx@sha256:short", "team//app:1" and "registry:/app:1" all give
// "invalid reference format", which a webhook would show as is; ours name the
// bad part (the tag, the digest's length, the path component, the port). The
// accepted language is the library's, checked by the differential tests in
// image_upstream_test.go (TestImageReferenceMatchesUpstream and
// FuzzImageReferenceMatchesUpstream), except that ours is stricter in two
// places on purpose: a registry port must be 1-65535 (the library takes any
// digits) and a bracketed host must be an IPv6 address (the library takes
// any hex digits and colons, e.g. "[1:2]").
func parseImageReference(s string) (imageRef, error) {
	var ref imageRef
	name := s
	if i := strings.IndexByte(name, '@'); i >= 0 {
		name, ref.digest = name[:i], name[i+1:]
		if err := validateDigest(ref.digest); err != nil {
			return imageRef{}, err
		}
	}
	// A tag is introduced by the last ':' after the last '/'; a ':' before a
	// '/' belongs to the registry's port.
	if i := strings.LastIndexByte(name, ':'); i >= 0 && i > strings.LastIndexByte(name, '/') {
		var tag string
		name, tag = name[:i], name[i+1:]
		if tag == "" {
			return imageRef{}, errors.New("tag after ':' must not be empty")
		}
		if len(tag) > maxTagLength || !tagRE.MatchString(tag) {
			return imageRef{}, fmt.Errorf("tag %q must match [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag)
		}
		ref.tag = tag
	}
	if name == "" {
		return imageRef{}, errors.New("image name must not be empty")
	}
	if i := strings.IndexByte(name, '/'); i >= 0 && isDomain(name[:i]) {
		ref.domain, name = name[:i], name[i+1:]
		if err := validateDomain(ref.domain); err != nil {
			return imageRef{}, err
		}
	}
	if n := repositoryLength(ref.domain, name); n > maxRepositoryLength {
		return imageRef{}, fmt.Errorf("repository path must be at most %d characters (is %d)", maxRepositoryLength, n)
	}
	for _, c := range strings.Split(name, "/") {
		if !pathComponentRE.MatchString(c) {
			return imageRef{}, fmt.Errorf("repository path component %q must be lower-case alphanumerics separated by '.', '_', '__' or '-'", c)
		}
	}
	ref.path = name
	return ref, nil
}

// repositoryLength is the length of path as the registry domain sees it: on
// Docker Hub (no domain, docker.io or index.docker.io) a one-component path
// is library/<path>.
func repositoryLength(domain, path string) int {
	switch domain {
	case "", "docker.io", "index.docker.io":
		if !strings.Contains(path, "/") {
			return len("library/") + len(path)
		}
	}
	return len(path)
}

// isDomain reports whether the first path component names a registry, using
// the rule of docker and containerd: it contains '.' or ':', is "localhost",
// or has upper-case letters (which repository paths cannot).
func isDomain(c string) bool {
	return strings.ContainsAny(c, ".:") || c == "localhost" || strings.ToLower(c) != c
}

func validateDomain(d string) error {
	host, port := d, ""
	if strings.HasPrefix(d, "[") {
		end := strings.IndexByte(d, ']')
		if end < 0 {
			return fmt.Errorf("registry %q: unterminated IPv6 address", d)
		}
		host, port = d[1:end], d[end+1:]
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil || !strings.Contains(host, ":") {
			return fmt.Errorf("registry %q: %q is not an IPv6 address", d, host)
		}
		if port != "" && !strings.HasPrefix(port, ":") {
			return fmt.Errorf("registry %q: unexpected %q after IPv6 address", d, port)
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && strings.HasSuffix(d, ":") {
			return fmt.Errorf("registry %q: port must not be empty", d)
		}
	} else {
		if i := strings.IndexByte(d, ':'); i >= 0 {
			host, port = d[:i], d[i+1:]
			if port == "" {
				return fmt.Errorf("registry %q: port must not be empty", d)
			}
		}
		for _, c := range strings.Split(host, ".") {
			if !domainComponentRE.MatchString(c) {
				return fmt.Errorf("registry %q: host component %q must be alphanumerics and '-', not starting or ending with '-'", d, c)
			}
		}
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
			return fmt.Errorf("registry %q: port %q must be a number between 1 and 65535", d, port)
		}
	}
	return nil
}

func validateDigest(d string) error {
	alg, hex, ok := strings.Cut(d, ":")
	if !ok {
		return fmt.Errorf("digest %q must be algorithm:hex, e.g. sha256:<64 hex characters>", d)
	}
	want, known := digestHexLength[alg]
	if !known {
		return fmt.Errorf("digest algorithm %q is not supported (use sha256, sha384 or sha512)", alg)
	}
	if len(hex) != want || !lowerHexRE.MatchString(hex) {
		return fmt.Errorf("%s digest must be %d lower-case hex characters", alg, want)
	}
	return nil
}
