package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// pointerGeneration is a kind whose status.observedGeneration is a *int64,
// as the Kubernetes API linter asks of an optional field.
type pointerGeneration struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status struct{ ObservedGeneration *int64 }
}

func (p *pointerGeneration) DeepCopyObject() runtime.Object {
	out := *p
	p.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// TestObservedGenerationPointer: a *int64 ObservedGeneration is stamped
// like an int64 one, not silently skipped.
func TestObservedGenerationPointer(t *testing.T) {
	obj := &pointerGeneration{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	setObservedGeneration(obj)
	require.NotNil(t, obj.Status.ObservedGeneration, "status.observedGeneration is stamped")
	assert.Equal(t, int64(4), *obj.Status.ObservedGeneration)
}
