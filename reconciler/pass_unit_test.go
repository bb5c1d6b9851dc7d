package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// pass.rebase, without a control plane (TestStepWritingItsOwnObjectKeepsThePassStatus
// runs it against one): after a step wrote its own object, the baseline is
// what the write stored, and the pass's status is the stored one with the
// pass's changes before the step and then the step's own after its write
// laid over it: another writer's status field survives, the condition an
// earlier step set and the Paused the pass removed stay as the pass left
// them, and what the step set after its write wins.
func TestRebaseKeepsThePassAndTheStepStatus(t *testing.T) {
	orig := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", ResourceVersion: "1", Generation: 1}}
	require.NoError(t, conditions.MarkTrue(orig, Paused, ReasonPaused, "paused"))
	require.NoError(t, conditions.MarkTrue(orig, "Shared", "Old", "before the pass"))

	obj := orig.DeepCopy()
	conditions.Delete(obj, Paused)
	require.NoError(t, conditions.MarkTrue(obj, "Configured", "Applied", "config applied"))
	require.NoError(t, conditions.MarkTrue(obj, "Shared", "Pass", "set by an earlier step"))
	before := snapshotStatus(obj)

	// The step's write: the answer carries what is stored, including a
	// status field another writer set since the pass read the object.
	answer := orig.DeepCopy()
	answer.ResourceVersion = "2"
	answer.Finalizers = []string{"example.com/extra"}
	answer.Status.Note = "another writer"
	*obj = *answer.DeepCopy()
	require.NoError(t, conditions.MarkFalse(obj, "Shared", "Step", "set by the step after its write"))

	p := &pass[*testv1.Widget]{obj: obj, orig: orig}
	p.rebase(before, answer)
	orig = p.orig
	assert.Equal(t, answer, orig, "the baseline is what the write stored")
	assert.Equal(t, "2", obj.ResourceVersion)
	assert.Equal(t, []string{"example.com/extra"}, obj.Finalizers)
	assert.Equal(t, "another writer", obj.Status.Note)
	assert.Nil(t, conditions.Get(obj, Paused), "the pass removed it")
	assert.True(t, conditions.IsTrue(obj, "Configured"), "an earlier step set it")
	shared := conditions.Get(obj, "Shared")
	require.NotNil(t, shared)
	assert.Equal(t, "Step", shared.Reason, "the step's own change, after its write, wins")
	assert.Empty(t, changedOutsideStatus(orig, obj))
	assert.True(t, statusChanged(orig, obj), "the pass still has its status to write")
}

// A write through another client leaves no recorded answer: the status the
// pass started from stands in for the stored one, so the pass writes its
// own changes, the step's, and what it saw another writer store, and keeps
// the new resourceVersion for its lock.
func TestRebaseAfterAWriteThroughAnotherClient(t *testing.T) {
	orig := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "ns", ResourceVersion: "1", Generation: 1}}
	require.NoError(t, conditions.MarkTrue(orig, Paused, ReasonPaused, "paused"))
	obj := orig.DeepCopy()
	conditions.Delete(obj, Paused)
	require.NoError(t, conditions.MarkTrue(obj, "Configured", "Applied", "config applied"))
	s := &Scope[*testv1.Widget]{Object: obj}
	before := snapshotStatus(obj)

	answer := orig.DeepCopy()
	answer.ResourceVersion = "2"
	answer.Status.Note = "another writer"
	*obj = *answer.DeepCopy()
	require.NoError(t, conditions.MarkTrue(obj, "Extra", "Added", "set after the write"))

	p := &pass[*testv1.Widget]{obj: obj, orig: orig}
	p.rebase(before, s.stored(orig))
	orig = p.orig
	assert.Equal(t, "2", orig.ResourceVersion, "the lock is the write's version")
	assert.True(t, conditions.IsTrue(orig, Paused), "the baseline keeps the status the pass started from")
	assert.Nil(t, conditions.Get(obj, Paused))
	assert.True(t, conditions.IsTrue(obj, "Configured"))
	assert.True(t, conditions.IsTrue(obj, "Extra"))
	assert.Equal(t, "another writer", obj.Status.Note)
	assert.Empty(t, changedOutsideStatus(orig, obj))
}
