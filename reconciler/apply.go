package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/reconcilekit/reconcilekit/ownership"
)

// ApplyAndWait applies desired as [Scope.Apply] does, reads the object back
// into live through s.Client and returns the outcome its rollout calls for,
// as [Scope.Rollout] judges it: Continue once the applied generation is
// rolled out, Wait while it rolls out, Terminal when it failed. s.Client
// reads this pass's own writes, so the verdict is on the generation just
// applied, never on an older cached copy; when the cache has not seen the
// object at all and the apply wrote nothing (the API server's copy already
// matched), it is read from the API server (Options.APIReader).
//
// live is an empty object of desired's kind (&appsv1.Deployment{}), filled
// in for the step to copy status from; nil when the step needs only the
// verdict. Apply's errors name the kind and key; a failed read is wrapped
// naming them too.
func (s *Scope[T]) ApplyAndWait(ctx context.Context, desired runtime.ApplyConfiguration, live client.Object, opts ...ownership.ApplyOption) Outcome {
	return s.applyAndJudge(ctx, desired, live, s.Rollout, opts)
}

// applyAndJudge applies desired, reads it back into live and returns
// judge's verdict on it.
func (s *Scope[T]) applyAndJudge(ctx context.Context, desired runtime.ApplyConfiguration, live client.Object, judge func(client.Object) Outcome, opts []ownership.ApplyOption) Outcome {
	gvk, key, err := identify(desired, s.Object)
	if err != nil {
		return Retry(err)
	}
	if _, err := s.Apply(ctx, desired, opts...); err != nil {
		return Retry(err)
	}
	desc := fmt.Sprintf("%s %s", gvk.Kind, key)
	if live == nil {
		if live, err = s.newLive(gvk); err != nil {
			return Retry(fmt.Errorf("reading %s: %w", desc, err))
		}
	} else if got, err := apiutil.GVKForObject(live, s.applier.Scheme); err != nil || got.GroupKind() != gvk.GroupKind() {
		return Retry(fmt.Errorf("reading %s: live is a %T, not a %s", desc, live, gvk.GroupKind()))
	}
	err = s.Client.Get(ctx, key, live)
	if apierrors.IsNotFound(err) && s.APIReader != nil {
		// The apply succeeded, so the object exists; the cache has not seen
		// it yet and the apply wrote nothing the pass could read back (the
		// object, read from the API server, already matched). Common after
		// an API-server outage, while the informers relist.
		err = s.APIReader.Get(ctx, key, live)
	}
	if err != nil {
		return Retry(fmt.Errorf("reading %s after applying it: %w", desc, err))
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
