package ownership

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
)

type m = map[string]any
type l = []any

// untyped is the schema of a value nothing is known about: every map a
// struct of any fields, every list atomic, every scalar compared exactly.
var untyped = &typeSchema{schema: typed.DeducedParseableType.Schema, root: typed.DeducedParseableType.TypeRef}

func checkDrift(t *testing.T, ts *typeSchema, desired, live m, wantPath string) {
	t.Helper()
	path, drifted := firstDrift(ts, desired, live)
	assert.Equal(t, wantPath != "", drifted, "drifted (path %q)", path)
	assert.Equal(t, wantPath, path)
}

// The structural rules, which hold whatever the schema.
func TestFirstDriftStructural(t *testing.T) {
	tests := []struct {
		name          string
		desired, live m
		wantPath      string // "" means no drift
	}{
		{"empty desired", m{}, m{"a": "b"}, ""},
		{"equal scalars", m{"s": "x", "b": true, "i": int64(3)}, m{"s": "x", "b": true, "i": int64(3)}, ""},
		{"extra live keys are fine", m{"a": "1"}, m{"a": "1", "b": "2"}, ""},
		{"missing key", m{"a": "1"}, m{}, "a"},
		{"changed string", m{"a": "1"}, m{"a": "2"}, "a"},
		{"changed bool", m{"a": true}, m{"a": false}, "a"},
		{"false is a value, not unset", m{"a": false}, m{}, "a"},
		{"string vs number", m{"a": "1"}, m{"a": int64(1)}, "a"},
		{"int64 vs float64 equal", m{"a": int64(2)}, m{"a": float64(2)}, ""},
		{"int vs int64 equal", m{"a": 2}, m{"a": int64(2)}, ""},
		{"int64 vs float64 different", m{"a": int64(2)}, m{"a": 2.5}, "a"},
		{"nil desired means unset", m{"a": nil}, m{}, ""},
		{"nil live value", m{"a": "x"}, m{"a": nil}, "a"},
		{"empty map desired, absent live", m{"resources": m{}}, m{}, ""},
		{"empty map desired, present live", m{"emptyDir": m{}}, m{"emptyDir": m{"medium": "Memory"}}, ""},
		{"empty list desired, absent live", m{"args": l{}}, m{}, ""},
		{"empty list desired, non-empty live", m{"args": l{}}, m{"args": l{"x"}}, "args"},
		{"map vs scalar", m{"a": m{"b": "c"}}, m{"a": "c"}, "a"},
		{"list vs map", m{"a": l{"x"}}, m{"a": m{"x": "y"}}, "a"},
		{"nested path", m{"metadata": m{"labels": m{"app": "web"}}}, m{"metadata": m{"labels": m{"app": "db", "team": "x"}}}, "metadata.labels.app"},
		{"atomic list equal", m{"args": l{"a", "b"}}, m{"args": l{"a", "b"}}, ""},
		{"atomic list reordered", m{"args": l{"a", "b"}}, m{"args": l{"b", "a"}}, "args[0]"},
		{"atomic list longer live", m{"args": l{"a"}}, m{"args": l{"a", "b"}}, "args"},
		{"atomic list nil element", m{"args": l{nil}}, m{"args": l{"a"}}, "args[0]"},
		{"atomic list of maps: positional, defaults inside elements are fine", m{"ports": l{m{"port": int64(80)}}},
			m{"ports": l{m{"port": int64(80), "protocol": "TCP", "targetPort": int64(80)}}}, ""},
		{"atomic list of maps: different length", m{"ports": l{m{"port": int64(80)}}},
			m{"ports": l{m{"port": int64(80)}, m{"port": int64(81)}}}, "ports"},
		{"atomic list of maps: changed element", m{"ports": l{m{"port": int64(80)}, m{"port": int64(81)}}},
			m{"ports": l{m{"port": int64(80)}, m{"port": int64(82)}}}, "ports[1].port"},
		// Without a schema nothing says a list is keyed, whatever its
		// elements look like: names are not keys.
		{"named maps without a schema are positional", m{"c": l{m{"name": "a"}, m{"name": "b"}}},
			m{"c": l{m{"name": "b"}, m{"name": "a"}}}, "c[0].name"},
		{"named maps without a schema: an extra live element is drift", m{"c": l{m{"name": "a"}}},
			m{"c": l{m{"name": "a"}, m{"name": "istio-proxy"}}}, "c"},
		// Nor that a string is a quantity.
		{"quantity-looking strings without a schema are compared exactly", m{"limits": m{"cpu": "500m"}}, m{"limits": m{"cpu": "0.5"}}, "limits.cpu"},
		{"unknown scalar type falls back to DeepEqual", m{"a": []string{"x"}}, m{"a": []string{"x"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkDrift(t, untyped, tt.desired, tt.live, tt.wantPath) })
	}
}

func builtinOf(t testing.TB, gvk schema.GroupVersionKind) *typeSchema {
	t.Helper()
	ts, ok := builtinSchema(gvk)
	require.True(t, ok, "client-go has no schema for %s", gvk)
	return ts
}

var (
	podGVK     = corev1.SchemeGroupVersion.WithKind("Pod")
	serviceGVK = corev1.SchemeGroupVersion.WithKind("Service")
)

func podSpec(spec m) m { return m{"spec": spec} }

func containers(cs ...any) m { return podSpec(m{"containers": cs}) }

// The rules the schema decides, on the schemas of real built-in kinds (the
// ones Apply uses for them).
func TestFirstDriftBuiltinSchema(t *testing.T) {
	tcp := func(port int64, more ...any) m {
		p := m{"containerPort": port, "protocol": "TCP"}
		for i := 0; i+1 < len(more); i += 2 {
			p[more[i].(string)] = more[i+1]
		}
		return p
	}
	tests := []struct {
		name          string
		gvk           schema.GroupVersionKind
		desired, live m
		wantPath      string
	}{
		// containers: +listMapKey=name
		{"containers matched by name in any order, sidecar tolerated", podGVK,
			containers(m{"name": "a", "image": "a:1"}, m{"name": "b", "image": "b:1"}),
			containers(m{"name": "b", "image": "b:1"}, m{"name": "istio-proxy", "image": "istio"},
				m{"name": "a", "image": "a:1", "imagePullPolicy": "IfNotPresent"}), ""},
		{"container missing", podGVK,
			containers(m{"name": "a"}, m{"name": "b"}), containers(m{"name": "a"}), "spec.containers[name=b]"},
		{"container field changed", podGVK,
			containers(m{"name": "a", "image": "a:1"}), containers(m{"name": "a", "image": "a:2"}), "spec.containers[name=a].image"},
		// container ports: +listMapKey=containerPort, +listMapKey=protocol
		{"container port with protocol left to the default matches the defaulted one", podGVK,
			containers(m{"name": "a", "ports": l{m{"name": "http", "containerPort": int64(8080)}}}),
			containers(m{"name": "a", "ports": l{tcp(9090, "name", "metrics"), tcp(8080, "name", "http")}}), ""},
		{"container port: the protocol is a key", podGVK,
			containers(m{"name": "a", "ports": l{m{"containerPort": int64(53), "protocol": "UDP"}}}),
			containers(m{"name": "a", "ports": l{tcp(53)}}), "spec.containers[name=a].ports[containerPort=53,protocol=UDP]"},
		{"container port changed field", podGVK,
			containers(m{"name": "a", "ports": l{m{"name": "http", "containerPort": int64(8080)}}}),
			containers(m{"name": "a", "ports": l{tcp(8080, "name", "web")}}), "spec.containers[name=a].ports[containerPort=8080].name"},
		{"container port: one of two elements with the set keys matches", podGVK,
			containers(m{"name": "a", "ports": l{m{"name": "dns", "containerPort": int64(53)}}}),
			containers(m{"name": "a", "ports": l{tcp(53, "name", "dns-tcp"), m{"containerPort": int64(53), "protocol": "UDP", "name": "dns"}}}), ""},
		{"container port: none of two elements with the set keys matches", podGVK,
			containers(m{"name": "a", "ports": l{m{"name": "x", "containerPort": int64(53)}}}),
			containers(m{"name": "a", "ports": l{tcp(53, "name", "dns-tcp"), m{"containerPort": int64(53), "protocol": "UDP", "name": "dns"}}}),
			"spec.containers[name=a].ports[containerPort=53]"},
		// A documented trade-off: a key desired leaves unset matches any
		// live value, so a protocol changed by hand is not seen.
		{"container port: an unset key matches even a non-default value", podGVK,
			containers(m{"name": "a", "ports": l{m{"containerPort": int64(8080)}}}),
			containers(m{"name": "a", "ports": l{m{"containerPort": int64(8080), "protocol": "UDP"}}}), ""},
		// volumeMounts are keyed by mountPath, not by their name.
		{"volume mounts keyed by mountPath: same name twice", podGVK,
			containers(m{"name": "a", "volumeMounts": l{m{"name": "v", "mountPath": "/b"}}}),
			containers(m{"name": "a", "volumeMounts": l{m{"name": "v", "mountPath": "/a"}, m{"name": "v", "mountPath": "/b"}}}), ""},
		{"volume mounts keyed by mountPath: missing", podGVK,
			containers(m{"name": "a", "volumeMounts": l{m{"name": "v", "mountPath": "/c"}}}),
			containers(m{"name": "a", "volumeMounts": l{m{"name": "v", "mountPath": "/a"}}}), "spec.containers[name=a].volumeMounts[mountPath=/c]"},
		// hostAliases: +listMapKey=ip
		{"host aliases keyed by ip, in any order", podGVK,
			podSpec(m{"hostAliases": l{m{"ip": "10.0.0.1", "hostnames": l{"a"}}}}),
			podSpec(m{"hostAliases": l{m{"ip": "10.0.0.2", "hostnames": l{"b"}}, m{"ip": "10.0.0.1", "hostnames": l{"a"}}}}), ""},
		{"host aliases: hostnames of our ip changed", podGVK,
			podSpec(m{"hostAliases": l{m{"ip": "10.0.0.1", "hostnames": l{"a"}}}}),
			podSpec(m{"hostAliases": l{m{"ip": "10.0.0.2", "hostnames": l{"a"}}, m{"ip": "10.0.0.1", "hostnames": l{"b"}}}}),
			"spec.hostAliases[ip=10.0.0.1].hostnames[0]"},
		// topologySpreadConstraints: +listMapKey=topologyKey, +listMapKey=whenUnsatisfiable
		{"topology spread constraints keyed by topologyKey and whenUnsatisfiable", podGVK,
			podSpec(m{"topologySpreadConstraints": l{m{"maxSkew": int64(1), "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}}}),
			podSpec(m{"topologySpreadConstraints": l{
				m{"maxSkew": int64(2), "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
				m{"maxSkew": int64(1), "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
			}}), ""},
		{"topology spread constraint changed", podGVK,
			podSpec(m{"topologySpreadConstraints": l{m{"maxSkew": int64(1), "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}}}),
			podSpec(m{"topologySpreadConstraints": l{m{"maxSkew": int64(3), "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}}}),
			"spec.topologySpreadConstraints[topologyKey=zone,whenUnsatisfiable=DoNotSchedule].maxSkew"},
		// finalizers: +listType=set
		{"set: foreign elements and any order", podGVK,
			m{"metadata": m{"finalizers": l{"example.com/ours"}}},
			m{"metadata": m{"finalizers": l{"example.com/theirs", "example.com/ours"}}}, ""},
		{"set: our element missing", podGVK,
			m{"metadata": m{"finalizers": l{"example.com/theirs", "example.com/ours"}}},
			m{"metadata": m{"finalizers": l{"example.com/theirs"}}}, "metadata.finalizers[1]"},
		// ownerReferences: +listMapKey=uid
		{"owner references keyed by uid", podGVK,
			m{"metadata": m{"ownerReferences": l{m{"uid": "o-1", "name": "mine", "controller": true}}}},
			m{"metadata": m{"ownerReferences": l{m{"uid": "o-2", "name": "theirs"}, m{"uid": "o-1", "name": "mine", "controller": true}}}}, ""},
		// args: atomic
		{"args reordered", podGVK,
			containers(m{"name": "a", "args": l{"--a", "--b"}}), containers(m{"name": "a", "args": l{"--b", "--a"}}),
			"spec.containers[name=a].args[0]"},
		{"args: an extra live element", podGVK,
			containers(m{"name": "a", "args": l{"--a"}}), containers(m{"name": "a", "args": l{"--a", "--b"}}),
			"spec.containers[name=a].args"},
		// resource.Quantity: by value
		{"limits cpu 0.5 == 500m", podGVK,
			containers(m{"name": "a", "resources": m{"limits": m{"cpu": "0.5"}}}),
			containers(m{"name": "a", "resources": m{"limits": m{"cpu": "500m"}}}), ""},
		{"requests memory 1024Mi == 1Gi", podGVK,
			containers(m{"name": "a", "resources": m{"requests": m{"memory": "1024Mi"}}}),
			containers(m{"name": "a", "resources": m{"requests": m{"memory": "1Gi"}}}), ""},
		{"requests cpu sent as a number", podGVK,
			containers(m{"name": "a", "resources": m{"requests": m{"cpu": int64(2)}}}),
			containers(m{"name": "a", "resources": m{"requests": m{"cpu": "2"}}}), ""},
		{"requests cpu different", podGVK,
			containers(m{"name": "a", "resources": m{"requests": m{"cpu": "500m"}}}),
			containers(m{"name": "a", "resources": m{"requests": m{"cpu": "600m"}}}), "spec.containers[name=a].resources.requests.cpu"},
		{"unparsable quantity", podGVK,
			containers(m{"name": "a", "resources": m{"limits": m{"cpu": "lots"}}}),
			containers(m{"name": "a", "resources": m{"limits": m{"cpu": "1"}}}), "spec.containers[name=a].resources.limits.cpu"},
		{"emptyDir sizeLimit by value", podGVK,
			podSpec(m{"volumes": l{m{"name": "scratch", "emptyDir": m{"sizeLimit": "1000m"}}}}),
			podSpec(m{"volumes": l{m{"name": "scratch", "emptyDir": m{"sizeLimit": "1"}}}}), ""},
		{"emptyDir sizeLimit 1000Mi != 1000M", podGVK,
			podSpec(m{"volumes": l{m{"name": "scratch", "emptyDir": m{"sizeLimit": "1000Mi"}}}}),
			podSpec(m{"volumes": l{m{"name": "scratch", "emptyDir": m{"sizeLimit": "1000M"}}}}),
			"spec.volumes[name=scratch].emptyDir.sizeLimit"},
		{"a quantity-looking env value is compared exactly", podGVK,
			containers(m{"name": "a", "env": l{m{"name": "X", "value": "1"}}}),
			containers(m{"name": "a", "env": l{m{"name": "X", "value": "1.0"}}}), "spec.containers[name=a].env[name=X].value"},
		{"a quantity-looking label is compared exactly", podGVK,
			m{"metadata": m{"labels": m{"size": "500m"}}}, m{"metadata": m{"labels": m{"size": "0.5"}}}, "metadata.labels.size"},
		// A field the schema does not know: the structural rules.
		{"unknown field: a list is positional", podGVK,
			podSpec(m{"x-unknown": l{m{"name": "a"}, m{"name": "b"}}}), podSpec(m{"x-unknown": l{m{"name": "b"}, m{"name": "a"}}}),
			"spec.x-unknown[0].name"},
		// Service ports: +listMapKey=port, +listMapKey=protocol
		{"service port: protocol and targetPort defaulted, another manager's port", serviceGVK,
			m{"spec": m{"ports": l{m{"name": "http", "port": int64(80)}}}},
			m{"spec": m{"ports": l{
				m{"name": "dns", "port": int64(53), "protocol": "UDP", "targetPort": int64(53)},
				m{"name": "http", "port": int64(80), "protocol": "TCP", "targetPort": int64(80)},
			}}}, ""},
		{"service port renamed", serviceGVK,
			m{"spec": m{"ports": l{m{"name": "http", "port": int64(80)}}}},
			m{"spec": m{"ports": l{m{"name": "web", "port": int64(80), "protocol": "TCP"}}}}, "spec.ports[port=80].name"},
		{"service targetPort int-or-string compared exactly", serviceGVK,
			m{"spec": m{"ports": l{m{"port": int64(80), "targetPort": "http"}}}},
			m{"spec": m{"ports": l{m{"port": int64(80), "protocol": "TCP", "targetPort": int64(8080)}}}}, "spec.ports[port=80].targetPort"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkDrift(t, builtinOf(t, tt.gvk), tt.desired, tt.live, tt.wantPath) })
	}
}

// crdSchema is a custom resource's schema as the apiserver publishes it for
// the Gadget CRD: a keyed list, a set, and an int-or-string quantity field
// with no Quantity type, since custom resources store what they are sent.
// (controller-gen's applyconfiguration schema names the Go type
// resource.Quantity for it; the server's schema, which Apply reads through
// Applier.Schemas, does not.)
var crdSchema = func() *typeSchema {
	p, err := typed.NewParser(`types:
- name: gadget
  map:
    fields:
    - name: spec
      type:
        namedType: gadgetSpec
- name: gadgetSpec
  map:
    fields:
    - name: enabled
      type:
        scalar: boolean
    - name: ports
      type:
        list:
          elementType:
            namedType: gadgetPort
          elementRelationship: associative
          keys: [port, protocol]
    - name: tags
      type:
        list:
          elementType:
            scalar: string
          elementRelationship: associative
    - name: size
      type:
        scalar: untyped
- name: gadgetPort
  map:
    fields:
    - name: port
      type:
        scalar: numeric
    - name: protocol
      type:
        scalar: string
    - name: name
      type:
        scalar: string
`)
	if err != nil {
		panic(err)
	}
	pt := p.Type("gadget")
	return &typeSchema{schema: pt.Schema, root: pt.TypeRef}
}()

func TestFirstDriftCustomResourceSchema(t *testing.T) {
	spec := func(s m) m { return m{"spec": s} }
	tests := []struct {
		name          string
		desired, live m
		wantPath      string
	}{
		{"a quantity-looking string is compared exactly", spec(m{"size": "0.5"}), spec(m{"size": "500m"}), "spec.size"},
		{"a quantity-looking string as sent", spec(m{"size": "0.5"}), spec(m{"size": "0.5"}), ""},
		{"ports keyed by port and a defaulted protocol, another manager's port", spec(m{"ports": l{m{"port": int64(80)}}}),
			spec(m{"ports": l{m{"port": int64(9090), "protocol": "UDP"}, m{"port": int64(80), "protocol": "TCP"}}}), ""},
		{"our port gone", spec(m{"ports": l{m{"port": int64(80)}}}),
			spec(m{"ports": l{m{"port": int64(9090), "protocol": "UDP"}}}), "spec.ports[port=80]"},
		{"tags are a set", spec(m{"tags": l{"ours"}}), spec(m{"tags": l{"theirs", "ours"}}), ""},
		{"our tag gone", spec(m{"tags": l{"ours"}}), spec(m{"tags": l{"theirs"}}), "spec.tags[0]"},
		{"false is a value", spec(m{"enabled": false}), spec(m{"enabled": true}), "spec.enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkDrift(t, crdSchema, tt.desired, tt.live, tt.wantPath) })
	}
}

func TestBuiltinSchema(t *testing.T) {
	ts := builtinOf(t, deploymentGVK)
	again := builtinOf(t, deploymentGVK)
	assert.Same(t, ts, again, "cached")
	a, ok := ts.schema.Resolve(ts.root)
	require.True(t, ok)
	require.NotNil(t, a.Map)
	_, hasSpec := a.FindField("spec")
	assert.True(t, hasSpec)

	_, ok = builtinSchema(schema.GroupVersionKind{Group: "test.reconcilekit.io", Version: "v1", Kind: "Gadget"})
	assert.False(t, ok, "custom resources are not built in")
	_, ok = builtinSchema(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "NoSuchKind"})
	assert.False(t, ok)
}

func TestSchemaForCustomResourceNeedsSchemas(t *testing.T) {
	a := &Applier{}
	_, err := a.schemaFor(t.Context(), schema.GroupVersionKind{Group: "test.reconcilekit.io", Version: "v1", Kind: "Gadget"})
	require.ErrorIs(t, err, errNoSchema)
	assert.ErrorContains(t, err, "Applier.Schemas")
	assert.ErrorContains(t, err, "Gadget")

	ts, err := a.schemaFor(t.Context(), deploymentGVK)
	require.NoError(t, err)
	assert.Same(t, builtinOf(t, deploymentGVK), ts, "built-in kinds need no Schemas")
}

// testDeployment is what a reconciler would build: only the fields it cares
// about.
func testDeployment() *appsv1ac.DeploymentApplyConfiguration {
	labels := map[string]string{"app": "web"}
	return appsv1ac.Deployment("web", "ns").WithLabels(labels).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(2).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).
				WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
					WithName("app").
					WithImage("nginx:1.27").
					WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(8080)).
					WithEnv(corev1ac.EnvVar().WithName("MODE").WithValue("prod")).
					WithResources(corev1ac.ResourceRequirements().
						WithLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")})),
				))))
}

// applied is desired as Apply compares and applies it: configOf, our
// controller reference, finish.
func applied(tb testing.TB, desired runtime.ApplyConfiguration, ignore ...string) map[string]any {
	tb.Helper()
	config, gvk, err := configOf(desired)
	require.NoError(tb, err)
	paths, err := parseIgnore(ignore)
	require.NoError(tb, err)
	ref := metav1.OwnerReference{APIVersion: "test.reconcilekit.io/v1", Kind: "Widget", Name: "owner", UID: "o-1",
		Controller: new(true), BlockOwnerDeletion: new(true)}
	md := config["metadata"].(map[string]any)
	require.NoError(tb, setControllerRef(md, ref, gvk.Kind, client.ObjectKey{Namespace: "ns", Name: "web"}))
	require.NoError(tb, finish(config, paths))
	return config
}

// liveOf returns config as the apiserver would return it after applying
// it: every default filled in, server metadata, status, other managers'
// fields and an injected sidecar.
func liveOf(tb testing.TB, config map[string]any) *appsv1.Deployment {
	tb.Helper()
	live := &appsv1.Deployment{}
	require.NoError(tb, runtime.DefaultUnstructuredConverter.FromUnstructured(runtime.DeepCopyJSON(config), live))
	live.UID, live.ResourceVersion, live.Generation = "u-1", "42", 1
	live.CreationTimestamp = metav1.Now()
	live.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "test", Operation: metav1.ManagedFieldsOperationApply}}
	live.Annotations["deployment.kubernetes.io/revision"] = "1"
	live.Labels["team"] = "platform"
	s := &live.Spec
	s.RevisionHistoryLimit, s.ProgressDeadlineSeconds = new(int32(10)), new(int32(600))
	s.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: new(intstr.FromString("25%")), MaxSurge: new(intstr.FromString("25%"))}}
	ps := &s.Template.Spec
	ps.RestartPolicy, ps.DNSPolicy, ps.SchedulerName = corev1.RestartPolicyAlways, corev1.DNSClusterFirst, "default-scheduler"
	ps.TerminationGracePeriodSeconds = new(int64(30))
	ps.SecurityContext = &corev1.PodSecurityContext{}
	c := &ps.Containers[0]
	c.TerminationMessagePath, c.TerminationMessagePolicy = "/dev/termination-log", corev1.TerminationMessageReadFile
	c.ImagePullPolicy = corev1.PullIfNotPresent
	c.Ports[0].Protocol = corev1.ProtocolTCP
	ps.Containers = append([]corev1.Container{{Name: "istio-proxy", Image: "istio/proxyv2"}}, ps.Containers...)
	live.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2}
	return live
}

// toLiveMap converts like Apply does: TypeMeta comes from the request.
func toLiveMap(tb testing.TB, live *appsv1.Deployment) map[string]any {
	tb.Helper()
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	require.NoError(tb, err)
	u["apiVersion"], u["kind"] = "apps/v1", "Deployment"
	return u
}

func TestFirstDriftDeployment(t *testing.T) {
	container := func(d *appsv1.Deployment) *corev1.Container { return &d.Spec.Template.Spec.Containers[1] }
	tests := []struct {
		name     string
		edit     func(live *appsv1.Deployment)
		wantPath string
	}{
		{"defaults, status, foreign fields and a sidecar are not drift", func(*appsv1.Deployment) {}, ""},
		{"image", func(d *appsv1.Deployment) { container(d).Image = "evil" },
			"spec.template.spec.containers[name=app].image"},
		{"replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = new(int32(5)) }, "spec.replicas"},
		{"our label", func(d *appsv1.Deployment) { d.Labels["app"] = "x" }, "metadata.labels.app"},
		{"env value", func(d *appsv1.Deployment) { container(d).Env[0].Value = "dev" },
			"spec.template.spec.containers[name=app].env[name=MODE].value"},
		{"port name", func(d *appsv1.Deployment) { container(d).Ports[0].Name = "web" },
			"spec.template.spec.containers[name=app].ports[containerPort=8080].name"},
		{"another manager's port", func(d *appsv1.Deployment) {
			container(d).Ports = append(container(d).Ports, corev1.ContainerPort{ContainerPort: 9090, Protocol: corev1.ProtocolTCP})
		}, ""},
		{"cpu limit", func(d *appsv1.Deployment) {
			container(d).Resources.Limits[corev1.ResourceCPU] = resource.MustParse("1")
		},
			"spec.template.spec.containers[name=app].resources.limits.cpu"},
		{"container removed", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers = d.Spec.Template.Spec.Containers[:1] },
			"spec.template.spec.containers[name=app]"},
		{"config hash", func(d *appsv1.Deployment) { d.Annotations[ConfigHashAnnotation] = "old" },
			"metadata.annotations." + ConfigHashAnnotation},
		{"owner reference removed", func(d *appsv1.Deployment) { d.OwnerReferences = nil }, "metadata.ownerReferences"},
		{"another owner reference added", func(d *appsv1.Deployment) {
			d.OwnerReferences = append([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "o-2"}}, d.OwnerReferences...)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := applied(t, testDeployment())
			live := liveOf(t, config)
			tt.edit(live)
			checkDrift(t, builtinOf(t, deploymentGVK), config, toLiveMap(t, live), tt.wantPath)
		})
	}
}

func unchangedFixture(tb testing.TB) (ts *typeSchema, config, live map[string]any) {
	config = applied(tb, testDeployment())
	return builtinOf(tb, deploymentGVK), config, toLiveMap(tb, liveOf(tb, config))
}

// The comparison runs on every reconcile of every owned object; on the
// common path (no drift) it must not allocate.
func TestFirstDriftUnchangedDoesNotAllocate(t *testing.T) {
	ts, config, live := unchangedFixture(t)
	allocs := testing.AllocsPerRun(100, func() {
		if _, drifted := firstDrift(ts, config, live); drifted {
			t.Fatal("unexpected drift")
		}
	})
	assert.Zero(t, allocs)
}

func BenchmarkUnchanged(b *testing.B) {
	ts, config, live := unchangedFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, drifted := firstDrift(ts, config, live); drifted {
			b.Fatal("unexpected drift")
		}
	}
}

// A kind's schema keeps only the types it reaches: the whole built-in
// schema is about 1 MiB parsed, and an operator compares two or three kinds.
func TestSchemaKeepsOnlyReachableTypes(t *testing.T) {
	ts := builtinOf(t, deploymentGVK)
	names := map[string]bool{}
	for _, td := range ts.schema.Types {
		names[td.Name] = true
	}
	for _, want := range []string{"io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.Container", quantityType} {
		assert.True(t, names[want], "a Deployment reaches %s", want)
	}
	for _, not := range []string{"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.Service", "io.k8s.api.apps.v1.StatefulSet"} {
		assert.False(t, names[not], "a Deployment does not reach %s", not)
	}
	assert.Less(t, len(ts.schema.Types), 200, "of the ~960 built-in types")
}

// failingOpenAPI is an apiserver whose /openapi/v3 cannot be read.
type failingOpenAPI struct{ calls atomic.Int32 }

func (f *failingOpenAPI) Paths() (map[string]openapi.GroupVersion, error) {
	f.calls.Add(1)
	return nil, errors.New("forbidden")
}

// When the apiserver's schema cannot be read, a built-in kind falls back to
// client-go's and the document is not fetched again on every Apply; it is
// retried a minute later (a failure may be a passing one: a timeout, an
// apiserver restarting).
func TestUnreadableSchemaFallsBackOnce(t *testing.T) {
	api := &failingOpenAPI{}
	a := &Applier{Schemas: NewSchemaCache(api)}
	now := time.Now()
	a.Schemas.now = func() time.Time { return now }
	for range 3 {
		ts, err := a.schemaFor(t.Context(), deploymentGVK)
		require.NoError(t, err)
		assert.Same(t, builtinOf(t, deploymentGVK), ts)
	}
	assert.Equal(t, int32(1), api.calls.Load())

	// A custom resource has no fallback: the remembered error, at once.
	_, err := a.Schemas.lookup(t.Context(), deploymentGVK.GroupVersion().WithKind("NotBuiltIn"))
	require.ErrorContains(t, err, "forbidden")
	assert.Equal(t, int32(1), api.calls.Load())

	now = now.Add(schemaRetryAfter)
	ts, err := a.schemaFor(t.Context(), deploymentGVK)
	require.NoError(t, err)
	assert.Same(t, builtinOf(t, deploymentGVK), ts)
	assert.Equal(t, int32(2), api.calls.Load(), "retried after schemaRetryAfter")
}

// zeroDeployment is testDeployment with zero values its Go type cannot hold
// apart from "not set" (hostNetwork, minReadySeconds, a container's stdin and
// workingDir), and one it can (automountServiceAccountToken, a *bool).
func zeroDeployment() *appsv1ac.DeploymentApplyConfiguration {
	d := testDeployment()
	d.Spec.WithMinReadySeconds(0)
	d.Spec.Template.Spec.WithHostNetwork(false).WithAutomountServiceAccountToken(false)
	d.Spec.Template.Spec.Containers[0].WithStdin(false).WithWorkingDir("")
	return d
}

// The API server stores a built-in kind through its Go type, which drops
// a zero value of a non-pointer omitempty field: the live object never has
// it. Absent matches it; a present value must still equal it.
func TestDriftZeroValuesTheServerOmits(t *testing.T) {
	container := func(d *appsv1.Deployment) *corev1.Container { return &d.Spec.Template.Spec.Containers[1] }
	tests := []struct {
		name     string
		edit     func(live *appsv1.Deployment)
		wantPath string
	}{
		{"absent matches false, 0 and the empty string", func(*appsv1.Deployment) {}, ""},
		{"hostNetwork set to true", func(d *appsv1.Deployment) { d.Spec.Template.Spec.HostNetwork = true },
			"spec.template.spec.hostNetwork"},
		{"stdin set to true", func(d *appsv1.Deployment) { container(d).Stdin = true },
			"spec.template.spec.containers[name=app].stdin"},
		{"workingDir set", func(d *appsv1.Deployment) { container(d).WorkingDir = "/tmp" },
			"spec.template.spec.containers[name=app].workingDir"},
		{"minReadySeconds set", func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 5 }, "spec.minReadySeconds"},
		{"a pointer's false is kept, so its absence is drift", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}, "spec.template.spec.automountServiceAccountToken"},
	}
	a := &Applier{Scheme: clientgoscheme.Scheme}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			config := applied(t, zeroDeployment())
			live := liveOf(t, config)
			tt.edit(live)
			liveMap := toLiveMap(t, live)
			_, hasHostNetwork := liveMap["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["hostNetwork"]
			require.Equal(t, live.Spec.Template.Spec.HostNetwork, hasHostNetwork, "the premise: false is not in the live object")
			for _, readTyped := range []bool{true, false} {
				path, drifted := a.drift(builtinOf(t, deploymentGVK), deploymentGVK, config, liveMap, readTyped)
				assert.Equal(t, tt.wantPath != "", drifted, "readTyped=%v: drift at %q", readTyped, path)
				assert.Equal(t, tt.wantPath, path, "readTyped=%v", readTyped)
			}
		})
	}
}

// A custom resource is stored as sent. Read through its Go type, a zero
// value of a non-pointer omitempty field is dropped as a built-in kind's
// is; read unstructured, it is there, so its absence is drift.
func TestDriftZeroValuesACustomResourceReadTypedOmits(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, testv1.AddToScheme(s))
	a := &Applier{Scheme: s}
	gvk := testv1.GroupVersion.WithKind("Gadget")
	config := m{"apiVersion": gvk.GroupVersion().String(), "kind": "Gadget",
		"spec": m{"enabled": false, "ports": l{m{"port": int64(80), "name": ""}}}}
	readTyped := m{"apiVersion": gvk.GroupVersion().String(), "kind": "Gadget",
		"spec": m{"enabled": false, "replicas": int64(0), "ports": l{m{"port": int64(80), "protocol": "TCP"}}}}
	path, drifted := a.drift(crdSchema, gvk, config, readTyped, true)
	assert.False(t, drifted, "drift at %q", path)

	// Read unstructured, the name the server stores is there; gone, it is
	// drift.
	unstructuredRead := m{"apiVersion": gvk.GroupVersion().String(), "kind": "Gadget",
		"spec": m{"enabled": false, "ports": l{m{"port": int64(80), "protocol": "TCP"}}}}
	path, drifted = a.drift(crdSchema, gvk, config, unstructuredRead, false)
	assert.True(t, drifted)
	assert.Equal(t, "spec.ports[port=80].name", path)
}

// toMap converts only the top-level fields the configuration sets: the
// rest (a Deployment's status) is never compared, and converting it was
// a good part of every pass's cost. What it converts is what the full
// conversion gives.
func TestToMapConvertsWhatConfigSets(t *testing.T) {
	config := applied(t, testDeployment())
	live := liveOf(t, config)
	live.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}
	full := toLiveMap(t, live)

	got, err := toMap(live, config)
	require.NoError(t, err)
	for k := range config {
		if k != "apiVersion" && k != "kind" {
			assert.Equal(t, full[k], got[k], k)
		}
	}
	assert.Empty(t, got["status"], "status is not converted")
	assert.Len(t, live.Status.Conditions, 1, "live is not changed")

	// A configuration that sets status gets it.
	config["status"] = map[string]any{"replicas": int64(2)}
	got, err = toMap(live, config)
	require.NoError(t, err)
	assert.Equal(t, full["status"], got["status"])
}
