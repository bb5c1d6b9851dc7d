package ownership

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

// TestApplyTrustsTheVerdictOnACreateAcrossTheFirstStatus: the answer to a
// create has no status.observedGeneration yet; once the Deployment
// controller's status write shows it, with the generation and metadata the
// create left, the verdict stands and nothing is compared (the cached copy
// is edited behind the kit's back to tell: a comparison would apply). A new
// generation is still compared.
func TestApplyTrustsTheVerdictOnACreateAcrossTheFirstStatus(t *testing.T) {
	a, c, owner := answeringApplier(t, true)
	d := &appsv1.Deployment{}
	res, err := a.Apply(t.Context(), owner, testDeployment(), Into(d))
	require.NoError(t, err)
	require.Equal(t, Created, res)
	require.Zero(t, d.Status.ObservedGeneration, "a created object's answer has no status")

	c.rolledOut(d)
	d.Spec.Template.Spec.Containers[0].Image = "edited"
	res, err = a.Apply(t.Context(), owner, testDeployment())
	require.NoError(t, err)
	assert.Equal(t, Unchanged, res, "the first status write of a created object must keep the verdict")
	assert.Equal(t, 1, c.sent)

	c.rv++
	d.ResourceVersion, d.Generation = "999", 2
	res, err = a.Apply(t.Context(), owner, testDeployment())
	require.NoError(t, err)
	assert.Equal(t, Updated, res, "a new generation must be compared, and the edit applied")
	assert.Equal(t, 2, c.sent)
}
