package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestModuleOf: RunMicro runs each microbenchmark in the module that holds
// its package, the library's (the repository root) or a nested one.
func TestModuleOf(t *testing.T) {
	for pkg, want := range map[string][2]string{
		"./conditions":     {".", "./conditions"},
		"./reconciler":     {".", "./reconciler"},
		"./bench":          {"bench", "."},
		"./bench/baseline": {"bench", "./baseline"},
	} {
		mod, rel := moduleOf("..", pkg)
		assert.Equal(t, want, [2]string{mod, rel}, pkg)
	}
}
