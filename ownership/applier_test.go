package ownership_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	gadgetac "github.com/reconcilekit/reconcilekit/internal/testapi/v1/applyconfiguration/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/ownership"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest/cachelag"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

const manager = "webapp-operator"

// The Applier under test gets what an operator gets: the manager's client,
// whose reads come from an informer cache that trails the apiserver, and
// Schemas read from the apiserver's OpenAPI v3 documents. env.Client (and
// the manager's APIReader) are the test's own: setup, other writers, and
// assertions on the apiserver's truth. A step that an operator would only
// take once the watch event for a write has arrived waits for the cache
// first (waitForCache); what Apply and Prune do when the cache has not
// caught up is asserted where it matters.
type fixture struct {
	ctx   context.Context
	ns    string
	owner *testv1.Widget
	m     *testenv.Manager
	c     *reconcilertest.Client // the manager's client, counting the Applier's requests
	// reader is the Applier's APIReader: an uncached client, counted.
	reader *reconcilertest.Client
	a      *ownership.Applier
}

func setup(t *testing.T) *fixture {
	t.Helper()
	testenv.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ctx = logf.IntoContext(ctx, testr.New(t))
	f := &fixture{ctx: ctx, ns: env.Namespace(t), m: env.StartManager(t)}
	f.owner = f.widget(t, "owner")
	f.c = reconcilertest.NewClient(f.m.Client)
	f.reader = reconcilertest.NewClient(env.Client)
	f.a = &ownership.Applier{Client: f.c, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager, Schemas: schemas()}
	return f
}

func schemas() *ownership.SchemaCache {
	return ownership.NewSchemaCache(discovery.NewDiscoveryClientForConfigOrDie(env.Config).OpenAPIV3())
}

// empty returns a new, empty object of obj's type to read into.
func empty(obj client.Object) client.Object {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		e := &unstructured.Unstructured{}
		e.SetGroupVersionKind(u.GroupVersionKind())
		return e
	}
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
}

// objectOf returns an object of desired's kind (typed when the scheme knows
// it) with desired's name and namespace (the test's unless desired names
// one), to read the live object into.
func (f *fixture) objectOf(t *testing.T, desired runtime.ApplyConfiguration) client.Object {
	t.Helper()
	b, err := json.Marshal(desired)
	require.NoError(t, err)
	u := &unstructured.Unstructured{}
	require.NoError(t, u.UnmarshalJSON(b))
	var obj client.Object = &unstructured.Unstructured{}
	if o, err := env.Scheme.New(u.GroupVersionKind()); err == nil {
		obj = o.(client.Object)
	}
	obj.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	obj.SetName(u.GetName())
	obj.SetNamespace(u.GetNamespace())
	if obj.GetNamespace() == "" {
		obj.SetNamespace(f.ns)
	}
	return obj
}

// live reads desired's object through the manager's (cached) client.
func (f *fixture) live(t *testing.T, desired runtime.ApplyConfiguration) client.Object {
	t.Helper()
	obj := f.objectOf(t, desired)
	require.NoError(t, f.m.Client.Get(f.ctx, client.ObjectKeyFromObject(obj), obj))
	return obj
}

// key is obj's key, in the test's namespace unless obj names one.
func (f *fixture) key(obj client.Object) client.ObjectKey {
	k := client.ObjectKeyFromObject(obj)
	if k.Namespace == "" {
		k.Namespace = f.ns
	}
	return k
}

// serverVersion is obj's resourceVersion on the apiserver, "" if it does not
// exist.
func (f *fixture) serverVersion(t *testing.T, obj client.Object) string {
	t.Helper()
	got := empty(obj)
	err := f.m.APIReader.Get(f.ctx, f.key(obj), got)
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return got.GetResourceVersion()
}

// waitForCache waits until the manager's client reads each object as the
// apiserver has it now (the same resourceVersion, or both NotFound): what a
// pass started by the watch event for the last write sees.
func (f *fixture) waitForCache(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		want := f.serverVersion(t, obj)
		require.Eventually(t, func() bool {
			got := empty(obj)
			err := f.m.Client.Get(f.ctx, f.key(obj), got)
			if want == "" {
				return apierrors.IsNotFound(err)
			}
			return err == nil && got.GetResourceVersion() == want
		}, 30*time.Second, 10*time.Millisecond, "the cache never reached resourceVersion %q of %T %s", want, obj, f.key(obj))
	}
}

// waitForCacheList waits until the manager's client lists the test
// namespace's objects of list's type as the apiserver does (the same names
// at the same resourceVersions).
func (f *fixture) waitForCacheList(t *testing.T, list client.ObjectList) {
	t.Helper()
	versions := func(r client.Reader) (map[string]string, error) {
		l := list.DeepCopyObject().(client.ObjectList)
		if err := r.List(f.ctx, l, client.InNamespace(f.ns)); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, it := range items {
			o := it.(client.Object)
			out[o.GetName()] = o.GetResourceVersion()
		}
		return out, nil
	}
	want, err := versions(f.m.APIReader)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := versions(f.m.Client)
		return err == nil && reflect.DeepEqual(got, want)
	}, 30*time.Second, 10*time.Millisecond, "the cache never listed %v", want)
}

func (f *fixture) widget(t *testing.T, name string) *testv1.Widget {
	t.Helper()
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}}
	require.NoError(t, env.Client.Create(f.ctx, w))
	return w
}

// apply applies desired and requires success.
func (f *fixture) apply(t *testing.T, desired runtime.ApplyConfiguration, opts ...ownership.ApplyOption) ownership.ApplyResult {
	t.Helper()
	op, err := f.a.Apply(f.ctx, f.owner, desired, opts...)
	require.NoError(t, err)
	return op
}

// requireUnchanged waits until the cache has caught up with the apiserver's
// copy of desired's object, then applies desired and requires that nothing
// was written.
func (f *fixture) requireUnchanged(t *testing.T, desired runtime.ApplyConfiguration, opts ...ownership.ApplyOption) {
	t.Helper()
	f.waitForCache(t, f.objectOf(t, desired))
	f.c.Reset()
	assert.Equal(t, ownership.Unchanged, f.apply(t, desired, opts...))
	assert.Zero(t, f.c.Mutations(), "mutating requests: %v", f.c.MutatingRequests())
}

// applyAgainAtOnce applies desired right after our own write of it (which
// left the object at resourceVersion written), as a later step of the same
// pass would, when the cache may not have that write yet. Either the cache
// has it, or Apply's create-only apply is refused and it reads the object
// through its APIReader: Unchanged, nothing written, whatever the
// informer's timing. The second branch is then also taken
// deterministically, through a cache that has not seen the object.
func (f *fixture) applyAgainAtOnce(t *testing.T, written string, desired func() runtime.ApplyConfiguration, opts ...ownership.ApplyOption) {
	t.Helper()
	require.NotEmpty(t, written)
	obj := f.objectOf(t, desired())
	check := func(a *ownership.Applier, refused []string) {
		t.Helper()
		f.c.Reset()
		op, err := a.Apply(f.ctx, f.owner, desired(), opts...)
		require.NoError(t, err)
		assert.Equal(t, ownership.Unchanged, op)
		if refused != nil {
			assert.Equal(t, refused, f.c.MutatingRequests())
		} else {
			assert.LessOrEqual(t, f.c.Mutations(), 1, "at most the refused create-only apply: %v", f.c.MutatingRequests())
		}
		assert.Equal(t, written, f.serverVersion(t, obj), "nothing changed on the server")
	}
	check(f.a, nil)
	check(f.staleCache(map[string]client.Object{obj.GetName(): nil}, nil), []string{"apply " + obj.GetObjectKind().GroupVersionKind().Kind})
}

// editAs changes obj on the server as another field manager would (kubectl
// edit, an HPA, another controller), with a merge patch.
func (f *fixture) editAs(t *testing.T, fieldManager string, obj client.Object, edit func()) {
	t.Helper()
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(obj), obj))
	base := obj.DeepCopyObject().(client.Object)
	edit()
	require.NoError(t, env.Client.Patch(f.ctx, obj, client.MergeFrom(base), client.FieldOwner(fieldManager)))
}

func (f *fixture) get(t *testing.T, obj client.Object) {
	t.Helper()
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(obj), obj))
}

func deployment(image string, labels map[string]string) *appsv1ac.DeploymentApplyConfiguration {
	sel := map[string]string{"app": "web"}
	return appsv1ac.Deployment("web", "").WithLabels(labels).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(2).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(sel)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(sel).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("app").WithImage(image).
					WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080))))))
}

func service(ports ...*corev1ac.ServicePortApplyConfiguration) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service("web", "").WithLabels(map[string]string{"app": "web"}).
		WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "web"}).WithPorts(ports...))
}

func port(name string, p int32) *corev1ac.ServicePortApplyConfiguration {
	sp := corev1ac.ServicePort().WithPort(p)
	if name != "" {
		sp.WithName(name)
	}
	return sp
}

func configMap(name string, data map[string]string) *corev1ac.ConfigMapApplyConfiguration {
	return corev1ac.ConfigMap(name, "").WithData(data)
}

// typedConfigMap is a ConfigMap in the test's namespace for other writers
// to create.
func (f *fixture) typedConfigMap(name string, data map[string]string, refs ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns, OwnerReferences: refs}, Data: data}
}

func gadget(spec *gadgetac.GadgetSpecApplyConfiguration) *gadgetac.GadgetApplyConfiguration {
	return gadgetac.Gadget("g", "").WithSpec(spec)
}

func TestApplyCreateSetsControllerReference(t *testing.T) {
	f := setup(t)
	d := deployment("nginx:1.27", map[string]string{"app": "web"})
	before, err := json.Marshal(d)
	require.NoError(t, err)
	assert.Equal(t, ownership.Created, f.apply(t, d))
	after, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(after), "desired is not changed")

	live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	f.get(t, live)
	require.Len(t, live.OwnerReferences, 1)
	ref := live.OwnerReferences[0]
	assert.Equal(t, metav1.OwnerReference{
		APIVersion: "test.reconcilekit.io/v1", Kind: "Widget", Name: "owner", UID: f.owner.UID,
		Controller: new(true), BlockOwnerDeletion: new(true),
	}, ref)
	assert.Equal(t, f.ns, live.Namespace, "empty namespace defaults to the owner's")
	var ours bool
	for _, mf := range live.ManagedFields {
		ours = ours || (mf.Manager == manager && mf.Operation == metav1.ManagedFieldsOperationApply)
	}
	assert.True(t, ours, "written with server-side apply as %q: %+v", manager, live.ManagedFields)
}

// The central promise: once converged, a pass writes nothing, although the
// server has filled in defaults the desired object does not set.
func TestSecondApplyMakesNoMutatingRequest(t *testing.T) {
	tests := []struct {
		name     string
		desired  func() runtime.ApplyConfiguration
		defaults func(t *testing.T, live client.Object) // proves the server defaulted fields we left unset
	}{
		{"Deployment", func() runtime.ApplyConfiguration { return deployment("nginx:1.27", map[string]string{"app": "web"}) },
			func(t *testing.T, o client.Object) {
				d := o.(*appsv1.Deployment)
				c := d.Spec.Template.Spec.Containers[0]
				assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
				assert.NotNil(t, d.Spec.RevisionHistoryLimit)
				assert.Equal(t, "/dev/termination-log", c.TerminationMessagePath)
				assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
				assert.Equal(t, corev1.ProtocolTCP, c.Ports[0].Protocol)
			}},
		{"Service", func() runtime.ApplyConfiguration { return service(port("http", 80)) },
			func(t *testing.T, o client.Object) {
				s := o.(*corev1.Service)
				assert.NotEmpty(t, s.Spec.ClusterIP)
				assert.Equal(t, corev1.ServiceAffinityNone, s.Spec.SessionAffinity)
				assert.Equal(t, corev1.ProtocolTCP, s.Spec.Ports[0].Protocol)
				assert.Equal(t, intstr.FromInt32(80), s.Spec.Ports[0].TargetPort)
			}},
		{"Service with unnamed port", func() runtime.ApplyConfiguration { return service(port("", 80)) },
			func(t *testing.T, o client.Object) {
				s := o.(*corev1.Service)
				assert.NotEmpty(t, s.Spec.ClusterIP)
				assert.Equal(t, corev1.ProtocolTCP, s.Spec.Ports[0].Protocol)
			}},
		{"ConfigMap", func() runtime.ApplyConfiguration { return configMap("cfg", map[string]string{"color": "blue"}) },
			func(t *testing.T, o client.Object) { assert.Equal(t, "blue", o.(*corev1.ConfigMap).Data["color"]) }},
		{"Secret with stringData", func() runtime.ApplyConfiguration {
			return corev1ac.Secret("s", "").WithStringData(map[string]string{"password": "hunter2"})
		}, func(t *testing.T, o client.Object) {
			assert.Equal(t, []byte("hunter2"), o.(*corev1.Secret).Data["password"])
		}},
		{"unstructured ConfigMap", func() runtime.ApplyConfiguration {
			return client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "ucfg"},
				"data":     map[string]any{"k": "v"},
			}})
		}, func(t *testing.T, o client.Object) { assert.Equal(t, "v", o.(*corev1.ConfigMap).Data["k"]) }},
		{"custom resource (generated apply configuration)", func() runtime.ApplyConfiguration {
			return gadget(gadgetac.GadgetSpec().WithPorts(gadgetac.GadgetPort().WithPort(80)).WithTags("a", "b"))
		}, func(t *testing.T, o client.Object) {
			g := o.(*testv1.Gadget)
			require.Len(t, g.Spec.Ports, 1)
			assert.Equal(t, "TCP", g.Spec.Ports[0].Protocol, "defaulted by the CRD")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			assert.Equal(t, ownership.Created, f.apply(t, tt.desired()))
			// A later step of the same pass, before the cache has the
			// object: at most one identical apply, a no-op on the server.
			f.applyAgainAtOnce(t, f.serverVersion(t, f.objectOf(t, tt.desired())), tt.desired)

			// Later passes, once the watch event has reached the cache.
			for range 2 {
				f.requireUnchanged(t, tt.desired())
				tt.defaults(t, f.live(t, tt.desired()))
			}
		})
	}
}

func TestApplyRepairsDriftInOwnedFields(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(d *appsv1.Deployment)
		check func(t *testing.T, d *appsv1.Deployment)
	}{
		{"image", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "evil:1" },
			func(t *testing.T, d *appsv1.Deployment) {
				assert.Equal(t, "nginx:1.27", d.Spec.Template.Spec.Containers[0].Image)
			}},
		{"replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(9)) },
			func(t *testing.T, d *appsv1.Deployment) { assert.Equal(t, int32(2), *d.Spec.Replicas) }},
		{"label we set", func(d *appsv1.Deployment) { d.Labels["tier"] = "hacked" },
			func(t *testing.T, d *appsv1.Deployment) { assert.Equal(t, "frontend", d.Labels["tier"]) }},
		{"label we set, removed", func(d *appsv1.Deployment) { delete(d.Labels, "tier") },
			func(t *testing.T, d *appsv1.Deployment) { assert.Equal(t, "frontend", d.Labels["tier"]) }},
		{"controller reference removed", func(d *appsv1.Deployment) { d.OwnerReferences = nil },
			func(t *testing.T, d *appsv1.Deployment) { assert.Len(t, d.OwnerReferences, 1) }},
		{"container port renamed", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Ports[0].Name = "web" },
			func(t *testing.T, d *appsv1.Deployment) {
				assert.Equal(t, "http", d.Spec.Template.Spec.Containers[0].Ports[0].Name)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			desired := func() *appsv1ac.DeploymentApplyConfiguration {
				return deployment("nginx:1.27", map[string]string{"app": "web", "tier": "frontend"})
			}
			f.apply(t, desired())
			live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
			// Status updates, as the Deployment controller's: the verdict
			// stands on generation and metadata (verdicts.go), and the
			// edit below must still be seen.
			for ready := range int32(2) {
				f.get(t, live)
				live.Status.ObservedGeneration, live.Status.Replicas, live.Status.ReadyReplicas = live.Generation, 2, ready+1
				require.NoError(t, env.Client.Status().Update(f.ctx, live))
				f.waitForCache(t, live)
				f.requireUnchanged(t, desired())
			}
			f.editAs(t, "kubectl-edit", live, func() {
				tt.edit(live)
				// Someone else's metadata, which must survive our repair.
				metav1.SetMetaDataAnnotation(&live.ObjectMeta, "example.com/note", "keep me")
				metav1.SetMetaDataLabel(&live.ObjectMeta, "team", "payments")
			})
			f.waitForCache(t, live) // the pass the edit's watch event starts

			f.c.Reset()
			assert.Equal(t, ownership.Updated, f.apply(t, desired()))
			assert.Equal(t, 1, f.c.Mutations(), "one apply: %v", f.c.MutatingRequests())

			got := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
			f.get(t, got)
			tt.check(t, got)
			assert.Equal(t, "keep me", got.Annotations["example.com/note"])
			assert.Equal(t, "payments", got.Labels["team"])
			f.requireUnchanged(t, desired())
		})
	}
}

// A Deployment's status updates leave its generation alone, and so does
// an edit of its labels or owner references: Apply trusts a verdict across
// the first, never across the second (verdicts.go).
func TestApplySeesMetadataEditsBetweenStatusUpdates(t *testing.T) {
	for name, edit := range map[string]func(d *appsv1.Deployment){
		"label":           func(d *appsv1.Deployment) { d.Labels["tier"] = "hacked" },
		"owner reference": func(d *appsv1.Deployment) { d.OwnerReferences[0].BlockOwnerDeletion = new(false) },
	} {
		t.Run(name, func(t *testing.T) {
			f := setup(t)
			desired := func() *appsv1ac.DeploymentApplyConfiguration {
				return deployment("nginx:1.27", map[string]string{"app": "web", "tier": "frontend"})
			}
			f.apply(t, desired())
			live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
			f.get(t, live)
			live.Status.ObservedGeneration, live.Status.Replicas = live.Generation, 2
			require.NoError(t, env.Client.Status().Update(f.ctx, live))
			f.requireUnchanged(t, desired())
			generation := live.Generation

			f.editAs(t, "kubectl-edit", live, func() { edit(live) })
			require.Equal(t, generation, live.Generation, "the edit left the generation alone")
			f.get(t, live)
			live.Status.ReadyReplicas = 2
			require.NoError(t, env.Client.Status().Update(f.ctx, live))
			f.waitForCache(t, live)

			assert.Equal(t, ownership.Updated, f.apply(t, desired()))
			f.get(t, live)
			assert.Equal(t, "frontend", live.Labels["tier"])
			assert.True(t, *live.OwnerReferences[0].BlockOwnerDeletion)
			f.requireUnchanged(t, desired())
		})
	}
}

func TestForeignFieldsAreLeftAlone(t *testing.T) {
	f := setup(t)
	hpa := ownership.IgnoreFields("spec.replicas")
	desired := func(image string) *appsv1ac.DeploymentApplyConfiguration {
		d := deployment(image, map[string]string{"app": "web"})
		d.Spec.WithReplicas(3) // ignored: never set
		return d
	}
	f.apply(t, desired("nginx:1.27"), hpa)
	live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	f.get(t, live)
	assert.Equal(t, int32(1), *live.Spec.Replicas, "an ignored field is not set, the server defaults it")

	f.editAs(t, "hpa", live, func() { live.Spec.Replicas = new(int32(7)) })
	f.editAs(t, "other-controller", live, func() {
		metav1.SetMetaDataAnnotation(&live.ObjectMeta, "other.io/checksum", "abc")
		metav1.SetMetaDataLabel(&live.ObjectMeta, "other.io/managed", "yes")
		live.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
		// A sidecar and a port of someone else's: keyed list elements we
		// do not set.
		c := &live.Spec.Template.Spec.Containers[0]
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
		live.Spec.Template.Spec.Containers = append(live.Spec.Template.Spec.Containers,
			corev1.Container{Name: "sidecar", Image: "busybox:1"})
	})
	f.requireUnchanged(t, desired("nginx:1.27"), hpa)

	// A real change is applied and still leaves the foreign fields alone.
	assert.Equal(t, ownership.Updated, f.apply(t, desired("nginx:1.28"), hpa))
	f.get(t, live)
	assert.Equal(t, "nginx:1.28", live.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, int32(7), *live.Spec.Replicas)
	assert.Equal(t, "abc", live.Annotations["other.io/checksum"])
	assert.Equal(t, "yes", live.Labels["other.io/managed"])
	assert.Equal(t, "now", live.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
	require.Len(t, live.Spec.Template.Spec.Containers, 2)
	assert.Equal(t, "sidecar", live.Spec.Template.Spec.Containers[1].Name)
	assert.Len(t, live.Spec.Template.Spec.Containers[0].Ports, 2)
}

func TestChangedDesiredRemovesFieldsWeNoLongerWant(t *testing.T) {
	f := setup(t)
	svc := service(port("http", 80), port("metrics", 9090)).WithLabels(map[string]string{"tier": "frontend"})
	f.apply(t, svc)
	cm := configMap("cfg", map[string]string{"a": "1", "b": "2"})
	f.apply(t, cm)
	f.waitForCache(t, f.objectOf(t, svc), f.objectOf(t, cm)) // a later pass

	f.c.Reset()
	assert.Equal(t, ownership.Updated, f.apply(t, service(port("http", 80))))
	assert.Equal(t, ownership.Updated, f.apply(t, configMap("cfg", map[string]string{"a": "1"})))
	assert.Equal(t, 2, f.c.Mutations())

	live := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	f.get(t, live)
	require.Len(t, live.Spec.Ports, 1)
	assert.Equal(t, "http", live.Spec.Ports[0].Name)
	assert.NotContains(t, live.Labels, "tier")
	liveCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: f.ns}}
	f.get(t, liveCM)
	assert.Equal(t, map[string]string{"a": "1"}, liveCM.Data)

	f.requireUnchanged(t, service(port("http", 80)))
}

func TestApplyRefusesForeignController(t *testing.T) {
	f := setup(t)
	other := f.widget(t, "other")
	cm := f.typedConfigMap("taken", map[string]string{"owner": "other"},
		*metav1.NewControllerRef(other, testv1.GroupVersion.WithKind("Widget")))
	require.NoError(t, env.Client.Create(f.ctx, cm))
	f.waitForCache(t, cm) // see TestApplyFromAStaleCache for a cache without it

	f.c.Reset()
	_, err := f.a.Apply(f.ctx, f.owner, configMap("taken", map[string]string{"owner": "us"}))
	var fce *ownership.ForeignControllerError
	require.ErrorAs(t, err, &fce)
	assert.Equal(t, "ConfigMap", fce.Kind)
	assert.Equal(t, types.NamespacedName{Namespace: f.ns, Name: "taken"}, fce.Key)
	assert.Equal(t, "owner", fce.Owner.Name)
	assert.Equal(t, other.UID, fce.Controller.UID)
	for _, s := range []string{"ConfigMap", f.ns + "/taken", `Widget "owner"`, `Widget "other"`} {
		assert.Contains(t, err.Error(), s)
	}
	assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())

	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: f.ns}}
	f.get(t, live)
	assert.Equal(t, "other", live.Data["owner"])
	assert.Len(t, live.OwnerReferences, 1)

	// Prune never touches it either.
	deleted, err := f.a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{})
	require.NoError(t, err)
	assert.Empty(t, deleted)
}

// A desired object that itself names another controller is refused before
// any request: Apply would otherwise send two controller references.
func TestApplyRefusesDesiredWithForeignController(t *testing.T) {
	f := setup(t)
	other := f.widget(t, "other")
	desired := configMap("cfg", map[string]string{"a": "1"}).WithOwnerReferences(metav1ac.OwnerReference().
		WithAPIVersion("test.reconcilekit.io/v1").WithKind("Widget").WithName("other").WithUID(other.UID).WithController(true))

	f.c.Reset()
	_, err := f.a.Apply(f.ctx, f.owner, desired)
	var fce *ownership.ForeignControllerError
	require.ErrorAs(t, err, &fce)
	assert.Equal(t, other.UID, fce.Controller.UID)
	assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
	assert.Empty(t, f.serverVersion(t, f.objectOf(t, desired)), "not created")
}

// An object someone else created, without a controller, is not ours to
// take: a name from a user's spec (a Service named like a new WebApp, a
// Namespace a Tenant names) must not hand it to the owner, whose deletion
// would then delete it. Apply refuses without writing, whether or not the
// cache holds the object (a label-selected cache never holds it).
func TestApplyRefusesObjectWithoutController(t *testing.T) {
	f := setup(t)
	other := f.widget(t, "other")
	cm := f.typedConfigMap("theirs", map[string]string{"a": "old"},
		metav1.OwnerReference{APIVersion: "test.reconcilekit.io/v1", Kind: "Widget", Name: "other", UID: other.UID})
	require.NoError(t, env.Client.Create(f.ctx, cm))
	f.waitForCache(t, cm)

	for name, a := range map[string]*ownership.Applier{
		"the cache has it":           f.a,
		"the cache does not have it": f.staleCache(map[string]client.Object{"theirs": nil}, nil),
	} {
		t.Run(name, func(t *testing.T) {
			f.c.Reset()
			op, err := a.Apply(f.ctx, f.owner, configMap("theirs", map[string]string{"a": "new"}))
			var refused *ownership.AdoptionRefusedError
			require.ErrorAs(t, err, &refused, "operation %s", op)
			assert.Equal(t, "ConfigMap", refused.Kind)
			assert.Equal(t, types.NamespacedName{Namespace: f.ns, Name: "theirs"}, refused.Key)
			assert.Equal(t, f.owner.UID, refused.Owner.UID)
			assert.Equal(t, manager, refused.FieldManager)
			for _, s := range []string{"ConfigMap " + f.ns + "/theirs", `Widget "owner"`, "ownership.Adopt()"} {
				assert.Contains(t, err.Error(), s)
			}
			// Where the cache has no object, Apply tries a create-only
			// apply, which the server refuses.
			assert.LessOrEqual(t, f.c.Mutations(), 1, "%v", f.c.MutatingRequests())
			live := &corev1.ConfigMap{}
			require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(cm), live))
			assert.Equal(t, cm.ResourceVersion, live.ResourceVersion, "untouched")
			assert.Nil(t, metav1.GetControllerOf(live))
		})
	}
}

// With Adopt, an object without a controller is taken over, whoever
// created it.
func TestApplyAdoptsObjectWithoutControllerWhenAsked(t *testing.T) {
	f := setup(t)
	other := f.widget(t, "other")
	cm := f.typedConfigMap("orphan", map[string]string{"a": "old"},
		metav1.OwnerReference{APIVersion: "test.reconcilekit.io/v1", Kind: "Widget", Name: "other", UID: other.UID})
	require.NoError(t, env.Client.Create(f.ctx, cm))
	f.waitForCache(t, cm)

	assert.Equal(t, ownership.Updated, f.apply(t, configMap("orphan", map[string]string{"a": "new"}), ownership.Adopt()))
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: f.ns}}
	f.get(t, live)
	assert.Equal(t, "new", live.Data["a"])
	require.Len(t, live.OwnerReferences, 2, "the other, non-controller reference is kept")
	ctrl := metav1.GetControllerOf(live)
	require.NotNil(t, ctrl)
	assert.Equal(t, f.owner.UID, ctrl.UID)
	// Now ours: no option needed.
	f.requireUnchanged(t, configMap("orphan", map[string]string{"a": "new"}))
}

// An object this owner's apply wrote, whose controller reference was
// removed by hand, is adopted again without Adopt by the next apply of the
// same configuration: the configuration hash our field manager recorded
// covers the owner's controller reference, UID included, so it ties the
// object to this owner. The cache may strip managedFields, or lag, so that
// evidence is read from the API server.
func TestApplyReadoptsObjectItWrote(t *testing.T) {
	f := setup(t)
	f.apply(t, configMap("cfg", map[string]string{"a": "1"}))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: f.ns}}
	f.editAs(t, "kubectl-edit", cm, func() { cm.OwnerReferences = nil })
	require.Nil(t, metav1.GetControllerOf(cm))
	f.waitForCache(t, cm)
	stripped := cm.DeepCopy()
	stripped.ManagedFields = nil

	for name, a := range map[string]*ownership.Applier{
		"the cache has it with managedFields": f.a,
		"the cache strips managedFields":      f.staleCache(map[string]client.Object{"cfg": stripped}, nil),
	} {
		t.Run(name, func(t *testing.T) {
			f.editAs(t, "kubectl-edit", cm, func() { cm.OwnerReferences = nil })
			f.waitForCache(t, cm)
			stripped.ResourceVersion = cm.ResourceVersion
			f.c.Reset()
			op, err := a.Apply(f.ctx, f.owner, configMap("cfg", map[string]string{"a": "1"}))
			require.NoError(t, err)
			assert.Equal(t, ownership.Updated, op)
			assert.Equal(t, []string{"apply ConfigMap"}, f.c.MutatingRequests())
			f.get(t, cm)
			ctrl := metav1.GetControllerOf(cm)
			require.NotNil(t, ctrl)
			assert.Equal(t, f.owner.UID, ctrl.UID)
		})
	}
}

// An object this field manager wrote for another owner, or for none, is
// not tied to this owner (issue #48): the field manager is the
// controller's, every owner's, so having written an object is no reason to
// hand it to a new owner that names it, whose deletion would then delete
// it. Here owner a (f.owner) applies "archive-x" with NotOwned, and
// "was-a" as its own, whose controller reference is then removed by hand;
// owner b, applying the same data, is refused both without a write, and
// takes them with Adopt.
func TestApplyRefusesObjectItWroteForAnotherOwner(t *testing.T) {
	f := setup(t)
	data := map[string]string{"a": "1"}
	f.apply(t, configMap("archive-x", data), ownership.NotOwned())
	f.apply(t, configMap("was-a", data))
	wasA := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "was-a", Namespace: f.ns}}
	f.editAs(t, "kubectl-edit", wasA, func() { wasA.OwnerReferences = nil })
	b := f.widget(t, "b")

	for _, name := range []string{"archive-x", "was-a"} {
		t.Run(name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}}
			f.get(t, cm)
			require.Nil(t, metav1.GetControllerOf(cm))
			f.waitForCache(t, cm)

			f.c.Reset()
			op, err := f.a.Apply(f.ctx, b, configMap(name, data))
			var refused *ownership.AdoptionRefusedError
			require.ErrorAs(t, err, &refused, "owner b took over %s written for owner a: %s", name, op)
			assert.Equal(t, "ConfigMap", refused.Kind)
			assert.Equal(t, types.NamespacedName{Namespace: f.ns, Name: name}, refused.Key)
			assert.Equal(t, b.UID, refused.Owner.UID)
			for _, s := range []string{"ConfigMap " + f.ns + "/" + name, `Widget "b"`, string(b.UID),
				"exists without a controller", `field manager "` + manager + `" wrote it, but not for this owner`, "ownership.Adopt()"} {
				assert.Contains(t, err.Error(), s)
			}
			assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
			live := &corev1.ConfigMap{}
			require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(cm), live))
			assert.Equal(t, cm.ResourceVersion, live.ResourceVersion, "untouched")
			assert.Nil(t, metav1.GetControllerOf(live))

			op, err = f.a.Apply(f.ctx, b, configMap(name, data), ownership.Adopt())
			require.NoError(t, err)
			assert.Equal(t, ownership.Updated, op)
			f.get(t, live)
			ctrl := metav1.GetControllerOf(live)
			require.NotNil(t, ctrl)
			assert.Equal(t, b.UID, ctrl.UID)
		})
	}
}

// An object without a controller that carries an owner reference to this
// owner (not a controller one) is tied to it, whoever wrote it and
// whatever the configuration: Apply makes the reference a controller one
// without Adopt. A reference to another owner does not tie it
// (TestApplyRefusesObjectWithoutController).
func TestApplyAdoptsObjectThatNamesTheOwner(t *testing.T) {
	f := setup(t)
	ref := metav1.OwnerReference{APIVersion: "test.reconcilekit.io/v1", Kind: "Widget", Name: f.owner.Name, UID: f.owner.UID}
	cm := f.typedConfigMap("named", map[string]string{"a": "old"}, ref)
	require.NoError(t, env.Client.Create(f.ctx, cm))
	f.waitForCache(t, cm)

	assert.Equal(t, ownership.Updated, f.apply(t, configMap("named", map[string]string{"a": "new"})))
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "named", Namespace: f.ns}}
	f.get(t, live)
	assert.Equal(t, "new", live.Data["a"])
	require.Len(t, live.OwnerReferences, 1, "%+v", live.OwnerReferences)
	ctrl := metav1.GetControllerOf(live)
	require.NotNil(t, ctrl)
	assert.Equal(t, f.owner.UID, ctrl.UID)
}

// The cache can hold an object we own that has since been deleted, or
// replaced by someone else's object of the same name. Apply names the UID
// it judged, so the server refuses the write, and Apply judges what is
// there now: a replacement without a controller is not adopted, a deleted
// object is created again.
func TestApplyToAReplacedObject(t *testing.T) {
	f := setup(t)
	f.apply(t, configMap("cfg", map[string]string{"a": "1"}))
	old := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "cfg"}, old))
	require.NoError(t, env.Client.Delete(f.ctx, old))
	stale := f.staleCache(map[string]client.Object{"cfg": old}, nil)

	t.Run("deleted", func(t *testing.T) {
		f.c.Reset()
		op, err := stale.Apply(f.ctx, f.owner, configMap("cfg", map[string]string{"a": "2"}))
		require.NoError(t, err)
		assert.Equal(t, ownership.Created, op)
		live := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(old), live))
		assert.NotEqual(t, old.UID, live.UID)
		assert.Equal(t, "2", live.Data["a"])
		require.NoError(t, env.Client.Delete(f.ctx, live))
	})

	t.Run("replaced by someone else's", func(t *testing.T) {
		theirs := f.typedConfigMap("cfg", map[string]string{"a": "theirs"})
		require.NoError(t, env.Client.Create(f.ctx, theirs))
		f.c.Reset()
		_, err := stale.Apply(f.ctx, f.owner, configMap("cfg", map[string]string{"a": "3"}))
		var refused *ownership.AdoptionRefusedError
		require.ErrorAs(t, err, &refused)
		live := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(theirs), live))
		assert.Equal(t, theirs.ResourceVersion, live.ResourceVersion, "untouched")
		assert.Nil(t, metav1.GetControllerOf(live))
	})
}

// Created means the apply created the object, judged by the API server:
// a cache that has not seen our own create does not turn the next update
// into a second "Created" (a lying Event or metric), nor into a write when
// nothing changed.
func TestApplyReportsWhatTheServerDid(t *testing.T) {
	f := setup(t)
	// Every ConfigMap version stays unreadable for an hour: the cache never
	// sees what this test writes.
	lagging := reconcilertest.NewClient(f.m.Client, reconcilertest.WithCacheLag(f.m.Cache, cachelag.Lag{Kind: "ConfigMap", Delay: time.Hour}))
	a := &ownership.Applier{Client: lagging, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager, Schemas: f.a.Schemas}
	apply := func(data map[string]string) ownership.ApplyResult {
		t.Helper()
		lagging.Reset()
		op, err := a.Apply(f.ctx, f.owner, configMap("cfg", data))
		require.NoError(t, err)
		return op
	}

	assert.Equal(t, ownership.Created, apply(map[string]string{"color": "red"}))
	err := lagging.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "cfg"}, &corev1.ConfigMap{})
	require.True(t, apierrors.IsNotFound(err), "the lagging cache has not seen the create: %v", err)

	// The create-only apply is refused, the object read from the API
	// server, the change applied.
	f.reader.Reset()
	assert.Equal(t, ownership.Updated, apply(map[string]string{"color": "blue"}))
	assert.Equal(t, []string{"apply ConfigMap", "apply ConfigMap"}, lagging.MutatingRequests())
	assert.Equal(t, 1, f.reader.Count(reconcilertest.Get, "ConfigMap"))
	live := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "cfg"}, live))
	assert.Equal(t, "blue", live.Data["color"])

	// Known to exist now: read from the API server, nothing written.
	assert.Equal(t, ownership.Unchanged, apply(map[string]string{"color": "blue"}))
	assert.Zero(t, lagging.Mutations(), "%v", lagging.MutatingRequests())
	assert.Equal(t, live.ResourceVersion, f.serverVersion(t, live))
}

// A create costs one request: where the cache has no object, Apply sends a
// create-only apply instead of asking the API server first. If someone
// else created the object after the cache's read, the server refuses it and
// their object is judged (here: not ours to take), never silently adopted;
// later calls read it from the API server without trying again.
func TestApplyCreatesWithOneRequest(t *testing.T) {
	f := setup(t)
	f.reader.Reset()
	f.c.Reset()
	assert.Equal(t, ownership.Created, f.apply(t, configMap("fresh", map[string]string{"a": "1"})))
	assert.Equal(t, []string{"apply ConfigMap"}, f.c.MutatingRequests())
	assert.Zero(t, f.reader.Count(reconcilertest.Get, "ConfigMap"), "no read from the API server")

	theirs := f.typedConfigMap("raced", map[string]string{"color": "green"})
	require.NoError(t, env.Client.Create(f.ctx, theirs))
	raced := f.staleCache(map[string]client.Object{"raced": nil}, nil)
	f.c.Reset()
	_, err := raced.Apply(f.ctx, f.owner, configMap("raced", map[string]string{"color": "blue"}))
	var refused *ownership.AdoptionRefusedError
	require.ErrorAs(t, err, &refused)
	assert.Equal(t, []string{"apply ConfigMap"}, f.c.MutatingRequests(), "the refused create-only apply")
	assert.Equal(t, theirs.ResourceVersion, f.serverVersion(t, theirs), "untouched")

	// The refusal is paid once: while the cache does not hold the object
	// (outside its label selector, say), Apply reads the API server first.
	f.c.Reset()
	_, err = raced.Apply(f.ctx, f.owner, configMap("raced", map[string]string{"color": "blue"}))
	require.ErrorAs(t, err, &refused)
	assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
}

func TestApplyRefusesInvalidDesired(t *testing.T) {
	f := setup(t)
	tests := []struct {
		name    string
		owner   client.Object
		desired runtime.ApplyConfiguration
		opts    []ownership.ApplyOption
		wantErr []string
	}{
		{"another namespace", f.owner, corev1ac.ConfigMap("cfg", "default"), nil, []string{"metadata.namespace", f.ns}},
		{"cluster-scoped object", f.owner, rbacv1ac.ClusterRole("cr-" + f.ns), nil, []string{"metadata.namespace", "cluster-scoped"}},
		{"no name", f.owner, configMap("", nil), nil, []string{"metadata.name"}},
		{"owner not read from the server", &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "unsaved", Namespace: f.ns}},
			configMap("cfg", nil), nil, []string{"UID"}},
		{"identity ignored", f.owner, configMap("cfg", nil), []ownership.ApplyOption{ownership.IgnoreFields("metadata.name")}, []string{"metadata.name"}},
		{"nil desired", f.owner, nil, nil, []string{"nil"}},
		{"no apiVersion or kind", f.owner, &corev1ac.ConfigMapApplyConfiguration{}, nil, []string{"apiVersion"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.c.Reset()
			_, err := f.a.Apply(f.ctx, tt.owner, tt.desired, tt.opts...)
			require.Error(t, err)
			for _, s := range tt.wantErr {
				assert.ErrorContains(t, err, s)
			}
			assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
		})
	}
}

func TestPruneDeletesOnlyOwnedAndUnwanted(t *testing.T) {
	f := setup(t)
	for _, name := range []string{"a", "b", "c"} {
		f.apply(t, configMap(name, map[string]string{"n": name}))
	}
	keep := []string{"a"}
	require.NoError(t, env.Client.Create(f.ctx, f.typedConfigMap("not-ours", nil)))
	other := f.widget(t, "other")
	require.NoError(t, env.Client.Create(f.ctx, f.typedConfigMap("theirs", nil,
		*metav1.NewControllerRef(other, testv1.GroupVersion.WithKind("Widget")))))
	f.waitForCacheList(t, &corev1.ConfigMapList{})

	f.c.Reset()
	deleted, err := f.a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{}, keep...)
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, deleted)
	assert.Equal(t, 2, f.c.Count(reconcilertest.Delete, "ConfigMap"))
	assert.Equal(t, 2, f.c.Mutations(), "%v", f.c.MutatingRequests())

	var left corev1.ConfigMapList
	require.NoError(t, env.Client.List(f.ctx, &left, client.InNamespace(f.ns)))
	var names []string
	for _, cm := range left.Items {
		names = append(names, cm.Name)
	}
	assert.ElementsMatch(t, []string{"a", "not-ours", "theirs"}, names)

	// At once, before the cache has seen the deletions, it may still list
	// b and c: as Prune's caveat says, their deletes are then sent again,
	// answered NotFound and not reported; nothing else is touched.
	f.c.Reset()
	deleted, err = f.a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{}, keep...)
	require.NoError(t, err)
	assert.Empty(t, deleted)
	assert.LessOrEqual(t, f.c.Count(reconcilertest.Delete, "ConfigMap"), 2, "%v", f.c.MutatingRequests())
	assert.Equal(t, f.c.Count(reconcilertest.Delete, "ConfigMap"), f.c.Mutations(), "%v", f.c.MutatingRequests())

	// Once it has, a pass with nothing to prune writes nothing.
	f.waitForCacheList(t, &corev1.ConfigMapList{})
	f.c.Reset()
	deleted, err = f.a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{}, keep...)
	require.NoError(t, err)
	assert.Empty(t, deleted)
	assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
	require.NoError(t, env.Client.List(f.ctx, &left, client.InNamespace(f.ns)))
	assert.Len(t, left.Items, 3)
}

// An object listed as ours, then deleted and recreated under the same name
// before Prune's delete, must survive: the delete carries the listed UID.
func TestPruneUIDPreconditionSparesRecreatedObject(t *testing.T) {
	f := setup(t)
	f.apply(t, configMap("x", map[string]string{"v": "1"}))
	x := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: f.ns}}
	f.waitForCache(t, x) // Prune's list has x

	// Another writer, straight to the apiserver.
	recreator := &ownership.Applier{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme, FieldManager: manager}
	var recreatedUID types.UID
	racing := interceptor.NewClient(f.c, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			// After the list, replace x with a new incarnation.
			old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: f.ns}}
			if err := env.Client.Delete(ctx, old); err != nil {
				return err
			}
			if _, err := recreator.Apply(ctx, f.owner, configMap("x", map[string]string{"v": "2"})); err != nil {
				return err
			}
			fresh := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), fresh); err != nil {
				return err
			}
			recreatedUID = fresh.UID
			return nil
		},
	})
	a := &ownership.Applier{Client: racing, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager}
	f.c.Reset()
	deleted, err := a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{})
	require.NoError(t, err)
	assert.Empty(t, deleted)
	assert.Equal(t, []string{"delete ConfigMap"}, f.c.MutatingRequests(), "the delete was sent, and refused")

	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: f.ns}}
	f.get(t, live)
	assert.NotEmpty(t, recreatedUID)
	assert.Equal(t, recreatedUID, live.UID)
	assert.Equal(t, "2", live.Data["v"])

	// Without the race, once the cache has the new incarnation, the same
	// owned object is pruned.
	f.waitForCache(t, live)
	deleted, err = f.a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{})
	require.NoError(t, err)
	assert.Equal(t, []string{"x"}, deleted)
	err = env.Client.Get(f.ctx, client.ObjectKeyFromObject(live), &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

// staleCache is the Applier's client (counting into f.c) as seen through a
// cache stuck at a snapshot: a Get of an object named in gets, in the test
// namespace, returns its snapshot (nil: NotFound), and a List of list's type
// returns list, when set — the deterministic form of an informer that has
// not yet received the latest watch events.
func (f *fixture) staleCache(gets map[string]client.Object, list client.ObjectList) *ownership.Applier {
	c := interceptor.NewClient(f.c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			snapshot, frozen := gets[key.Name]
			switch {
			case !frozen || key.Namespace != f.ns:
				return c.Get(ctx, key, obj, opts...)
			case snapshot == nil:
				return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
			default:
				reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(snapshot.DeepCopyObject()).Elem())
				return nil
			}
		},
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
			if list != nil && reflect.TypeOf(l) == reflect.TypeOf(list) {
				reflect.ValueOf(l).Elem().Set(reflect.ValueOf(list.DeepCopyObject()).Elem())
				return nil
			}
			return c.List(ctx, l, opts...)
		},
	})
	return &ownership.Applier{Client: c, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager, Schemas: f.a.Schemas}
}

// TestApplyFromAStaleCache pins what the Applier does when its reads trail
// its own writes or other writers' (see the Applier's caveats): never more
// than one identical, no-op write, and never a write to something it must
// not touch. (A cache without the object we just created:
// applyAgainAtOnce, for every kind; a cache with an object since deleted
// or replaced: TestApplyToAReplacedObject.)
func TestApplyFromAStaleCache(t *testing.T) {
	data := map[string]string{"color": "blue"}

	t.Run("Apply: the cache has the version before our update", func(t *testing.T) {
		f := setup(t)
		require.Equal(t, ownership.Created, f.apply(t, configMap("cfg", map[string]string{"color": "red"})))
		before := &corev1.ConfigMap{}
		require.NoError(t, f.m.APIReader.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "cfg"}, before))
		// The update a later pass makes, once the watch event of the
		// create has reached the cache.
		f.waitForCache(t, before)
		require.Equal(t, ownership.Updated, f.apply(t, configMap("cfg", data)))
		written := f.serverVersion(t, before)
		require.NotEqual(t, before.ResourceVersion, written)
		a := f.staleCache(map[string]client.Object{"cfg": before}, nil)

		f.c.Reset()
		op, err := a.Apply(f.ctx, f.owner, configMap("cfg", data))
		require.NoError(t, err)
		assert.Equal(t, ownership.Updated, op, "the cached copy differs")
		assert.Equal(t, []string{"apply ConfigMap"}, f.c.MutatingRequests(), "one identical apply")
		live := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(before), live))
		assert.Equal(t, written, live.ResourceVersion, "a no-op on the server: no new resourceVersion")
		assert.Equal(t, data, live.Data)
	})

	t.Run("Apply: the cache has not seen another owner's object", func(t *testing.T) {
		f := setup(t)
		other := f.widget(t, "other")
		theirs := f.typedConfigMap("taken", map[string]string{"owner": "other"},
			*metav1.NewControllerRef(other, testv1.GroupVersion.WithKind("Widget")))
		require.NoError(t, env.Client.Create(f.ctx, theirs))
		a := f.staleCache(map[string]client.Object{"taken": nil}, nil)

		f.c.Reset()
		_, err := a.Apply(f.ctx, f.owner, configMap("taken", map[string]string{"owner": "us"}))
		// The server refuses the create-only apply, Apply reads the
		// object from it: refused, nothing written.
		var fce *ownership.ForeignControllerError
		require.ErrorAs(t, err, &fce)
		assert.Equal(t, other.UID, fce.Controller.UID)
		assert.Equal(t, []string{"apply ConfigMap"}, f.c.MutatingRequests())
		live := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(theirs), live))
		assert.Equal(t, theirs.ResourceVersion, live.ResourceVersion, "untouched")
		assert.Equal(t, map[string]string{"owner": "other"}, live.Data)
		assert.Equal(t, theirs.OwnerReferences, live.OwnerReferences)
	})

	t.Run("Prune: the cache still lists what the last pass deleted", func(t *testing.T) {
		f := setup(t)
		f.apply(t, configMap("a", data))
		f.apply(t, configMap("b", data))
		f.waitForCacheList(t, &corev1.ConfigMapList{})
		listed := &corev1.ConfigMapList{}
		require.NoError(t, f.m.Client.List(f.ctx, listed, client.InNamespace(f.ns)))
		deleted, err := f.a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{}, "a")
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, deleted)
		keep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: f.ns}}
		keptVersion := f.serverVersion(t, keep)
		a := f.staleCache(nil, listed)

		f.c.Reset()
		deleted, err = a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{}, "a")
		require.NoError(t, err)
		assert.Empty(t, deleted, "gone already: not reported")
		assert.Equal(t, []string{"delete ConfigMap"}, f.c.MutatingRequests(), "b's delete is sent again and answered NotFound")
		assert.Equal(t, keptVersion, f.serverVersion(t, keep), "a untouched")
	})
}

// A mutating webhook that denies UPDATEs of a kind answers a create-only
// apply of an existing object before the API server checks the
// resourceVersion (it admits the apply as an update of that object:
// k8s.io/apiserver's Store.Update runs UpdatedObject, with mutating
// admission, then the precondition), so the apply is refused with the
// webhook's denial, not a Conflict. Apply reported the denial, hiding that
// the object is another owner's, and sent the create again on every pass;
// it now reads the object from the API server once and refuses it for what
// it is. (The webhook is simulated at the client, in the order the API
// server answers.)
func TestApplyCreateRefusedByAWebhookStillJudgesTheObject(t *testing.T) {
	f := setup(t)
	other := f.widget(t, "other")
	theirs := f.typedConfigMap("guarded", map[string]string{"owner": "other"},
		*metav1.NewControllerRef(other, testv1.GroupVersion.WithKind("Widget")))
	require.NoError(t, env.Client.Create(f.ctx, theirs))
	stale := f.staleCache(map[string]client.Object{"guarded": nil}, nil)
	denials := 0
	a := *stale
	a.Client = interceptor.NewClient(stale.Client.(client.WithWatch), interceptor.Funcs{
		Apply: func(ctx context.Context, c client.WithWatch, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
			existing := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "guarded"}, existing); err == nil {
				denials++
				return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "guarded",
					errors.New(`admission webhook "freeze.example.com" denied the request: configmaps are frozen`))
			}
			return c.Apply(ctx, obj, opts...)
		},
	})

	for pass := range 2 {
		_, err := a.Apply(f.ctx, f.owner, configMap("guarded", map[string]string{"owner": "us"}))
		var fce *ownership.ForeignControllerError
		require.ErrorAs(t, err, &fce, "pass %d: the object is another owner's, whatever the webhook says", pass)
		assert.Equal(t, other.UID, fce.Controller.UID)
	}
	assert.Equal(t, 1, denials, "the second pass reads the object from the API server instead of sending the create again")
	live := &corev1.ConfigMap{}
	require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(theirs), live))
	assert.Equal(t, theirs.ResourceVersion, live.ResourceVersion, "untouched")
}

// Into leaves the object as Apply left it: the API server's answer to a
// create and to an update, the object compared when nothing was written;
// into a typed object or an unstructured one. The cache here never sees
// the writes, so none of it can come from a later read.
func TestApplyIntoLeavesTheObjectAsTheApplyLeftIt(t *testing.T) {
	f := setup(t)
	lagging := reconcilertest.NewClient(f.m.Client, reconcilertest.WithCacheLag(f.m.Cache, cachelag.Lag{Kind: "ConfigMap", Delay: time.Hour}))
	a := &ownership.Applier{Client: lagging, APIReader: f.reader, Scheme: env.Scheme, FieldManager: manager, Schemas: f.a.Schemas}
	key := client.ObjectKey{Namespace: f.ns, Name: "cfg"}
	for _, step := range []struct {
		color string
		want  ownership.ApplyResult
		into  client.Object
	}{
		{"red", ownership.Created, &corev1.ConfigMap{}},
		{"blue", ownership.Updated, &corev1.ConfigMap{}},
		{"blue", ownership.Unchanged, &corev1.ConfigMap{}},
		{"green", ownership.Updated, &unstructured.Unstructured{}},
		{"green", ownership.Unchanged, &unstructured.Unstructured{}},
	} {
		op, err := a.Apply(f.ctx, f.owner, configMap("cfg", map[string]string{"color": step.color}), ownership.Into(step.into))
		require.NoError(t, err)
		require.Equal(t, step.want, op, step.color)
		server := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, key, server))
		assert.Equal(t, server.ResourceVersion, step.into.GetResourceVersion(), "%s %s: the server's version", op, step.color)
		assert.Equal(t, server.UID, step.into.GetUID(), "%s %s", op, step.color)
		var color string
		switch into := step.into.(type) {
		case *corev1.ConfigMap:
			color = into.Data["color"]
		case *unstructured.Unstructured:
			color, _, _ = unstructured.NestedString(into.Object, "data", "color")
		}
		assert.Equal(t, step.color, color, "%s: the object as the apply left it", op)
	}

	// A failed Apply leaves into alone.
	into := &corev1.ConfigMap{}
	_, err := a.Apply(f.ctx, f.owner, configMap("", nil), ownership.Into(into))
	require.Error(t, err)
	assert.Empty(t, into.UID)
}
