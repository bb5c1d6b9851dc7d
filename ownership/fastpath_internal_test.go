package ownership

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// TestVerdictsSwitch: the cached Deployment is edited behind the kit's
// back, its resourceVersion left as it was. With the verdicts on, Apply
// trusts its verdict and writes nothing; with fastpath.Verdicts off (for
// the bench), it compares, finds the edit and applies.
func TestVerdictsSwitch(t *testing.T) {
	for _, tt := range []struct {
		off  fastpath.Path
		want ApplyResult
		sent int
	}{
		{0, Unchanged, 0},
		{fastpath.Verdicts, Updated, 1},
	} {
		t.Run(switched(tt.off), func(t *testing.T) {
			t.Cleanup(fastpath.Set(tt.off))
			a, c, owner := answeringApplier(t, false)
			res, err := a.Apply(t.Context(), owner, testDeployment())
			require.NoError(t, err)
			require.Equal(t, Unchanged, res, "the cached Deployment is the converged one")

			app := &c.live.Spec.Template.Spec.Containers[1]
			require.Equal(t, "app", app.Name)
			app.Image = "edited"
			res, err = a.Apply(t.Context(), owner, testDeployment())
			require.NoError(t, err)
			assert.Equal(t, tt.want, res)
			assert.Equal(t, tt.sent, c.sent, "applies sent")
		})
	}
}

// TestCreateOnlySwitch: the cache and the API server have no object. With
// the create-only apply on, Apply reads the cache once and sends an apply
// that only creates (resourceVersion createOnly); with fastpath.CreateOnly
// off (for the bench), it asks the API server too, and sends a plain
// apply, without a resourceVersion.
func TestCreateOnlySwitch(t *testing.T) {
	for _, tt := range []struct {
		off  fastpath.Path
		gets int
		rv   any
	}{
		{0, 1, createOnly},
		{fastpath.CreateOnly, 2, nil},
	} {
		t.Run(switched(tt.off), func(t *testing.T) {
			t.Cleanup(fastpath.Set(tt.off))
			a, c, owner := answeringApplier(t, true)
			c.keepSent = true
			res, err := a.Apply(t.Context(), owner, testDeployment())
			require.NoError(t, err)
			assert.Equal(t, Created, res)
			assert.Equal(t, tt.gets, c.gets, "reads: the cache, then the API server")
			assert.Equal(t, 1, c.sent)
			md := c.lastSent["metadata"].(map[string]any)
			assert.Equal(t, tt.rv, md["resourceVersion"], "the apply's resourceVersion")
			assert.NotContains(t, md, "uid", "no UID precondition")
		})
	}
}

// TestUnknownFastPathFailsApply: a variable that names an unknown fast
// path fails every Apply with an error that names the variable and its
// value (run in a child process, whose environment has it from the
// start).
func TestUnknownFastPathFailsApply(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestUnknownFastPathChild$", "-test.short", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), fastpath.Env+"=verdicts,bogus")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "--- PASS: TestUnknownFastPathChild")
}

func TestUnknownFastPathChild(t *testing.T) {
	if os.Getenv(fastpath.Env) == "" {
		t.Skip("run by TestUnknownFastPathFailsApply")
	}
	a, _, owner := answeringApplier(t, true)
	_, err := a.Apply(t.Context(), owner, testDeployment())
	assert.EqualError(t, err, `ownership.Applier: RECONCILEKIT_FASTPATHS_OFF="verdicts,bogus": unknown fast path "bogus" `+
		`(want a comma-separated list of statuspatch,verdicts,intern,createonly)`)
}

// switched names a subtest by what it switched off.
func switched(off fastpath.Path) string {
	if off == 0 {
		return "fast paths on"
	}
	return off.String() + " off"
}
