package ownership

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Test-only hooks for the differential test of the verdicts
// (verdicts_diff_test.go): what the shortcut answers, and what the full
// comparison it stands in for makes of the same live object.

// Judgement is what Apply's full comparison makes of a live object, as
// Apply judges it when it holds no verdict: exactly one of the three.
type Judgement struct {
	// Unchanged: the object is ours and matches; Apply writes nothing.
	Unchanged bool
	// Drift is where the object differs from the configuration (or "no
	// object"): Apply writes.
	Drift string
	// Refused says why Apply refuses the object: another controller, or
	// none and nothing that ties it to the owner.
	Refused string
}

func (j Judgement) String() string {
	switch {
	case j.Unchanged:
		return "unchanged"
	case j.Refused != "":
		return "refused: " + j.Refused
	}
	return "drifted at " + j.Drift
}

// JudgeForTest runs Apply's full judgement of live (nil: the API server
// has no such object) as desired for owner, the judgement a verdict stands
// in for, and writes nothing: the configuration built and hashed, the
// controller checked (mayTake for an object without one), and the object
// converted and compared (drifted). It remembers nothing either.
func (a *Applier) JudgeForTest(ctx context.Context, owner client.Object, desired runtime.ApplyConfiguration, live client.Object, opts ...ApplyOption) (Judgement, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	encoded, err := encode(desired)
	if err != nil {
		return Judgement{}, err
	}
	d, err := a.buildDesired(ctx, owner, desired, encoded, o)
	if err != nil {
		return Judgement{}, err
	}
	if live == nil {
		return Judgement{Drift: "no object"}, nil
	}
	switch c := metav1.GetControllerOf(live); {
	case c != nil && c.UID != d.ownerRef.UID:
		return Judgement{Refused: "controlled by " + c.Kind + " " + c.Name}, nil
	case c == nil && !a.mayTake(d, live):
		return Judgement{Refused: "no controller, and nothing ties it to the owner"}, nil
	}
	path, drifted, err := a.drifted(d, live)
	switch {
	case err != nil:
		return Judgement{}, err
	case drifted:
		return Judgement{Drift: path}, nil
	}
	return Judgement{Unchanged: true}, nil
}

// ShortcutForTest reports whether Apply, called now with these arguments,
// would answer Unchanged on a verdict without comparing: judgedBefore, on
// the object Apply's Client reads. It writes and remembers nothing.
func (a *Applier) ShortcutForTest(ctx context.Context, owner client.Object, desired runtime.ApplyConfiguration, opts ...ApplyOption) (bool, error) {
	if err := a.validate(); err != nil {
		return false, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.notOwned {
		return false, nil
	}
	encoded, err := encode(desired)
	if err != nil {
		return false, err
	}
	_, _, same, err := a.judgedBefore(ctx, owner, desired, fingerprintOf(encoded, owner, o))
	return same, err
}

// CreateOnlyResourceVersion is the resourceVersion precondition of Apply's
// create-only apply, for tests that check which apply they saw.
const CreateOnlyResourceVersion = createOnly

// ConfigFor returns, as a copy, the configuration Apply sends for desired
// on behalf of owner with opts: desired's fields, the namespace defaulted,
// the controller reference (unless NotOwned), the owner label, the ignored
// fields removed and ConfigHashAnnotation set; without a precondition. It
// is what a reference implementation applies in the differential test
// (createonly_diff_test.go).
func (a *Applier) ConfigFor(ctx context.Context, owner client.Object, desired runtime.ApplyConfiguration, opts ...ApplyOption) (map[string]any, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	encoded, err := encode(desired)
	if err != nil {
		return nil, err
	}
	d, err := a.buildDesired(ctx, owner, desired, encoded, o)
	if err != nil {
		return nil, err
	}
	return runtime.DeepCopyJSON(d.config), nil
}
