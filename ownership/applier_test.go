package ownership_test

import (
	"context"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/ownership"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env, testenv.Options{})) }

const manager = "webapp-operator"

// The Applier under test gets what an operator gets: the manager's client,
// whose reads come from an informer cache that trails the apiserver.
// env.Client (and the manager's APIReader) are the test's own: setup, other
// writers, and assertions on the apiserver's truth. A step that an operator
// would only take once the watch event for a write has arrived waits for
// the cache first (waitForCache); what Apply and Prune do when the cache has
// not caught up is asserted where it matters.
type fixture struct {
	ctx   context.Context
	ns    string
	owner *testv1.Widget
	m     *testenv.Manager
	c     *reconcilertest.Client // the manager's client, counting the Applier's requests
	a     *ownership.Applier
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
	f.a = &ownership.Applier{Client: f.c, Scheme: env.Scheme, FieldManager: manager}
	return f
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
func (f *fixture) apply(t *testing.T, desired client.Object, opts ...ownership.Option) ownership.Result {
	t.Helper()
	res, err := f.a.Apply(f.ctx, f.owner, desired, opts...)
	require.NoError(t, err)
	return res
}

// requireUnchanged waits until the cache has caught up with the apiserver's
// copy of desired, then applies desired and requires that nothing was
// written.
func (f *fixture) requireUnchanged(t *testing.T, desired client.Object, opts ...ownership.Option) {
	t.Helper()
	f.waitForCache(t, desired)
	f.c.Reset()
	assert.Equal(t, ownership.Unchanged, f.apply(t, desired, opts...))
	assert.Zero(t, f.c.Mutations(), "mutating requests: %v", f.c.MutatingRequests())
}

// applyAgainAtOnce applies desired right after our own write of it (which
// left the object at resourceVersion written), as a later step of the same
// pass would, when the cache may not have that write yet. As the Applier's
// caveat says, Apply then either finds the write (Unchanged, no mutating
// request) or re-applies the identical configuration once: exactly one
// apply, which the server treats as a no-op (no new resourceVersion),
// reported as Created when the cache had no object yet. The real cache may
// take either branch, so the second is then also taken deterministically,
// through a cache that has not seen the object.
func (f *fixture) applyAgainAtOnce(t *testing.T, written string, desired func() client.Object, opts ...ownership.Option) {
	t.Helper()
	require.NotEmpty(t, written)
	check := func(a *ownership.Applier, want ...ownership.Result) {
		t.Helper()
		f.c.Reset()
		d := desired()
		res, err := a.Apply(f.ctx, f.owner, d, opts...)
		require.NoError(t, err)
		t.Logf("Apply right after our write: %s, mutating requests %v", res, f.c.MutatingRequests())
		assert.Contains(t, want, res)
		if res == ownership.Unchanged {
			assert.Zero(t, f.c.Mutations(), "mutating requests: %v", f.c.MutatingRequests())
		} else {
			gvk, err := apiutil.GVKForObject(d, env.Scheme)
			require.NoError(t, err)
			assert.Equal(t, []string{"apply " + gvk.Kind}, f.c.MutatingRequests(), "one identical apply (result %s)", res)
		}
		assert.Equal(t, written, d.GetResourceVersion(), "desired holds the live object (result %s)", res)
		assert.Equal(t, written, f.serverVersion(t, d), "nothing changed on the server (result %s)", res)
	}
	check(f.a, ownership.Unchanged, ownership.Created)
	check(f.staleCache(map[string]client.Object{desired().GetName(): nil}, nil), ownership.Created)
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

func deployment(image string, labels map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: image,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				}}},
			},
		},
	}
}

func service(ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Ports: ports},
	}
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: data}
}

func TestApplyCreateSetsControllerReference(t *testing.T) {
	f := setup(t)
	d := deployment("nginx:1.27", map[string]string{"app": "web"})
	assert.Equal(t, ownership.Created, f.apply(t, d))
	assert.NotEmpty(t, d.UID, "desired holds the server's response")

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
		desired  func() client.Object
		defaults func(t *testing.T, live client.Object) // proves the server defaulted fields we left unset
	}{
		{"Deployment", func() client.Object { return deployment("nginx:1.27", map[string]string{"app": "web"}) },
			func(t *testing.T, o client.Object) {
				d := o.(*appsv1.Deployment)
				c := d.Spec.Template.Spec.Containers[0]
				assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
				assert.NotNil(t, d.Spec.RevisionHistoryLimit)
				assert.Equal(t, "/dev/termination-log", c.TerminationMessagePath)
				assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
				assert.Equal(t, corev1.ProtocolTCP, c.Ports[0].Protocol)
			}},
		{"Service", func() client.Object { return service(corev1.ServicePort{Name: "http", Port: 80}) },
			func(t *testing.T, o client.Object) {
				s := o.(*corev1.Service)
				assert.NotEmpty(t, s.Spec.ClusterIP)
				assert.Equal(t, corev1.ServiceAffinityNone, s.Spec.SessionAffinity)
				assert.Equal(t, corev1.ProtocolTCP, s.Spec.Ports[0].Protocol)
				assert.Equal(t, intstr.FromInt32(80), s.Spec.Ports[0].TargetPort)
			}},
		{"Service with unnamed port", func() client.Object { return service(corev1.ServicePort{Port: 80}) },
			func(t *testing.T, o client.Object) { assert.NotEmpty(t, o.(*corev1.Service).Spec.ClusterIP) }},
		{"ConfigMap", func() client.Object { return configMap("cfg", map[string]string{"color": "blue"}) },
			func(t *testing.T, o client.Object) { assert.Equal(t, "blue", o.(*corev1.ConfigMap).Data["color"]) }},
		{"Secret with stringData", func() client.Object {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"password": "hunter2"}}
		}, func(t *testing.T, o client.Object) {
			assert.Equal(t, []byte("hunter2"), o.(*corev1.Secret).Data["password"])
		}},
		{"unstructured ConfigMap", func() client.Object {
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "ucfg"},
				"data":     map[string]any{"k": "v"},
			}}
			return u
		}, func(t *testing.T, o client.Object) { assert.NotEmpty(t, o.GetUID()) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			created := tt.desired()
			assert.Equal(t, ownership.Created, f.apply(t, created))
			// A later step of the same pass, before the cache has the
			// object: at most one identical apply, a no-op on the server.
			f.applyAgainAtOnce(t, created.GetResourceVersion(), tt.desired)

			// Later passes, once the watch event has reached the cache.
			for range 2 {
				desired := tt.desired()
				f.requireUnchanged(t, desired)
				assert.NotEmpty(t, desired.GetResourceVersion(), "desired holds the live object")
				tt.defaults(t, desired)
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := setup(t)
			desired := func() *appsv1.Deployment {
				return deployment("nginx:1.27", map[string]string{"app": "web", "tier": "frontend"})
			}
			f.apply(t, desired())
			live := desired()
			live.Namespace = f.ns
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

func TestForeignFieldsAreLeftAlone(t *testing.T) {
	f := setup(t)
	hpa := ownership.IgnoreFields("spec.replicas")
	desired := func() *appsv1.Deployment {
		d := deployment("nginx:1.27", map[string]string{"app": "web"})
		d.Spec.Replicas = new(int32(3)) // ignored: never set
		return d
	}
	f.apply(t, desired(), hpa)
	live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.ns}}
	f.get(t, live)
	assert.Equal(t, int32(1), *live.Spec.Replicas, "an ignored field is not set, the server defaults it")

	f.editAs(t, "hpa", live, func() { live.Spec.Replicas = new(int32(7)) })
	f.editAs(t, "other-controller", live, func() {
		metav1.SetMetaDataAnnotation(&live.ObjectMeta, "other.io/checksum", "abc")
		metav1.SetMetaDataLabel(&live.ObjectMeta, "other.io/managed", "yes")
		live.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "now"}
	})
	f.requireUnchanged(t, desired(), hpa)

	// A real change is applied and still leaves the foreign fields alone.
	changed := desired()
	changed.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	assert.Equal(t, ownership.Updated, f.apply(t, changed, hpa))
	f.get(t, live)
	assert.Equal(t, "nginx:1.28", live.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, int32(7), *live.Spec.Replicas)
	assert.Equal(t, "abc", live.Annotations["other.io/checksum"])
	assert.Equal(t, "yes", live.Labels["other.io/managed"])
	assert.Equal(t, "now", live.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"])
}

func TestChangedDesiredRemovesFieldsWeNoLongerWant(t *testing.T) {
	f := setup(t)
	svc := service(corev1.ServicePort{Name: "http", Port: 80}, corev1.ServicePort{Name: "metrics", Port: 9090})
	svc.Labels["tier"] = "frontend"
	f.apply(t, svc)
	cm := configMap("cfg", map[string]string{"a": "1", "b": "2"})
	f.apply(t, cm)
	f.waitForCache(t, svc, cm) // a later pass

	smaller := service(corev1.ServicePort{Name: "http", Port: 80})
	f.c.Reset()
	assert.Equal(t, ownership.Updated, f.apply(t, smaller))
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

	f.requireUnchanged(t, service(corev1.ServicePort{Name: "http", Port: 80}))
}

func TestApplyRefusesForeignController(t *testing.T) {
	f := setup(t)
	other := f.widget(t, "other")
	cm := configMap("taken", map[string]string{"owner": "other"})
	cm.Namespace = f.ns
	cm.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, testv1.GroupVersion.WithKind("Widget"))}
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

func TestApplyAdoptsObjectWithoutController(t *testing.T) {
	f := setup(t)
	other := f.widget(t, "other")
	cm := configMap("orphan", map[string]string{"a": "old"})
	cm.Namespace = f.ns
	cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "test.reconcilekit.io/v1", Kind: "Widget", Name: "other", UID: other.UID}}
	require.NoError(t, env.Client.Create(f.ctx, cm))
	f.waitForCache(t, cm)

	assert.Equal(t, ownership.Updated, f.apply(t, configMap("orphan", map[string]string{"a": "new"})))
	live := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: f.ns}}
	f.get(t, live)
	assert.Equal(t, "new", live.Data["a"])
	require.Len(t, live.OwnerReferences, 2, "the other, non-controller reference is kept")
	ctrl := metav1.GetControllerOf(live)
	require.NotNil(t, ctrl)
	assert.Equal(t, f.owner.UID, ctrl.UID)
	f.requireUnchanged(t, configMap("orphan", map[string]string{"a": "new"}))
}

func TestApplyNamespaceRules(t *testing.T) {
	f := setup(t)
	wrongNS := configMap("cfg", nil)
	wrongNS.Namespace = "default"
	_, err := f.a.Apply(f.ctx, f.owner, wrongNS)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metadata.namespace")
	assert.Contains(t, err.Error(), f.ns)

	clusterScoped := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cr-" + f.ns}}
	_, err = f.a.Apply(f.ctx, f.owner, clusterScoped)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metadata.namespace")
	assert.Contains(t, err.Error(), "cluster-scoped")

	_, err = f.a.Apply(f.ctx, f.owner, configMap("", nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "metadata.name")

	_, err = f.a.Apply(f.ctx, &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "unsaved", Namespace: f.ns}}, configMap("cfg", nil))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "UID")

	_, err = f.a.Apply(f.ctx, f.owner, configMap("cfg", nil), ownership.IgnoreFields("metadata.name"))
	require.Error(t, err)
	assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
}

func TestPruneDeletesOnlyOwnedAndUnwanted(t *testing.T) {
	f := setup(t)
	var keep []client.Object
	for _, name := range []string{"a", "b", "c"} {
		cm := configMap(name, map[string]string{"n": name})
		f.apply(t, cm)
		if name == "a" {
			keep = append(keep, cm)
		}
	}
	uncontrolled := configMap("not-ours", nil)
	uncontrolled.Namespace = f.ns
	require.NoError(t, env.Client.Create(f.ctx, uncontrolled))
	other := f.widget(t, "other")
	foreign := configMap("theirs", nil)
	foreign.Namespace = f.ns
	foreign.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, testv1.GroupVersion.WithKind("Widget"))}
	require.NoError(t, env.Client.Create(f.ctx, foreign))
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
	x := configMap("x", map[string]string{"v": "1"})
	f.apply(t, x)
	f.waitForCache(t, x) // Prune's list has x

	// Another writer, straight to the apiserver.
	recreator := &ownership.Applier{Client: env.Client, Scheme: env.Scheme, FieldManager: manager}
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
			fresh := configMap("x", map[string]string{"v": "2"})
			if _, err := recreator.Apply(ctx, f.owner, fresh); err != nil {
				return err
			}
			recreatedUID = fresh.UID
			return nil
		},
	})
	a := &ownership.Applier{Client: racing, Scheme: env.Scheme, FieldManager: manager}
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
	return &ownership.Applier{Client: c, Scheme: env.Scheme, FieldManager: manager}
}

// TestApplyFromAStaleCache pins what the Applier does when its reads trail
// its own writes or other writers' (see the Applier's caveats): never more
// than one identical, no-op write, and never a write to something it must
// not touch. (A cache without the object we just created:
// applyAgainAtOnce, for every kind.)
func TestApplyFromAStaleCache(t *testing.T) {
	data := map[string]string{"color": "blue"}

	t.Run("Apply: the cache has the version before our update", func(t *testing.T) {
		f := setup(t)
		require.Equal(t, ownership.Created, f.apply(t, configMap("cfg", map[string]string{"color": "red"})))
		before := &corev1.ConfigMap{}
		require.NoError(t, f.m.APIReader.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "cfg"}, before))
		require.Equal(t, ownership.Updated, f.apply(t, configMap("cfg", data)))
		written := f.serverVersion(t, before)
		require.NotEqual(t, before.ResourceVersion, written)
		a := f.staleCache(map[string]client.Object{"cfg": before}, nil)

		f.c.Reset()
		desired := configMap("cfg", data)
		res, err := a.Apply(f.ctx, f.owner, desired)
		require.NoError(t, err)
		assert.Equal(t, ownership.Updated, res, "the cached copy differs")
		assert.Equal(t, []string{"apply ConfigMap"}, f.c.MutatingRequests(), "one identical apply")
		assert.Equal(t, written, f.serverVersion(t, desired), "a no-op on the server: no new resourceVersion")
		assert.Equal(t, data, desired.Data)
	})

	t.Run("Apply: the cache has not seen another owner's object", func(t *testing.T) {
		f := setup(t)
		other := f.widget(t, "other")
		theirs := configMap("taken", map[string]string{"owner": "other"})
		theirs.Namespace = f.ns
		theirs.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(other, testv1.GroupVersion.WithKind("Widget"))}
		require.NoError(t, env.Client.Create(f.ctx, theirs))
		a := f.staleCache(map[string]client.Object{"taken": nil}, nil)

		f.c.Reset()
		_, err := a.Apply(f.ctx, f.owner, configMap("taken", map[string]string{"owner": "us"}))
		// Apply cannot know, so it applies; the apiserver refuses a second
		// controller reference, and the whole apply with it.
		require.Error(t, err)
		assert.True(t, apierrors.IsInvalid(err), "%v", err)
		assert.Equal(t, []string{"apply ConfigMap"}, f.c.MutatingRequests())
		live := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(theirs), live))
		assert.Equal(t, theirs.ResourceVersion, live.ResourceVersion, "untouched")
		assert.Equal(t, map[string]string{"owner": "other"}, live.Data)
		assert.Equal(t, theirs.OwnerReferences, live.OwnerReferences)

		// The next pass, from a cache that has it, refuses without writing.
		f.waitForCache(t, theirs)
		f.c.Reset()
		_, err = f.a.Apply(f.ctx, f.owner, configMap("taken", map[string]string{"owner": "us"}))
		var fce *ownership.ForeignControllerError
		require.ErrorAs(t, err, &fce)
		assert.Zero(t, f.c.Mutations(), "%v", f.c.MutatingRequests())
	})

	t.Run("Prune: the cache still lists what the last pass deleted", func(t *testing.T) {
		f := setup(t)
		keep := configMap("a", data)
		f.apply(t, keep)
		f.apply(t, configMap("b", data))
		f.waitForCacheList(t, &corev1.ConfigMapList{})
		listed := &corev1.ConfigMapList{}
		require.NoError(t, f.m.Client.List(f.ctx, listed, client.InNamespace(f.ns)))
		deleted, err := f.a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{}, keep)
		require.NoError(t, err)
		require.Equal(t, []string{"b"}, deleted)
		a := f.staleCache(nil, listed)

		f.c.Reset()
		deleted, err = a.Prune(f.ctx, f.owner, &corev1.ConfigMapList{}, keep)
		require.NoError(t, err)
		assert.Empty(t, deleted, "gone already: not reported")
		assert.Equal(t, []string{"delete ConfigMap"}, f.c.MutatingRequests(), "b's delete is sent again and answered NotFound")
		live := &corev1.ConfigMap{}
		require.NoError(t, env.Client.Get(f.ctx, client.ObjectKeyFromObject(keep), live))
		assert.Equal(t, keep.ResourceVersion, live.ResourceVersion, "a untouched")
	})
}
