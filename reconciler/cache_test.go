package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// frozenCache wraps the manager's cached client so that reads of the frozen
// objects return the copy the apiserver had when freeze was called: an
// informer that has delivered no event since, the worst case of a lagging
// cache, made deterministic.
type frozenCache struct {
	mu     sync.Mutex
	frozen map[frozenKey]client.Object
	// hidden objects are not in the cache at all: Get answers NotFound.
	hidden map[frozenKey]bool
}

// hide makes the cache answer NotFound for objs: an informer that has not
// seen them yet (it relists after an API-server outage).
func (fc *frozenCache) hide(objs ...client.Object) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.hidden == nil {
		fc.hidden = map[frozenKey]bool{}
	}
	for _, o := range objs {
		fc.hidden[keyOf(o, client.ObjectKeyFromObject(o))] = true
	}
}

type frozenKey struct {
	typ string
	key client.ObjectKey
}

func keyOf(o client.Object, key client.ObjectKey) frozenKey {
	return frozenKey{typ: fmt.Sprintf("%T", o), key: key}
}

func (fc *frozenCache) freeze(t *testing.T, ctx context.Context, objs ...client.Object) {
	t.Helper()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.frozen == nil {
		fc.frozen = map[frozenKey]client.Object{}
	}
	for _, o := range objs {
		fresh := o.DeepCopyObject().(client.Object)
		require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(o), fresh))
		fc.frozen[keyOf(o, client.ObjectKeyFromObject(o))] = fresh
	}
}

func (fc *frozenCache) thaw() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.frozen = nil
}

func (fc *frozenCache) client(c client.Client) client.Client {
	return interceptor.NewClient(withWatch{c}, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			fc.mu.Lock()
			f, ok := fc.frozen[keyOf(obj, key)]
			hidden := fc.hidden[keyOf(obj, key)]
			fc.mu.Unlock()
			if hidden {
				gvk, err := apiutil.GVKForObject(obj, c.Scheme())
				if err != nil {
					return err
				}
				return apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}, key.Name)
			}
			if !ok {
				return c.Get(ctx, key, obj, opts...)
			}
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(f.DeepCopyObject()).Elem())
			return nil
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				return err
			}
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			fc.mu.Lock()
			defer fc.mu.Unlock()
			// Frozen objects are listed as frozen, whatever the informer
			// has seen since.
			kept := items[:0]
			var typ string
			for _, item := range items {
				o := item.(client.Object)
				typ = fmt.Sprintf("%T", o)
				if _, ok := fc.frozen[keyOf(o, client.ObjectKeyFromObject(o))]; !ok {
					kept = append(kept, item)
				}
			}
			if typ == "" {
				typ = strings.TrimSuffix(fmt.Sprintf("%T", list), "List")
			}
			for k, f := range fc.frozen {
				if k.typ != typ || (lo.Namespace != "" && lo.Namespace != k.key.Namespace) ||
					(lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(f.GetLabels()))) {
					continue
				}
				kept = append(kept, f.DeepCopyObject())
			}
			items = kept
			return meta.SetList(list, items)
		},
	})
}

// TestPassReadsItsOwnWrites: a step applies an owned object; a later step
// of the same pass reads it back through s.Client, whose cache has not seen
// the write. It must read what was written (Get and List), not the older
// cached copy, and a List by label must not return it once the write took
// the label away.
func TestPassReadsItsOwnWrites(t *testing.T) {
	var fc frozenCache
	var got, listed string
	var byOldLabel int
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&corev1.ConfigMap{}},
		Steps: []widgetStep{
			{Name: "apply", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				cm := corev1ac.ConfigMap("cfg", s.Object.Namespace).
					WithLabels(map[string]string{"v": "2"}).WithData(map[string]string{"v": "2"})
				if _, err := s.Apply(ctx, cm); err != nil {
					return reconciler.Retry(err)
				}
				return reconciler.Continue()
			}},
			{Name: "read", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				var cm corev1.ConfigMap
				if err := s.Client.Get(ctx, client.ObjectKey{Namespace: s.Object.Namespace, Name: "cfg"}, &cm); err != nil {
					return reconciler.Retry(err)
				}
				got = cm.Data["v"]
				var list corev1.ConfigMapList
				if err := s.Client.List(ctx, &list, client.InNamespace(s.Object.Namespace)); err != nil {
					return reconciler.Retry(err)
				}
				for _, item := range list.Items {
					if item.Name == "cfg" {
						listed = item.Data["v"]
					}
				}
				var old corev1.ConfigMapList
				if err := s.Client.List(ctx, &old, client.InNamespace(s.Object.Namespace), client.MatchingLabels{"v": "1"}); err != nil {
					return reconciler.Retry(err)
				}
				byOldLabel = len(old.Items)
				return reconciler.Continue()
			}},
		},
	})
	// The Widget's object exists at v=1 and the cache has it; then the
	// cache stops.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: f.req.Namespace,
		Labels:          map[string]string{"v": "1"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(f.get(), testv1.GroupVersion.WithKind("Widget"))}},
		Data: map[string]string{"v": "1"}}
	require.NoError(t, env.Client.Create(f.ctx, cm))
	fc.freeze(t, f.ctx, cm)
	f.useClient(fc.client(f.m.Client))

	_, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, "2", got, "Get after Apply in the same pass returns the applied object")
	assert.Equal(t, "2", listed, "List after Apply in the same pass returns the applied object")
	assert.Zero(t, byOldLabel, "a List by the label the write replaced does not return the object")
}

// After an API-server outage the informers relist late: the API server has
// the owned Deployment, already as desired and rolled out (so the apply
// writes nothing), while the cache has not seen it. ApplyAndWait judges the
// server's copy instead of failing the pass with NotFound until the relist
// (chaos scenario 2 made 1,292 such failed passes in the 20 s after the
// last fault).
func TestApplyAndWaitReadsTheServerWhenTheCacheMissesTheObject(t *testing.T) {
	var fc frozenCache
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&appsv1.Deployment{}}, Steps: []widgetStep{
		{Name: "deployment", Condition: "Available", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			return s.ApplyAndWait(ctx, testDeployment(s.Object, "example.com/app:v1"), nil)
		}},
	}})
	f.useClient(fc.client(f.m.Client))
	_, err := f.reconcile()
	require.NoError(t, err)
	d := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(f.ctx, f.req.NamespacedName, d))
	markRolledOut(t, f.ctx, d, nil)
	fc.hide(d)

	_, err = f.reconcile()
	require.NoError(t, err, "the pass judged the server's Deployment")
	assert.True(t, conditions.IsTrue(f.get(), conditions.Ready))
}

// TestRolloutIsJudgedOnTheAppliedGeneration replays the Ready-before-rollout
// race deterministically: the Deployment in the cache is the previous
// generation, fully rolled out; the pass applies a new generation and reads
// the Deployment back, by hand (Apply, Get, Rollout) or with ApplyAndWait.
// Ready must not be True.
func TestRolloutIsJudgedOnTheAppliedGeneration(t *testing.T) {
	var image string
	var live appsv1.Deployment
	byHand := []widgetStep{
		{Name: "deployment", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			if _, err := s.Apply(ctx, testDeployment(s.Object, image)); err != nil {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		}},
		{Name: "rollout", Condition: "Available", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			live = appsv1.Deployment{}
			if err := s.Client.Get(ctx, client.ObjectKeyFromObject(s.Object), &live); err != nil {
				return reconciler.Retry(err)
			}
			return s.Rollout(&live)
		}},
	}
	applyAndWait := []widgetStep{
		{Name: "deployment", Condition: "Available", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			live = appsv1.Deployment{}
			return s.ApplyAndWait(ctx, testDeployment(s.Object, image), &live)
		}},
	}
	for name, steps := range map[string][]widgetStep{"Apply, Get, Rollout": byHand, "ApplyAndWait": applyAndWait} {
		t.Run(name, func(t *testing.T) {
			image = "example.com/app:v1"
			testAppliedGenerationIsJudged(t, steps, &image, &live)
		})
	}
}

func testAppliedGenerationIsJudged(t *testing.T, steps []widgetStep, image *string, live *appsv1.Deployment) {
	var fc frozenCache
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Owns: []client.Object{&appsv1.Deployment{}}, Steps: steps})
	f.useClient(fc.client(f.m.Client))

	// Generation 1, rolled out as the Deployment controller would report.
	_, err := f.reconcile()
	require.NoError(t, err)
	d := &appsv1.Deployment{}
	require.NoError(t, env.Client.Get(f.ctx, f.req.NamespacedName, d))
	markRolledOut(t, f.ctx, d, nil)
	waitForCache(t, f, d)
	_, err = f.reconcile()
	require.NoError(t, err)
	w := f.get()
	ready := conditions.Get(w, conditions.Ready)
	require.NotNil(t, ready)
	require.Equal(t, metav1.ConditionTrue, ready.Status, "%+v", ready)
	assert.Equal(t, reconciler.ReasonCurrent, ready.Reason)
	assert.Contains(t, ready.Message, "Deployment is available")

	// A new image: the cache keeps generation 1, rolled out, for the whole
	// pass. Without read-your-writes the rollout step saw that copy and the
	// object went Ready for generation 2 before any rollout.
	fc.freeze(t, f.ctx, d)
	*image = "example.com/app:v2"
	w.Spec.Size = 2
	require.NoError(t, env.Client.Update(f.ctx, w))
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, d.Generation+1, live.Generation, "the step judged the Deployment it read: the generation just applied")
	w = f.get()
	ready = conditions.Get(w, conditions.Ready)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status, "Ready before the rollout: %+v", ready)
	assert.Equal(t, reconciler.ReasonInProgress, ready.Reason)
	assert.Equal(t, w.Generation, ready.ObservedGeneration)
	assert.True(t, conditions.IsTrue(w, conditions.Reconciling))

	// The Deployment controller gives up: ProgressDeadlineExceeded stalls
	// the object instead of leaving it Reconciling forever.
	fc.thaw()
	require.NoError(t, env.Client.Get(f.ctx, f.req.NamespacedName, d))
	markRolledOut(t, f.ctx, d, &appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "w-1" has timed out progressing.`})
	waitForCache(t, f, d)
	res, err := f.reconcile()
	require.NoError(t, err, "a failed rollout is not retried with backoff")
	assert.Equal(t, reconciler.StalledRecheck, res.RequeueAfter, "only re-checked slowly (TestFailedRolloutIsRechecked)")
	w = f.get()
	stalled := conditions.Get(w, conditions.Stalled)
	require.NotNil(t, stalled)
	assert.Equal(t, metav1.ConditionTrue, stalled.Status)
	assert.Equal(t, "ProgressDeadlineExceeded", stalled.Reason)
	assert.Contains(t, stalled.Message, "timed out progressing")
	assert.True(t, conditions.IsFalse(w, conditions.Ready))
}

func testDeployment(w *testv1.Widget, image string) *appsv1ac.DeploymentApplyConfiguration {
	labels := map[string]string{"app": w.Name}
	return appsv1ac.Deployment(w.Name, w.Namespace).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(1).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(labels).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().WithName("app").WithImage(image)))))
}

// markRolledOut writes the status the Deployment controller writes when d's
// generation is fully rolled out, plus an optional extra condition.
func markRolledOut(t *testing.T, ctx context.Context, d *appsv1.Deployment, extra *appsv1.DeploymentCondition) {
	t.Helper()
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		},
	}
	if extra != nil {
		d.Status.Conditions[1] = *extra
	}
	require.NoError(t, env.Client.Status().Update(ctx, d))
}

// waitForCache waits until the manager's cache holds obj's resourceVersion.
func waitForCache(t *testing.T, f *fixture, obj client.Object) {
	t.Helper()
	require.Eventually(t, func() bool {
		cached := obj.DeepCopyObject().(client.Object)
		return f.m.Client.Get(f.ctx, client.ObjectKeyFromObject(obj), cached) == nil && cached.GetResourceVersion() == obj.GetResourceVersion()
	}, 30*time.Second, 5*time.Millisecond)
}

// withWatch adapts a manager's client (no Watch) to the interceptor.
type withWatch struct{ client.Client }

func (withWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("no watch")
}
