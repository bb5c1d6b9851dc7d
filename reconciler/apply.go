package reconciler

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/reconcilekit/reconcilekit/ownership"
)

// ApplyAndWait applies desired as [Scope.Apply] does and returns the
// outcome the live object's rollout calls for, as [Scope.Rollout] judges
// it: Continue once the applied generation is rolled out, Wait while it
// rolls out, Terminal when it failed. The verdict is on the object as the
// apply left it (ownership.Into): the API server's answer when it wrote,
// the object it compared when it did not, never an older cached copy.
//
// live is an empty object of desired's kind (&appsv1.Deployment{}), filled
// in for the step to copy status from; nil when the step needs only the
// verdict. Apply's errors name the kind and key.
func (s *Scope[T]) ApplyAndWait(ctx context.Context, desired runtime.ApplyConfiguration, live client.Object, opts ...ownership.ApplyOption) Outcome {
	return s.applyAndJudge(ctx, desired, live, s.Rollout, opts)
}

// applyAndJudge applies desired, leaving the object in live, and returns
// judge's verdict on it.
func (s *Scope[T]) applyAndJudge(ctx context.Context, desired runtime.ApplyConfiguration, live client.Object, judge func(client.Object) Outcome, opts []ownership.ApplyOption) Outcome {
	gvk, key, err := identify(desired, s.Object)
	if err != nil {
		return Retry(err)
	}
	if live == nil {
		if live, err = s.newLive(gvk); err != nil {
			return Retry(fmt.Errorf("reading %s %s: %w", gvk.Kind, key, err))
		}
	} else if got, err := apiutil.GVKForObject(live, s.applier.Scheme); err != nil || got.GroupKind() != gvk.GroupKind() {
		return Retry(fmt.Errorf("reading %s %s: live is a %T, not a %s", gvk.Kind, key, live, gvk.GroupKind()))
	}
	if _, err := s.Apply(ctx, desired, append(slices.Clip(opts), ownership.Into(live))...); err != nil {
		return Retry(err)
	}
	return judge(live)
}

// newLive returns an empty object of kind gvk: typed when the scheme knows
// it, so the read shares the informer of the Owns watch.
func (s *Scope[T]) newLive(gvk schema.GroupVersionKind) (client.Object, error) {
	if !s.applier.Scheme.Recognizes(gvk) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return u, nil
	}
	o, err := s.applier.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	co, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not a client.Object", o)
	}
	return co, nil
}
