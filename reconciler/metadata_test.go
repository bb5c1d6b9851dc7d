package reconciler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/finalizer"
	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/reconciler"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

const revisionKey = "example.com/revision"

var (
	metadataPatch = reconcilertest.Call{Verb: reconcilertest.Patch, Kind: "Widget"}
	statusPatch   = reconcilertest.Call{Verb: reconcilertest.Patch, Kind: "Widget", Subresource: "status"}
)

// annotate is a step that sets the revision annotation to *revision, or
// removes it when *revision is empty, and labels the Widget.
func annotate(revision *string) widgetStep {
	return widgetStep{Name: "annotate", Condition: "Annotated", Run: func(_ context.Context, s *scope) reconciler.Outcome {
		a := s.Object.GetAnnotations()
		if *revision == "" {
			delete(a, revisionKey)
		} else {
			if a == nil {
				a = map[string]string{}
			}
			a[revisionKey] = *revision
		}
		s.Object.SetAnnotations(a)
		l := s.Object.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l["example.com/managed"] = "true"
		s.Object.SetLabels(l)
		return reconciler.Continue()
	}}
}

// TestStepSetsOwnMetadata: a step's labels and annotations are written in
// one patch before the status, a converged pass writes nothing, a key the
// step removes is removed, and labels someone else set are kept.
func TestStepSetsOwnMetadata(t *testing.T) {
	revision := "1"
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{annotate(&revision)}})
	_, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, 1, f.c.Counts()[metadataPatch], "one metadata patch:\n%s", f.c)
	assert.Equal(t, 1, f.c.Counts()[statusPatch], "one status patch:\n%s", f.c)
	assert.Equal(t, 2, f.c.Mutations(), f.c.String())
	w := f.get()
	assert.Equal(t, "1", w.Annotations[revisionKey])
	assert.Equal(t, "true", w.Labels["example.com/managed"])
	assert.True(t, conditions.IsTrue(w, conditions.Ready), "the status of the same pass is written too")
	f.assertIdempotent()

	// Someone else labels the Widget; the next change keeps that label.
	w.Labels["team"] = "orders"
	require.NoError(t, env.Client.Update(f.ctx, w))
	revision = "2"
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, 1, f.c.Mutations(), "only the metadata patch:\n%s", f.c)
	w = f.get()
	assert.Equal(t, "2", w.Annotations[revisionKey])
	assert.Equal(t, "orders", w.Labels["team"])
	f.assertIdempotent()

	// The step stops setting the annotation: it is removed, nothing else.
	revision = ""
	_, err = f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, 1, f.c.Mutations(), "only the metadata patch:\n%s", f.c)
	w = f.get()
	assert.NotContains(t, w.Annotations, revisionKey)
	assert.Equal(t, map[string]string{"example.com/managed": "true", "team": "orders"}, w.Labels)
	f.assertIdempotent()
}

// TestOwnMetadataSurvivesAConflict: another writer labels the Widget
// while the pass runs, so the pass's metadata patch conflicts; it is
// re-read and re-sent, and neither writer's labels are lost.
func TestOwnMetadataSurvivesAConflict(t *testing.T) {
	revision := "1"
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		{Name: "other-writer", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			w := &testv1.Widget{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(s.Object), w); err != nil {
				return reconciler.Retry(err)
			}
			if w.Labels["team"] == "" {
				w.Labels = map[string]string{"team": "orders"}
				if err := env.Client.Update(ctx, w); err != nil {
					return reconciler.Retry(err)
				}
			}
			return reconciler.Continue()
		}},
		annotate(&revision),
	}})
	_, err := f.reconcile()
	require.NoError(t, err)
	assert.Equal(t, 2, f.c.Counts()[metadataPatch], "a conflict and its retry:\n%s", f.c)
	assert.Equal(t, 1, f.c.Counts()[statusPatch], "status written once, locked to the retry's answer:\n%s", f.c)
	w := f.get()
	assert.Equal(t, "orders", w.Labels["team"])
	assert.Equal(t, "true", w.Labels["example.com/managed"])
	assert.Equal(t, "1", w.Annotations[revisionKey])
	assert.True(t, conditions.IsTrue(w, conditions.Ready))
	f.assertIdempotent()
}

// TestOwnMetadataSurvivesAStepWritingItsObject: a step that writes the
// Widget itself (another finalizer) replaces s.Object with the server's
// answer; the label an earlier step set is still written.
func TestOwnMetadataSurvivesAStepWritingItsObject(t *testing.T) {
	revision := "1"
	f := newFixture(t, reconciler.Options[*testv1.Widget]{Steps: []widgetStep{
		annotate(&revision),
		{Name: "finalize", Run: func(ctx context.Context, s *scope) reconciler.Outcome {
			if _, err := finalizer.Ensure(ctx, s.Client, s.Object, "example.com/other"); err != nil {
				return reconciler.Retry(err)
			}
			return reconciler.Continue()
		}},
	}})
	_, err := f.reconcile()
	require.NoError(t, err)
	w := f.get()
	assert.Equal(t, []string{"example.com/other"}, w.Finalizers)
	assert.Equal(t, "1", w.Annotations[revisionKey])
	assert.Equal(t, "true", w.Labels["example.com/managed"])
	assert.True(t, conditions.IsTrue(w, "Annotated"))
	f.assertIdempotent()
}
