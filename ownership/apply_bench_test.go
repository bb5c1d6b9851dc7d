package ownership

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

// cachedReader serves one live object as the manager's cache does: a deep
// copy per Get. Anything else it is asked is a test bug.
type cachedReader struct {
	client.Client
	live   *appsv1.Deployment
	mapper meta.RESTMapper
}

func (c *cachedReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c.live.DeepCopyInto(obj.(*appsv1.Deployment))
	return nil
}

func (c *cachedReader) RESTMapper() meta.RESTMapper { return c.mapper }

// errSent is what cachedReader answers to an apply: a test that gets it
// knows Apply found drift.
var errSent = errors.New("apply sent")

func (c *cachedReader) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errSent
}

// countingMapper counts the RESTMapper's answers.
type countingMapper struct {
	meta.RESTMapper
	mappings int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.mappings++
	return m.RESTMapper.RESTMapping(gk, versions...)
}

// convergedApplier returns an Applier whose cache holds the Deployment of
// testDeployment as applied for owner, with a rolled-out status.
func convergedApplier(tb testing.TB) (*Applier, *countingMapper, client.Object) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	if err := testv1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(deploymentGVK, meta.RESTScopeNamespace)
	live := liveOf(tb, applied(tb, testDeployment()))
	live.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "web-5d4f8c" has successfully progressed.`},
	}
	live.Status.UpdatedReplicas, live.Status.ReadyReplicas, live.Status.AvailableReplicas = 2, 2, 2
	counting := &countingMapper{RESTMapper: mapper}
	c := &cachedReader{live: live, mapper: counting}
	a := &Applier{Client: c, APIReader: c, Scheme: scheme, FieldManager: "bench"}
	owner := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: "ns", UID: "o-1"}}
	return a, counting, owner
}

// BenchmarkApplyUnchanged is the pass every owned object costs once it has
// converged: build the desired configuration, read the live object from
// the cache, and find it unchanged since the last Apply found it matching,
// writing nothing.
func BenchmarkApplyUnchanged(b *testing.B) {
	a, _, owner := convergedApplier(b)
	b.ReportAllocs()
	for b.Loop() {
		res, err := a.Apply(b.Context(), owner, testDeployment())
		if err != nil || res != Unchanged {
			b.Fatalf("Apply = %v, %v; want Unchanged", res, err)
		}
	}
}

// BenchmarkApplyAfterStatusUpdate is an Apply of an object whose status
// changed since the last one (a Deployment's, on each step of its rollout):
// the verdict stands on its generation and metadata.
func BenchmarkApplyAfterStatusUpdate(b *testing.B) {
	benchmarkApplyAfter(b, func(d *appsv1.Deployment) { d.Status.ReadyReplicas++ })
}

// BenchmarkApplyCompared is an Apply of an object changed since the last
// one (here a new generation) that still matches: the configuration
// decoded and hashed, the cached object converted and compared.
func BenchmarkApplyCompared(b *testing.B) {
	benchmarkApplyAfter(b, func(d *appsv1.Deployment) { d.Generation++; d.Status.ObservedGeneration++ })
}

func benchmarkApplyAfter(b *testing.B, change func(*appsv1.Deployment)) {
	a, _, owner := convergedApplier(b)
	c := a.Client.(*cachedReader)
	b.ReportAllocs()
	rv := 0
	for b.Loop() {
		rv++
		c.live.ResourceVersion = strconv.Itoa(rv)
		change(c.live)
		res, err := a.Apply(b.Context(), owner, testDeployment())
		if err != nil || res != Unchanged {
			b.Fatalf("Apply = %v, %v; want Unchanged", res, err)
		}
	}
}

// TestApplyTrustsAVerdictUntilTheObjectChanges: an object found matching
// is not compared again while it keeps its resourceVersion, or changes its
// status alone, and the caller asks for the same thing; a new generation,
// changed metadata, another configuration, owner or option is compared
// (and, drifted, applied).
func TestApplyTrustsAVerdictUntilTheObjectChanges(t *testing.T) {
	a, _, owner := convergedApplier(t)
	c := a.Client.(*cachedReader)
	c.live.ResourceVersion = "7"
	app := &c.live.Spec.Template.Spec.Containers[1]
	image := *testDeployment().Spec.Template.Spec.Containers[0].Image
	apply := func(desired runtime.ApplyConfiguration, opts ...ApplyOption) (ApplyResult, error) {
		t.Helper()
		return a.Apply(t.Context(), owner, desired, opts...)
	}
	unchanged := func(msg string) {
		t.Helper()
		res, err := apply(testDeployment())
		require.NoError(t, err, msg)
		require.Equal(t, Unchanged, res, msg)
	}
	compared := func(msg string, desired runtime.ApplyConfiguration, opts ...ApplyOption) {
		t.Helper()
		_, err := apply(desired, opts...)
		assert.ErrorIs(t, err, errSent, msg)
	}
	unchanged("the first Apply compares")

	// Edited behind the kit's back without a new resourceVersion (which
	// the API server never does): the verdict stands, nothing is compared.
	app.Image = "edited"
	unchanged("Apply compared the object again")

	// A status update: new resourceVersion, same generation and metadata.
	c.live.ResourceVersion, c.live.Status.ReadyReplicas = "8", 1
	unchanged("a status update of a kind whose generation tracks its spec keeps the verdict")

	// A new generation (a spec change), or changed metadata: compared.
	c.live.ResourceVersion, c.live.Generation, c.live.Status.ObservedGeneration = "9", 2, 2
	compared("a new generation must be compared", testDeployment())
	app.Image = image
	unchanged("compared, matching")
	c.live.ResourceVersion, c.live.Labels["team"] = "10", "other"
	app.Image = "edited"
	compared("changed labels must be compared", testDeployment())
	app.Image = image
	unchanged("compared, matching")

	// A kind that does not report observedGeneration: every new
	// resourceVersion is compared.
	c.live.Status.ObservedGeneration = 0
	unchanged("compared, matching")
	c.live.ResourceVersion, app.Image = "11", "edited"
	compared("without observedGeneration, a new resourceVersion must be compared", testDeployment())
	app.Image = image
	unchanged("compared, matching")

	// The same object, asked for something else: compared.
	compared("another configuration must be compared", testDeployment().WithSpec(testDeployment().Spec.WithReplicas(5)))
	compared("another option must be compared (the configuration's hash changes)", testDeployment(), IgnoreFields("spec.replicas"))
	unchanged("compared, matching")
}

// TestApplyAsksTheScopeOfAKindOnce: the RESTMapper of a manager's client
// (a lazy, locked, discovery-backed mapper) costs more than the rest of a
// converged Apply's preparation, and a kind's scope does not change.
func TestApplyAsksTheScopeOfAKindOnce(t *testing.T) {
	a, mapper, owner := convergedApplier(t)
	for range 3 {
		res, err := a.Apply(t.Context(), owner, testDeployment())
		if err != nil || res != Unchanged {
			t.Fatalf("Apply = %v, %v; want Unchanged", res, err)
		}
	}
	if mapper.mappings != 1 {
		t.Errorf("three Applies of one kind asked the RESTMapper %d times, want 1", mapper.mappings)
	}
}
