// Package text holds the string helpers the library packages share, so
// that each rule is written once.
package text

import "unicode/utf8"

// Truncate returns s if it fits in n bytes, or else its longest prefix
// that, followed by marker, fits in n bytes, cut on a rune boundary so the
// result stays valid UTF-8 (the apiserver stores and returns JSON, which
// would turn a split rune into U+FFFD, and some fields reject it), with
// marker appended.
func Truncate(s string, n int, marker string) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-len(marker), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
