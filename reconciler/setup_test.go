package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/reconcilekit/reconcilekit/internal/testenv"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/reconcilekit/reconcilekit/conditions"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/reconciler"
)

// SetupWithManager watches T and every kind in Options.Owns: a Widget
// created gets its ConfigMap (For), and a hand edit of the ConfigMap is
// put back by the pass its watch event starts (Owns), through the manager's
// cached client.
func TestSetupWithManagerWatchesOwnedKinds(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	m := env.StartManager(t, func(mgr manager.Manager) error {
		r, err := reconciler.New(mgr, reconciler.Options[*testv1.Widget]{
			Name: "setup-owns",
			Owns: []client.Object{&corev1.ConfigMap{}},
			Steps: []widgetStep{{Name: "config", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
				if s.Object.Namespace != ns {
					return reconciler.Continue() // another test's Widget
				}
				if _, err := s.Apply(ctx, corev1ac.ConfigMap(s.Object.Name, "").WithData(map[string]string{"k": "want"})); err != nil {
					return reconciler.Retry(err)
				}
				return reconciler.Continue()
			}}},
		})
		if err != nil {
			return err
		}
		return r.SetupWithManager(mgr)
	})
	ctx := context.Background()
	require.NoError(t, env.Client.Create(ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}}))
	key := client.ObjectKey{Namespace: ns, Name: "w"}
	data := func() string {
		var cm corev1.ConfigMap
		if err := m.APIReader.Get(ctx, key, &cm); err != nil {
			return err.Error()
		}
		return cm.Data["k"]
	}
	require.Eventually(t, func() bool { return data() == "want" }, 30*time.Second, 10*time.Millisecond, "the Widget's ConfigMap: %s", data())

	var cm corev1.ConfigMap
	require.NoError(t, env.Client.Get(ctx, key, &cm))
	cm.Data["k"] = "edited"
	require.NoError(t, env.Client.Update(ctx, &cm))
	require.Eventually(t, func() bool { return data() == "want" }, 30*time.Second, 10*time.Millisecond,
		"the hand edit was never put back: no pass for the owned ConfigMap's event (%s)", data())
}

// A step that applies, applies and waits for, or prunes a kind that
// Options.Owns does not declare stalls the pass with ReasonInvalidStep,
// naming the kind and what Owns declares, and never reads, lists or writes
// it: through the manager's cached client such a read would start a
// cluster-wide informer no watch ever wakes the controller for.
func TestUndeclaredKindStallsThePass(t *testing.T) {
	for name, run := range map[string]func(context.Context, *scope) reconciler.Outcome{
		"Apply": func(ctx context.Context, s *scope) reconciler.Outcome {
			if _, err := s.Apply(ctx, corev1ac.ConfigMap("cfg", s.Object.Namespace)); err != nil {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		},
		"ApplyAndWait": func(ctx context.Context, s *scope) reconciler.Outcome {
			return s.ApplyAndWait(ctx, corev1ac.ConfigMap("cfg", s.Object.Namespace), nil)
		},
		"Prune": func(ctx context.Context, s *scope) reconciler.Outcome {
			if _, err := s.Prune(ctx, &corev1.ConfigMapList{}); err != nil {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, reconciler.Options[*testv1.Widget]{
				Owns:  []client.Object{&appsv1.Deployment{}},
				Steps: []widgetStep{{Name: "config", Condition: "ConfigReady", Run: run}},
			})
			_, err := f.reconcile()
			require.ErrorIs(t, err, reconcile.TerminalError(nil))
			var undeclared *reconciler.UndeclaredKindError
			require.True(t, errors.As(err, &undeclared), "%v", err)
			w := f.get()
			stalled := conditions.Get(w, conditions.Stalled)
			require.NotNil(t, stalled)
			assert.Equal(t, reconciler.ReasonInvalidStep, stalled.Reason)
			assert.Contains(t, stalled.Message, "ConfigMap is not in Options.Owns (it declares Deployment.apps)")
			for r := range f.c.Counts() {
				assert.NotEqual(t, "ConfigMap", r.Kind, "%s: an undeclared kind is never read or written", r)
			}
			err = env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.req.Namespace, Name: "cfg"}, &corev1.ConfigMap{})
			assert.True(t, apierrors.IsNotFound(err), "%v", err)
		})
	}
}

// New fails, naming the field or method, when T breaks the contract the
// reconciler relies on: a Status struct holding the conditions SetConditions
// sets and GetConditions returns, and an int64 or *int64 ObservedGeneration
// if Status serializes one. Each of these breaks would otherwise fail
// silently: an int32 or a misnamed observedGeneration is never set,
// conditions outside Status are never written.
func TestNewChecksTheStatusContract(t *testing.T) {
	for name, tc := range map[string]struct {
		new     func() error
		wantErr string
	}{
		"int32 ObservedGeneration":     {newWith[*int32Generation], "int32Generation.Status.ObservedGeneration is a int32; it must be an int64 or a *int64"},
		"*int64 ObservedGeneration":    {newWith[*pointerGeneration], ""},
		"misnamed observedGeneration":  {newWith[*misnamedGeneration], "misnamedGeneration.Status.Generation is serialized as observedGeneration but the reconciler sets only a field named ObservedGeneration"},
		"no Status":                    {newWith[*noStatus], "noStatus has no Status struct field"},
		"conditions outside Status":    {newWith[*conditionsOutsideStatus], "conditionsOutsideStatus.SetConditions does not store the conditions in Status"},
		"SetConditions value receiver": {newWith[*valueReceiver], "valueReceiver.GetConditions does not return what SetConditions set"},
		"int64 ObservedGeneration":     {newWith[*testv1.Widget], ""},
	} {
		t.Run(name, func(t *testing.T) {
			err := tc.new()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func newWith[T reconciler.Object]() error {
	c := fake.NewClientBuilder().Build()
	_, err := reconciler.New(nil, reconciler.Options[T]{Name: "contract", Client: c, APIReader: c, Scheme: runtime.NewScheme()})
	return err
}

type pointerGeneration struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status struct {
		Conditions         []metav1.Condition
		ObservedGeneration *int64
	}
}

func (p *pointerGeneration) GetConditions() []metav1.Condition      { return p.Status.Conditions }
func (p *pointerGeneration) SetConditions(conds []metav1.Condition) { p.Status.Conditions = conds }
func (p *pointerGeneration) DeepCopyObject() runtime.Object         { c := *p; return &c }

type int32Generation struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status struct {
		Conditions         []metav1.Condition
		ObservedGeneration int32
	}
}

func (p *int32Generation) GetConditions() []metav1.Condition      { return p.Status.Conditions }
func (p *int32Generation) SetConditions(conds []metav1.Condition) { p.Status.Conditions = conds }
func (p *int32Generation) DeepCopyObject() runtime.Object         { c := *p; return &c }

type misnamedGeneration struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status struct {
		Conditions []metav1.Condition
		Generation int64 `json:"observedGeneration,omitempty"`
	}
}

func (p *misnamedGeneration) GetConditions() []metav1.Condition      { return p.Status.Conditions }
func (p *misnamedGeneration) SetConditions(conds []metav1.Condition) { p.Status.Conditions = conds }
func (p *misnamedGeneration) DeepCopyObject() runtime.Object         { c := *p; return &c }

// conditionsHolder keeps conditions outside Status.
type conditionsHolder struct{ conds []metav1.Condition }

func (h *conditionsHolder) GetConditions() []metav1.Condition      { return h.conds }
func (h *conditionsHolder) SetConditions(conds []metav1.Condition) { h.conds = conds }

type noStatus struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	conditionsHolder
}

func (p *noStatus) DeepCopyObject() runtime.Object { c := *p; return &c }

type conditionsOutsideStatus struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	conditionsHolder
	Status struct {
		ObservedGeneration int64
	}
}

func (p *conditionsOutsideStatus) DeepCopyObject() runtime.Object { c := *p; return &c }

type valueReceiver struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status struct {
		Conditions []metav1.Condition
	}
}

func (p *valueReceiver) GetConditions() []metav1.Condition     { return p.Status.Conditions }
func (p valueReceiver) SetConditions(conds []metav1.Condition) { p.Status.Conditions = conds } //nolint:staticcheck // the mistake New must catch
func (p *valueReceiver) DeepCopyObject() runtime.Object        { c := *p; return &c }
