package text

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestTruncate(t *testing.T) {
	for _, tt := range []struct {
		name, in, marker string
		n                int
		want             string
	}{
		{"fits", "hello", "…", 5, "hello"},
		{"ascii", "hello world", "...", 8, "hello..."},
		{"never splits a rune", "ab" + "é" + "cdx", "…", 6, "ab…"}, // a cut at byte 3 would split "é" (bytes 2-3)
		{"marker longer than n", "hello world", "…(truncated)", 4, "…(truncated)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.in, tt.n, tt.marker)
			assert.Equal(t, tt.want, got)
			assert.True(t, utf8.ValidString(got))
		})
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("héllo wörld", 7)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 || !utf8.ValidString(s) {
			return
		}
		got := Truncate(s, n, "…")
		if !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q: invalid UTF-8", s, n, got)
		}
		if len(s) <= n && got != s {
			t.Fatalf("Truncate(%q, %d) changed a string that fits", s, n)
		}
		if len(s) > n && (!strings.HasSuffix(got, "…") || !strings.HasPrefix(s, strings.TrimSuffix(got, "…"))) {
			t.Fatalf("Truncate(%q, %d) = %q is not a marked prefix", s, n, got)
		}
	})
}
