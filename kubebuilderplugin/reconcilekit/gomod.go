package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

const kitModule = "github.com/reconcilekit/reconcilekit"

var (
	// required matches a requirement of the kit, in a require block or not.
	required = regexp.MustCompile(`(?m)^(?:require)?\s+` + regexp.QuoteMeta(kitModule) + ` v`)
	replaced = regexp.MustCompile(`(?m)^(?:replace)?\s+` + regexp.QuoteMeta(kitModule) + `(?: v\S+)? =>`)
)

// requireKit returns go.mod with a requirement of the kit at Version (and
// Replace's replace directive), or nothing when it has them already.
// go/v4's post-scaffold `go mod tidy` then records go.sum; it also drops
// the requirement until some code imports the kit, which create api adds.
func requireKit(universe map[string]string) (map[string]string, error) {
	mod, ok := universe["go.mod"]
	if !ok {
		return nil, errors.New("go.mod: not found; run the plugin after go/v4 (--plugins go/v4,reconcilekit/v1-alpha)")
	}
	out := mod
	if !required.MatchString(out) {
		out = strings.TrimRight(out, "\n") + fmt.Sprintf("\n\nrequire %s %s\n", kitModule, Version)
	}
	if Replace != "" && !replaced.MatchString(out) {
		out = strings.TrimRight(out, "\n") + fmt.Sprintf("\n\nreplace %s => %s\n", kitModule, Replace)
	}
	if out == mod {
		return map[string]string{}, nil
	}
	return map[string]string{"go.mod": out}, nil
}
