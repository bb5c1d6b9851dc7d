package ownership_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	testv1 "github.com/reconcilekit/reconcilekit/internal/testapi/v1"
	"github.com/reconcilekit/reconcilekit/internal/testenv"
	"github.com/reconcilekit/reconcilekit/ownership"
	"github.com/reconcilekit/reconcilekit/reconciler/reconcilertest"
)

// Longer or other random runs of TestVerdictsAgreeWithComparison, e.g.
// 40 sequences of 60 steps per kind (12,000 steps, about 4 minutes on two
// cores):
//
//	go test ./ownership -run TestVerdictsAgreeWithComparison -timeout=1h -verdict-seeds=40 -verdict-steps=60 -verdict-seed=100
//
// A failure names the sequence's kind, seed and step, its last steps, and
// the command that replays it.
var (
	verdictSeeds = flag.Int("verdict-seeds", 3, "TestVerdictsAgreeWithComparison: random sequences per kind")
	verdictSteps = flag.Int("verdict-steps", 30, "TestVerdictsAgreeWithComparison: steps per sequence")
	verdictSeed  = flag.Uint64("verdict-seed", 1, "TestVerdictsAgreeWithComparison: the first sequence's seed (the others follow it)")
)

// TestVerdictsAgreeWithComparison is the differential test of Apply's
// verdicts (verdicts.go), the shortcut that answers Unchanged without
// comparing for an object Apply already judged, against the full
// comparison they stand in for (Applier.JudgeForTest, export_test.go: the
// configuration built, the controller checked, the object converted and
// compared; nothing written or remembered). Against envtest's API server,
// with the manager's cache as the Applier's Client (what operators get)
// and the uncached client for the outside edits and the API server's
// truth, it runs fixed-seed random sequences of steps on five owned kinds:
// a Deployment and a custom resource with a status subresource no
// controller writes (Widget), whose verdicts may stand across a status
// write, and a Service, a ConfigMap and a HorizontalPodAutoscaler (left
// out of the generation allow-list), whose verdicts stand on the
// resourceVersion alone. Each step is one outside edit (or none) and an
// Apply, of the same configuration or a changed one (spec, labels,
// annotations, the OwnerLabel and IgnoreFields options). The edits: the
// spec, in a field the configuration sets or one it leaves to others;
// labels and annotations, ours and foreign, the configuration hash and the
// Deployment controller's revision annotation; owner references (another
// owner's added or removed, ours removed or its blockOwnerDeletion
// flipped, the controller taken by another owner); finalizers; the status
// alone, or with metadata through the status subresource; another
// manager's forced server-side apply, or an Update (kubectl edit, another
// controller); a delete, held by a finalizer or not, and a replacement by
// another writer; and a defaulting mutating webhook, served by the test,
// turned on and off on the object (it defaults an annotation and a field
// of the ConfigMap's data or the Widget's spec and, asked to, rewrites a
// label the configuration sets, which the API server then never keeps).
// Server-side defaults are every kind's (a Deployment's strategy, a
// Service's port protocol and cluster IP, an HPA's minReplicas). After
// each step the test waits (polling, with a deadline) until the cache
// holds the API server's resourceVersion, asks the shortcut
// (Applier.ShortcutForTest) and the comparison about that object, then
// runs Apply. Whenever the shortcut answers Unchanged the comparison must
// find nothing to change, and so must it of the object Apply leaves; a
// verdict on a kind outside the allow-list must stand on the
// resourceVersion alone; and Apply's answers must agree with the
// comparison. The default run, 3 sequences of 30 steps for each kind (450
// steps, the kinds two at a time as parallel subtests), takes about 11 s
// on two cores; it fails unless every kind took the shortcut, compared an
// edited object and found it unchanged, and found drift, and the
// Deployment and the Widget took the shortcut across a status write. (In
// envtest's Kubernetes 1.37 the HPAGeneration feature gate is on, so an
// HPA's generation does follow its spec there; a cluster without it, the
// allow-list's reason, is the unit test's:
// TestVerdictGenerationShortcutOnlyForKindsWhoseGenerationFollowsTheSpec.)
func TestVerdictsAgreeWithComparison(t *testing.T) {
	testenv.Require(t)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	t.Cleanup(cancel)
	ns := env.Namespace(t)
	m := env.StartManager(t)
	startDefaultingWebhook(ctx, t, ns)
	owner, other := diffWidget(ctx, t, ns, "owner"), diffWidget(ctx, t, ns, "other")
	kinds := diffKinds()
	// Registered after the webhook's cleanups, so it runs before them:
	// taking the finalizers off is an update the webhook answers.
	t.Cleanup(func() { cleanUpNamespace(t, ns, kinds) })

	a := &ownership.Applier{Client: m.Client, APIReader: env.Client, Scheme: env.Scheme, FieldManager: manager, Schemas: schemas()}
	tally := &diffTally{counts: map[[3]string]int{}}
	t.Run("kinds", func(t *testing.T) {
		for i := range kinds {
			k := &kinds[i]
			t.Run(k.name, func(t *testing.T) {
				t.Parallel()
				// One Applier for every kind, as in an operator; a
				// counting client of the kind's own.
				c := reconcilertest.NewClient(m.Client)
				for n := range *verdictSeeds {
					seed := *verdictSeed + uint64(n)
					s := &sequence{
						t: t, ctx: ctx, k: k, seed: seed, rnd: rand.New(rand.NewPCG(seed, uint64(i))),
						key:   client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("%s-%d", strings.ToLower(k.name), seed)},
						owner: owner, other: other, m: m, a: a.WithClient(c), c: c, tally: tally,
					}
					s.otherTakesTier = s.rnd.IntN(2) == 0
					s.run(*verdictSteps)
				}
			})
		}
	})
	t.Logf("%d kinds, %d sequences of %d steps each, %d steps in %s:\n%s",
		len(kinds), *verdictSeeds, *verdictSteps, tally.sum("", "", ""), time.Since(begin).Round(100*time.Millisecond), tally.table())
	if steps := *verdictSeeds * *verdictSteps; t.Failed() || steps < 90 {
		return // a short run need not exercise every path
	}
	for _, k := range kinds {
		assert.Positivef(t, tally.sum(k.name, "", shortcutSameVersion)+tally.sum(k.name, "", shortcutAcrossWrite),
			"%s: the shortcut was never taken", k.name)
		assert.Positivef(t, tally.sum(k.name, "", comparedUnchanged), "%s: no edited object was compared and found unchanged", k.name)
		assert.Positivef(t, tally.sum(k.name, "", comparedUpdated), "%s: no drift was found", k.name)
		if k.generationShortcut {
			assert.Positivef(t, tally.sum(k.name, "", shortcutAcrossWrite), "%s: the shortcut was never taken across a write", k.name)
		}
	}
}

// Outside edits: keys, values and field managers.
const (
	foreignLabel       = "example.com/foreign"
	foreignAnnotation  = "example.com/foreign-note"
	noteAnnotation     = "example.com/note" // the configuration's, when it sets one
	shardLabel         = "example.com/shard"
	otherLabel         = "example.com/other" // another manager's server-side apply sets it
	holdFinalizer      = "example.com/hold"
	revisionAnnotation = "deployment.kubernetes.io/revision"
	// The defaulting webhook mutates an object labelled webhookLabel=on:
	// it defaults webhookDefaulted, and with webhookOverride it sets our
	// label tier to that annotation's value (webhookTier, which no
	// configuration asks for).
	webhookLabel     = "verdicts.test/webhook"
	webhookDefaulted = "verdicts.test/defaulted"
	webhookOverride  = "verdicts.test/override-tier"
	webhookTier      = "webhook"
)

var widgetGVK = testv1.GroupVersion.WithKind("Widget")

// The answers a step's Apply gave, as the tally counts them.
const (
	shortcutSameVersion = "shortcut, same rv"
	shortcutAcrossWrite = "shortcut, across a write"
	comparedUnchanged   = "compared: Unchanged"
	comparedUpdated     = "compared: Updated"
	comparedCreated     = "compared: Created"
	comparedRefused     = "compared: refused"
)

var diffOutcomes = []string{shortcutSameVersion, shortcutAcrossWrite, comparedUnchanged, comparedUpdated, comparedCreated, comparedRefused}

// diffConfig is what a sequence asks Apply for.
type diffConfig struct {
	variant  int    // the kind's spec: 0, 1 or 2
	tier     string // our label tier
	note     string // our annotation noteAnnotation, "" none
	revision bool   // the configuration sets revisionAnnotation itself: its verdicts stand on the resourceVersion alone
	shard    string // OwnerLabel(shardLabel, shard), "" none
	ignore   bool   // IgnoreFields(the kind's ignore)
}

func (c diffConfig) labels(name string) map[string]string {
	return map[string]string{"app": name, "tier": c.tier}
}

func (c diffConfig) annotations() map[string]string {
	a := map[string]string{}
	if c.note != "" {
		a[noteAnnotation] = c.note
	}
	if c.revision {
		a[revisionAnnotation] = "7"
	}
	return a
}

// diffKind is an owned kind under test.
type diffKind struct {
	name    string
	gvk     schema.GroupVersionKind
	newObj  func() client.Object
	list    func() client.ObjectList
	desired func(name string, c diffConfig) runtime.ApplyConfiguration
	// ignore is a field a configuration may leave to others
	// (IgnoreFields), "" none.
	ignore string
	// specOurs and specForeign change, in obj, a field of its spec the
	// configuration sets, and one it leaves to others.
	specOurs, specForeign func(obj client.Object, r *rand.Rand) string
	// otherSpec is a field the configuration leaves to others, and a
	// value for it, that another manager's server-side apply sets.
	otherSpec func(r *rand.Rand) (any, []string)
	// status changes obj's status (nil: the kind has none).
	status func(obj client.Object, r *rand.Rand) string
	// forCreate readies a copy of a live object for a create, if it
	// needs more than its server-set metadata cleared.
	forCreate func(obj client.Object)
	// generationShortcut: the kind's verdicts may stand across a write
	// that leaves its generation and metadata alone (a status update).
	generationShortcut bool
}

func pickOne(r *rand.Rand, values ...string) string { return values[r.IntN(len(values))] }

// observedGeneration is what a status writer reports: mostly the
// generation, sometimes the one before (it has not caught up yet).
func observedGeneration(generation int64, r *rand.Rand) int64 {
	if generation > 1 && r.IntN(4) == 0 {
		return generation - 1
	}
	return generation
}

func diffKinds() []diffKind {
	return []diffKind{{
		name:   "Deployment",
		gvk:    appsv1.SchemeGroupVersion.WithKind("Deployment"),
		newObj: func() client.Object { return &appsv1.Deployment{} },
		list:   func() client.ObjectList { return &appsv1.DeploymentList{} },
		desired: func(name string, c diffConfig) runtime.ApplyConfiguration {
			sel := map[string]string{"app": name}
			cpu := resource.MustParse([]string{"100m", "250m", "0.5"}[c.variant])
			return appsv1ac.Deployment(name, "").WithLabels(c.labels(name)).WithAnnotations(c.annotations()).
				WithSpec(appsv1ac.DeploymentSpec().WithReplicas(int32(1 + c.variant)).
					WithSelector(metav1ac.LabelSelector().WithMatchLabels(sel)).
					WithTemplate(corev1ac.PodTemplateSpec().WithLabels(sel).WithSpec(corev1ac.PodSpec().WithContainers(
						corev1ac.Container().WithName("app").WithImage(fmt.Sprintf("registry.example/app:v%d", c.variant)).
							WithResources(corev1ac.ResourceRequirements().WithRequests(corev1.ResourceList{corev1.ResourceCPU: cpu}))))))
		},
		ignore: "spec.replicas",
		specOurs: func(obj client.Object, r *rand.Rand) string {
			d := obj.(*appsv1.Deployment)
			if r.IntN(2) == 0 {
				d.Spec.Template.Spec.Containers[0].Image = "registry.example/app:edited"
				return "image edited"
			}
			n := int32(1)
			if d.Spec.Replicas != nil {
				n = *d.Spec.Replicas
			}
			d.Spec.Replicas = new(n + 1)
			return fmt.Sprintf("replicas %d", n+1)
		},
		specForeign: func(obj client.Object, r *rand.Rand) string {
			d := obj.(*appsv1.Deployment)
			d.Spec.MinReadySeconds = int32(r.IntN(4))
			return fmt.Sprintf("minReadySeconds %d", d.Spec.MinReadySeconds)
		},
		otherSpec: func(r *rand.Rand) (any, []string) { return int64(r.IntN(4)), []string{"spec", "minReadySeconds"} },
		status: func(obj client.Object, r *rand.Rand) string {
			d := obj.(*appsv1.Deployment)
			n := int32(r.IntN(3))
			d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas = n, n, n, n
			d.Status.ObservedGeneration = observedGeneration(d.Generation, r)
			return fmt.Sprintf("replicas %d, observedGeneration %d of %d", n, d.Status.ObservedGeneration, d.Generation)
		},
		generationShortcut: true,
	}, {
		name:   "Service",
		gvk:    corev1.SchemeGroupVersion.WithKind("Service"),
		newObj: func() client.Object { return &corev1.Service{} },
		list:   func() client.ObjectList { return &corev1.ServiceList{} },
		desired: func(name string, c diffConfig) runtime.ApplyConfiguration {
			// The port (the key of its list entry) stays: a port another
			// writer created the Service with would stay beside a new one,
			// with the same name.
			return corev1ac.Service(name, "").WithLabels(c.labels(name)).WithAnnotations(c.annotations()).
				WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": name}).
					WithPorts(corev1ac.ServicePort().WithName("http").WithPort(80).WithTargetPort(intstr.FromInt32(int32(8080 + c.variant)))))
		},
		specOurs: func(obj client.Object, r *rand.Rand) string {
			s := obj.(*corev1.Service)
			if r.IntN(2) == 0 || len(s.Spec.Ports) == 0 {
				s.Spec.Selector = map[string]string{"app": "edited"}
				return "selector edited"
			}
			s.Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
			return "targetPort 9090"
		},
		specForeign: func(obj client.Object, _ *rand.Rand) string {
			s := obj.(*corev1.Service)
			s.Spec.PublishNotReadyAddresses = !s.Spec.PublishNotReadyAddresses
			return fmt.Sprintf("publishNotReadyAddresses %t", s.Spec.PublishNotReadyAddresses)
		},
		otherSpec: func(r *rand.Rand) (any, []string) {
			return r.IntN(2) == 0, []string{"spec", "publishNotReadyAddresses"}
		},
		status: func(obj client.Object, r *rand.Rand) string {
			s := obj.(*corev1.Service)
			msg := pickOne(r, "reachable", "slow", "unreachable")
			s.Status.Conditions = []metav1.Condition{{Type: "Probed", Status: metav1.ConditionTrue, Reason: "Probe",
				Message: msg, LastTransitionTime: metav1.Now()}}
			return "condition Probed: " + msg
		},
		forCreate: func(obj client.Object) {
			s := obj.(*corev1.Service)
			s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil
		},
	}, {
		name:   "ConfigMap",
		gvk:    corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		newObj: func() client.Object { return &corev1.ConfigMap{} },
		list:   func() client.ObjectList { return &corev1.ConfigMapList{} },
		desired: func(name string, c diffConfig) runtime.ApplyConfiguration {
			return corev1ac.ConfigMap(name, "").WithLabels(c.labels(name)).WithAnnotations(c.annotations()).
				WithData(map[string]string{"color": []string{"red", "green", "blue"}[c.variant], "size": strconv.Itoa(1 + c.variant)})
		},
		ignore: "data.size",
		specOurs: func(obj client.Object, r *rand.Rand) string {
			cm := obj.(*corev1.ConfigMap)
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			if _, ok := cm.Data["color"]; ok && r.IntN(3) == 0 {
				delete(cm.Data, "color")
				return "data.color removed"
			}
			cm.Data["color"] = "edited"
			return "data.color edited"
		},
		specForeign: func(obj client.Object, r *rand.Rand) string {
			cm := obj.(*corev1.ConfigMap)
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			if _, ok := cm.Data["extra"]; ok && r.IntN(2) == 0 {
				delete(cm.Data, "extra")
				return "data.extra removed"
			}
			cm.Data["extra"] = pickOne(r, "x", "y")
			return "data.extra " + cm.Data["extra"]
		},
		otherSpec: func(r *rand.Rand) (any, []string) { return pickOne(r, "x", "y"), []string{"data", "extra"} },
	}, {
		name:   "HorizontalPodAutoscaler",
		gvk:    autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler"),
		newObj: func() client.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		list:   func() client.ObjectList { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		desired: func(name string, c diffConfig) runtime.ApplyConfiguration {
			return autoscalingv2ac.HorizontalPodAutoscaler(name, "").WithLabels(c.labels(name)).WithAnnotations(c.annotations()).
				WithSpec(autoscalingv2ac.HorizontalPodAutoscalerSpec().
					WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().WithAPIVersion("apps/v1").WithKind("Deployment").WithName(name)).
					WithMaxReplicas(int32(3 + c.variant)).
					WithMetrics(autoscalingv2ac.MetricSpec().WithType(autoscalingv2.ResourceMetricSourceType).
						WithResource(autoscalingv2ac.ResourceMetricSource().WithName(corev1.ResourceCPU).
							WithTarget(autoscalingv2ac.MetricTarget().WithType(autoscalingv2.UtilizationMetricType).
								WithAverageUtilization(int32(50 + 10*c.variant))))))
		},
		specOurs: func(obj client.Object, r *rand.Rand) string {
			h := obj.(*autoscalingv2.HorizontalPodAutoscaler)
			if r.IntN(2) == 0 && len(h.Spec.Metrics) > 0 && h.Spec.Metrics[0].Resource != nil {
				h.Spec.Metrics[0].Resource.Target.AverageUtilization = new(int32(95))
				return "averageUtilization 95"
			}
			h.Spec.MaxReplicas = 9
			return "maxReplicas 9"
		},
		specForeign: func(obj client.Object, r *rand.Rand) string {
			h := obj.(*autoscalingv2.HorizontalPodAutoscaler)
			h.Spec.MinReplicas = new(int32(1 + r.IntN(2)))
			return fmt.Sprintf("minReplicas %d", *h.Spec.MinReplicas)
		},
		otherSpec: func(r *rand.Rand) (any, []string) { return int64(1 + r.IntN(2)), []string{"spec", "minReplicas"} },
		status: func(obj client.Object, r *rand.Rand) string {
			h := obj.(*autoscalingv2.HorizontalPodAutoscaler)
			h.Status.CurrentReplicas, h.Status.DesiredReplicas = int32(r.IntN(3)), int32(1+r.IntN(3))
			h.Status.ObservedGeneration = nil
			if g := observedGeneration(h.Generation, r); g > 0 {
				h.Status.ObservedGeneration = &g
			}
			return fmt.Sprintf("replicas %d→%d, observedGeneration of %d", h.Status.CurrentReplicas, h.Status.DesiredReplicas, h.Generation)
		},
	}, {
		name:    "Widget",
		gvk:     widgetGVK,
		newObj:  func() client.Object { return &testv1.Widget{} },
		list:    func() client.ObjectList { return &testv1.WidgetList{} },
		desired: func(name string, c diffConfig) runtime.ApplyConfiguration { return newWidgetConfig(name, c) },
		specOurs: func(obj client.Object, _ *rand.Rand) string {
			obj.(*testv1.Widget).Spec.Size = 9
			return "size 9"
		},
		specForeign: func(obj client.Object, r *rand.Rand) string {
			w := obj.(*testv1.Widget)
			if w.Spec.Color != "" && r.IntN(3) == 0 {
				w.Spec.Color = ""
				return "color removed"
			}
			w.Spec.Color = pickOne(r, "red", "green")
			return "color " + w.Spec.Color
		},
		otherSpec: func(r *rand.Rand) (any, []string) { return pickOne(r, "red", "green"), []string{"spec", "color"} },
		status: func(obj client.Object, r *rand.Rand) string {
			w := obj.(*testv1.Widget)
			w.Status.ObservedGeneration = observedGeneration(w.Generation, r)
			w.Status.Note = pickOne(r, "warming up", "ready", "degraded")
			return fmt.Sprintf("note %q, observedGeneration %d of %d", w.Status.Note, w.Status.ObservedGeneration, w.Generation)
		},
		generationShortcut: true,
	}}
}

// widgetConfig is a Widget's apply configuration. It says its apiVersion,
// kind and name, as controller-gen's generated ones do (the one
// client.ApplyConfigurationFromUnstructured returns does not): Apply
// looks a verdict up only for a configuration that does.
type widgetConfig struct{ u *unstructured.Unstructured }

func newWidgetConfig(name string, c diffConfig) widgetConfig {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(1 + c.variant)}}}
	u.SetAPIVersion(widgetGVK.GroupVersion().String())
	u.SetKind(widgetGVK.Kind)
	u.SetName(name)
	u.SetLabels(c.labels(name))
	if a := c.annotations(); len(a) > 0 {
		u.SetAnnotations(a)
	}
	return widgetConfig{u}
}

func (widgetConfig) IsApplyConfiguration()          {}
func (w widgetConfig) MarshalJSON() ([]byte, error) { return w.u.MarshalJSON() }
func (w widgetConfig) GetAPIVersion() *string       { return new(w.u.GetAPIVersion()) }
func (w widgetConfig) GetKind() *string             { return new(w.u.GetKind()) }
func (w widgetConfig) GetName() *string             { return new(w.u.GetName()) }
func (w widgetConfig) GetNamespace() *string        { return new(w.u.GetNamespace()) }

// sequence is one random sequence of steps on one object.
type sequence struct {
	t            *testing.T
	ctx          context.Context
	k            *diffKind
	seed         uint64
	rnd          *rand.Rand
	key          client.ObjectKey
	owner, other *testv1.Widget
	m            *testenv.Manager
	a            *ownership.Applier // shares every kind's verdicts
	c            *reconcilertest.Client
	tally        *diffTally

	cfg diffConfig
	// otherTakesTier: another manager's server-side apply sets our label
	// tier too (a manager applies the same fields every time: dropping one
	// would remove it).
	otherTakesTier bool
	history        []string
	// verdictAt is the resourceVersion of the object as Apply last
	// compared it and found it matching, or wrote it: the verdict's.
	verdictAt string
	// restore: Apply refused the object (another controller took it, or
	// it has none and nothing ties it to the owner); the next edit puts
	// our controller reference back.
	restore bool
}

// diffEdit is one kind of step.
type diffEdit struct {
	name   string
	weight int
	// needs says whether the edit can be made to cur (nil: the API server
	// has no object).
	needs func(s *sequence, cur client.Object) bool
	do    func(s *sequence, cur client.Object) (string, error)
}

var diffEdits = []diffEdit{
	{"apply again", 4, always, (*sequence).applyAgain},
	{"new configuration", 3, always, (*sequence).newConfig},
	{"spec: a field we set", 2, exists, (*sequence).specOurs},
	{"spec: a field we leave", 1, exists, (*sequence).specForeign},
	{"label: ours", 1, exists, (*sequence).labelOurs},
	{"label: foreign", 1, exists, (*sequence).labelForeign},
	{"annotation: ours or the hash", 1, exists, (*sequence).annotationOurs},
	{"annotation: foreign", 1, exists, (*sequence).annotationForeign},
	{"annotation: deployment revision", 1, exists, (*sequence).revision},
	{"owner references", 2, exists, (*sequence).ownerRefs},
	{"finalizer", 1, alive, (*sequence).finalizer},
	{"finalizer: let a deleted object go", 4, held, (*sequence).finalizer},
	{"status", 3, withStatus, (*sequence).status},
	{"status with metadata", 1, withStatus, (*sequence).statusWithMetadata},
	{"other manager: server-side apply", 2, exists, (*sequence).otherApply},
	{"delete", 1, alive, (*sequence).deleteObject},
	{"replace", 1, alive, (*sequence).replace},
	{"webhook: on or off", 1, exists, (*sequence).webhookToggle},
	{"webhook: rewrite our label", 1, exists, (*sequence).webhookRewrite},
}

func always(*sequence, client.Object) bool { return true }

func exists(_ *sequence, cur client.Object) bool { return cur != nil }

// alive: not deleted.
func alive(_ *sequence, cur client.Object) bool {
	return cur != nil && cur.GetDeletionTimestamp() == nil
}

func withStatus(s *sequence, cur client.Object) bool { return cur != nil && s.k.status != nil }

// held: deleted, and kept by our finalizer.
func held(_ *sequence, cur client.Object) bool {
	return cur != nil && cur.GetDeletionTimestamp() != nil && slices.Contains(cur.GetFinalizers(), holdFinalizer)
}

func (s *sequence) pick(values ...string) string { return pickOne(s.rnd, values...) }

func (s *sequence) randomConfig() diffConfig {
	return diffConfig{
		variant:  s.rnd.IntN(3),
		tier:     s.pick("frontend", "backend"),
		note:     s.pick("", "", "blue", "green"),
		revision: s.rnd.IntN(8) == 0,
		shard:    s.pick("", "", "a", "b"),
		ignore:   s.k.ignore != "" && s.rnd.IntN(4) == 0,
	}
}

func (s *sequence) desired() (runtime.ApplyConfiguration, []ownership.ApplyOption) {
	var opts []ownership.ApplyOption
	if s.cfg.shard != "" {
		opts = append(opts, ownership.OwnerLabel(shardLabel, s.cfg.shard))
	}
	if s.cfg.ignore {
		opts = append(opts, ownership.IgnoreFields(s.k.ignore))
	}
	return s.k.desired(s.key.Name, s.cfg), opts
}

func (s *sequence) run(steps int) {
	s.cfg = s.randomConfig()
	for step := range steps {
		name, desc := "create", fmt.Sprintf("%+v", s.cfg)
		if step > 0 {
			name, desc = s.edit(step)
		}
		if desc != "" {
			desc = ": " + desc
		}
		s.history = append(s.history, fmt.Sprintf("%d %s%s", step, name, desc))
		s.check(step, name)
	}
}

// edit makes one random edit (or none, or changes the configuration) and
// returns its name and what it did.
func (s *sequence) edit(step int) (string, string) {
	cur := s.server()
	if s.restore {
		s.restore = false
		if cur != nil {
			desc, err := s.restoreController(cur)
			require.NoErrorf(s.t, err, "%s seed %d step %d: putting our controller reference back", s.k.name, s.seed, step)
			return "owner references: ours back", desc
		}
	}
	var choices []diffEdit
	total := 0
	for _, e := range diffEdits {
		if e.needs(s, cur) {
			choices = append(choices, e)
			total += e.weight
		}
	}
	n := s.rnd.IntN(total)
	for _, e := range choices {
		if n >= e.weight {
			n -= e.weight
			continue
		}
		desc, err := e.do(s, cur)
		require.NoErrorf(s.t, err, "%s seed %d step %d: %s: %s", s.k.name, s.seed, step, e.name, desc)
		return e.name, desc
	}
	panic("unreachable")
}

// check runs one step's Apply: it waits until the cache holds the API
// server's object, asks the shortcut and the full comparison about it,
// applies, and checks that they agree, and that the object Apply leaves
// matches the configuration.
func (s *sequence) check(step int, edit string) {
	t := s.t
	where := fmt.Sprintf("%s seed %d step %d (%s)", s.k.name, s.seed, step, edit)
	server := s.server()
	cached := s.waitForCache(where, server)
	desired, opts := s.desired()

	shortcut, err := s.a.ShortcutForTest(s.ctx, s.owner, desired, opts...)
	require.NoErrorf(t, err, "%s: asking the shortcut", where)
	truth, err := s.a.JudgeForTest(s.ctx, s.owner, desired, server, opts...)
	require.NoErrorf(t, err, "%s: comparing the API server's object", where)
	fromCache, err := s.a.JudgeForTest(s.ctx, s.owner, desired, cached, opts...)
	require.NoErrorf(t, err, "%s: comparing the cache's copy", where)
	require.Truef(t, sameJudgement(truth, fromCache), "%s: the cache's copy, at the API server's resourceVersion, is %s; the API server's is %s",
		where, fromCache, truth)

	rv, generation := "", int64(0)
	if server != nil {
		rv, generation = server.GetResourceVersion(), server.GetGeneration()
	}
	if shortcut {
		require.Truef(t, truth.Unchanged, "%s: the verdict answered Unchanged without comparing, but the full comparison finds the live object "+
			"(resourceVersion %s, generation %d; the verdict's resourceVersion %s) %s\n%s", where, rv, generation, s.verdictAt, truth, s.replay(step))
		if !s.k.generationShortcut {
			require.Equalf(t, s.verdictAt, rv, "%s: a %s's verdict stands on its resourceVersion alone, but the shortcut was taken across a write\n%s",
				where, s.k.name, s.replay(step))
		}
	}

	s.c.Reset()
	op, applyErr := s.a.Apply(s.ctx, s.owner, desired, opts...)
	if truth.Refused != "" {
		var fce *ownership.ForeignControllerError
		var are *ownership.AdoptionRefusedError
		require.Truef(t, errors.As(applyErr, &fce) || errors.As(applyErr, &are),
			"%s: the comparison refuses the object (%s), Apply answered %q, %v\n%s", where, truth.Refused, op, applyErr, s.replay(step))
		s.restore = true
	} else {
		require.NoErrorf(t, applyErr, "%s: Apply (the comparison finds it %s)\n%s", where, truth, s.replay(step))
	}
	switch {
	case shortcut:
		require.Equalf(t, ownership.Unchanged, op, "%s: the shortcut answers Unchanged; Apply wrote %v", where, s.c.MutatingRequests())
	case op == ownership.Unchanged:
		require.Truef(t, truth.Unchanged, "%s: Apply answered Unchanged, but the full comparison finds the live object (resourceVersion %s) %s\n%s",
			where, rv, truth, s.replay(step))
	case truth.Unchanged:
		require.Failf(t, "Apply wrote an unchanged object", "%s: Apply answered %q (%v); the full comparison finds nothing to change", where, op, s.c.MutatingRequests())
	}
	if op == ownership.Unchanged {
		require.Zerof(t, s.c.Mutations(), "%s: Apply answered Unchanged and wrote %v", where, s.c.MutatingRequests())
	}
	s.tally.add(s.k.name, edit, s.outcome(shortcut, rv, op, applyErr))
	if applyErr != nil {
		return
	}

	// The object as Apply left it matches the configuration, but where
	// the webhook rewrites our label.
	after := s.server()
	require.NotNilf(t, after, "%s: Apply answered %q; the API server has no object", where, op)
	j, err := s.a.JudgeForTest(s.ctx, s.owner, desired, after, opts...)
	require.NoErrorf(t, err, "%s: comparing the API server's object after Apply", where)
	if rewritten(after) {
		require.Equalf(t, "metadata.labels.tier", j.Drift, "%s: the webhook rewrites our label; the object after Apply is %s", where, j)
		return
	}
	require.Truef(t, j.Unchanged, "%s: Apply answered %q; the API server's object after it (resourceVersion %s) is %s\n%s",
		where, op, after.GetResourceVersion(), j, s.replay(step))
	if !shortcut {
		s.verdictAt = after.GetResourceVersion()
	}
}

func (s *sequence) outcome(shortcut bool, rv string, op ownership.ApplyResult, err error) string {
	switch {
	case shortcut && rv == s.verdictAt:
		return shortcutSameVersion
	case shortcut:
		return shortcutAcrossWrite
	case err != nil:
		return comparedRefused
	case op == ownership.Unchanged:
		return comparedUnchanged
	case op == ownership.Created:
		return comparedCreated
	}
	return comparedUpdated
}

// sameJudgement: the same answer (two comparisons of an object that
// differs in several fields may name different ones).
func sameJudgement(a, b ownership.Judgement) bool {
	return a.Unchanged == b.Unchanged && a.Refused == b.Refused && (a.Drift == "") == (b.Drift == "")
}

// rewritten reports whether the webhook rewrites our label tier on obj.
func rewritten(obj client.Object) bool {
	return obj.GetLabels()[webhookLabel] == "on" && obj.GetAnnotations()[webhookOverride] != ""
}

// replay is the sequence's last steps and the command that replays it.
func (s *sequence) replay(step int) string {
	h := s.history
	if len(h) > 15 {
		h = h[len(h)-15:]
	}
	return fmt.Sprintf("steps (the last %d):\n  %s\nreplay: go test ./ownership -run 'TestVerdictsAgreeWithComparison/kinds/%s$' -verdict-seed=%d -verdict-seeds=1 -verdict-steps=%d",
		len(h), strings.Join(h, "\n  "), s.k.name, s.seed, step+1)
}

// server reads the object from the API server, nil if it has none.
func (s *sequence) server() client.Object {
	s.t.Helper()
	obj := s.k.newObj()
	err := env.Client.Get(s.ctx, s.key, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoErrorf(s.t, err, "%s %s: reading the API server's object", s.k.name, s.key)
	return obj
}

// waitForCache polls the manager's cache until it holds server's
// resourceVersion (nil: until it has no object), and returns its copy.
func (s *sequence) waitForCache(where string, server client.Object) client.Object {
	s.t.Helper()
	want := ""
	if server != nil {
		want = server.GetResourceVersion()
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		obj := s.k.newObj()
		err := s.m.Client.Get(s.ctx, s.key, obj)
		switch {
		case err == nil && want != "" && obj.GetResourceVersion() == want:
			return obj
		case apierrors.IsNotFound(err) && want == "":
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			s.t.Fatalf("%s: reading the cache: %v", where, err)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: the cache never reached the API server's resourceVersion %q (it has %q, %v)", where, want, obj.GetResourceVersion(), err)
		}
		select {
		case <-tick.C:
		case <-s.ctx.Done():
			s.t.Fatalf("%s: waiting for the cache: %v", where, s.ctx.Err())
		}
	}
}

// update writes cur with an Update, as one of two field managers: a
// person's kubectl edit, or another controller that read the object.
func (s *sequence) update(cur client.Object, desc string) (string, error) {
	m := s.pick("kubectl-edit", "other-controller")
	return desc + " (update as " + m + ")", env.Client.Update(s.ctx, cur, client.FieldOwner(m))
}

// editMap returns a copy of m with key set to one of values, or
// (sometimes, when present) removed, and says which.
func (s *sequence) editMap(m map[string]string, key string, values ...string) (map[string]string, string) {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	old, had := out[key]
	if had && s.rnd.IntN(3) == 0 {
		delete(out, key)
		return out, fmt.Sprintf("%s=%s removed", key, old)
	}
	v := s.pick(values...)
	out[key] = v
	if had {
		return out, fmt.Sprintf("%s %s→%s", key, old, v)
	}
	return out, fmt.Sprintf("%s=%s added", key, v)
}

func (s *sequence) applyAgain(client.Object) (string, error) { return "", nil }

func (s *sequence) newConfig(client.Object) (string, error) {
	old := s.cfg
	if s.cfg = s.randomConfig(); s.cfg == old {
		return "the same one", nil
	}
	return fmt.Sprintf("%+v", s.cfg), nil
}

func (s *sequence) specOurs(cur client.Object) (string, error) {
	return s.update(cur, s.k.specOurs(cur, s.rnd))
}

func (s *sequence) specForeign(cur client.Object) (string, error) {
	return s.update(cur, s.k.specForeign(cur, s.rnd))
}

func (s *sequence) labelOurs(cur client.Object) (string, error) {
	values := map[string][]string{"app": {s.key.Name, "hacked"}, "tier": {"frontend", "backend", "hacked"}}
	if s.cfg.shard != "" {
		values[shardLabel] = []string{"a", "b"}
	}
	key := s.pick(slices.Sorted(maps.Keys(values))...)
	labels, desc := s.editMap(cur.GetLabels(), key, values[key]...)
	cur.SetLabels(labels)
	return s.update(cur, desc)
}

func (s *sequence) labelForeign(cur client.Object) (string, error) {
	labels, desc := s.editMap(cur.GetLabels(), foreignLabel, "x", "y")
	cur.SetLabels(labels)
	return s.update(cur, desc)
}

func (s *sequence) annotationOurs(cur client.Object) (string, error) {
	values := map[string][]string{ownership.ConfigHashAnnotation: {"edited"}, noteAnnotation: {"blue", "green", "edited"}}
	if s.cfg.revision {
		values[revisionAnnotation] = []string{"7", "8"}
	}
	key := s.pick(slices.Sorted(maps.Keys(values))...)
	ann, desc := s.editMap(cur.GetAnnotations(), key, values[key]...)
	cur.SetAnnotations(ann)
	return s.update(cur, desc)
}

func (s *sequence) annotationForeign(cur client.Object) (string, error) {
	ann, desc := s.editMap(cur.GetAnnotations(), foreignAnnotation, "x", "y")
	cur.SetAnnotations(ann)
	return s.update(cur, desc)
}

// revision sets the annotation the Deployment controller writes on every
// rollout, which the verdicts leave out of the metadata they compare
// (unless the configuration sets it): through the status subresource, as
// that controller's status writes go (a Deployment's generation stays), or
// with an Update.
func (s *sequence) revision(cur client.Object) (string, error) {
	ann := maps.Clone(cur.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	ann[revisionAnnotation] = strconv.Itoa(1 + s.rnd.IntN(5))
	cur.SetAnnotations(ann)
	desc := revisionAnnotation + "=" + ann[revisionAnnotation]
	if s.k.status != nil && s.rnd.IntN(2) == 0 {
		return desc + " (status update)", env.Client.Status().Update(s.ctx, cur, client.FieldOwner("deployment-controller"))
	}
	return s.update(cur, desc)
}

func (s *sequence) ownerRefs(cur client.Object) (string, error) {
	refs := slices.Clone(cur.GetOwnerReferences())
	ours := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == s.owner.UID })
	theirs := slices.IndexFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == s.other.UID })
	choices := []string{"add theirs"}
	if theirs >= 0 {
		choices = []string{"remove theirs"}
	}
	if ours >= 0 {
		choices = append(choices, "remove ours", "flip ours", "steal")
	}
	var desc string
	switch s.pick(choices...) {
	case "add theirs":
		refs = append(refs, metav1.OwnerReference{APIVersion: widgetGVK.GroupVersion().String(), Kind: widgetGVK.Kind,
			Name: s.other.Name, UID: s.other.UID})
		desc = "another owner's reference added"
	case "remove theirs":
		refs = slices.Delete(refs, theirs, theirs+1)
		desc = "another owner's reference removed"
	case "remove ours":
		refs = slices.Delete(refs, ours, ours+1)
		desc = "our controller reference removed"
	case "flip ours":
		block := refs[ours].BlockOwnerDeletion == nil || !*refs[ours].BlockOwnerDeletion
		refs[ours].BlockOwnerDeletion = &block
		desc = fmt.Sprintf("our blockOwnerDeletion %t", block)
	case "steal":
		refs[ours].Controller = new(false)
		if theirs >= 0 {
			refs = slices.Delete(refs, theirs, theirs+1)
		}
		refs = append(refs, *metav1.NewControllerRef(s.other, widgetGVK))
		desc = "another owner took the controller reference"
	}
	cur.SetOwnerReferences(refs)
	return s.update(cur, desc)
}

// restoreController makes our owner the controller again, as the
// configuration has it.
func (s *sequence) restoreController(cur client.Object) (string, error) {
	refs := slices.DeleteFunc(slices.Clone(cur.GetOwnerReferences()), func(r metav1.OwnerReference) bool {
		return r.UID == s.owner.UID || r.Controller != nil && *r.Controller
	})
	cur.SetOwnerReferences(append(refs, *metav1.NewControllerRef(s.owner, widgetGVK)))
	return s.update(cur, "our controller reference back")
}

func (s *sequence) finalizer(cur client.Object) (string, error) {
	f := slices.Clone(cur.GetFinalizers())
	if slices.Contains(f, holdFinalizer) {
		cur.SetFinalizers(slices.DeleteFunc(f, func(x string) bool { return x == holdFinalizer }))
		return s.update(cur, holdFinalizer+" removed")
	}
	cur.SetFinalizers(append(f, holdFinalizer))
	return s.update(cur, holdFinalizer+" added")
}

func (s *sequence) status(cur client.Object) (string, error) {
	desc := s.k.status(cur, s.rnd)
	return desc, env.Client.Status().Update(s.ctx, cur, client.FieldOwner("status-writer"))
}

// statusWithMetadata writes the status and some metadata through the
// status subresource, which keeps some of it (a Deployment's annotations,
// owner references and finalizers, not its labels; a custom resource's
// none).
func (s *sequence) statusWithMetadata(cur client.Object) (string, error) {
	desc := s.k.status(cur, s.rnd)
	choices := []string{"foreign annotation", "our annotation", "revision", "our label"}
	if cur.GetDeletionTimestamp() == nil || slices.Contains(cur.GetFinalizers(), holdFinalizer) {
		choices = append(choices, "finalizer")
	}
	if metav1.GetControllerOf(cur) != nil {
		choices = append(choices, "our blockOwnerDeletion")
	}
	var what string
	switch s.pick(choices...) {
	case "foreign annotation":
		var ann map[string]string
		ann, what = s.editMap(cur.GetAnnotations(), foreignAnnotation, "x", "y")
		cur.SetAnnotations(ann)
	case "our annotation":
		var ann map[string]string
		ann, what = s.editMap(cur.GetAnnotations(), noteAnnotation, "blue", "edited")
		cur.SetAnnotations(ann)
	case "revision":
		var ann map[string]string
		ann, what = s.editMap(cur.GetAnnotations(), revisionAnnotation, "1", "2", "3")
		cur.SetAnnotations(ann)
	case "our label":
		var labels map[string]string
		labels, what = s.editMap(cur.GetLabels(), "tier", "hacked")
		cur.SetLabels(labels)
	case "finalizer":
		f := slices.Clone(cur.GetFinalizers())
		if slices.Contains(f, holdFinalizer) {
			cur.SetFinalizers(slices.DeleteFunc(f, func(x string) bool { return x == holdFinalizer }))
			what = holdFinalizer + " removed"
		} else {
			cur.SetFinalizers(append(f, holdFinalizer))
			what = holdFinalizer + " added"
		}
	case "our blockOwnerDeletion":
		refs := slices.Clone(cur.GetOwnerReferences())
		for i := range refs {
			if refs[i].Controller != nil && *refs[i].Controller {
				block := refs[i].BlockOwnerDeletion == nil || !*refs[i].BlockOwnerDeletion
				refs[i].BlockOwnerDeletion = &block
				what = fmt.Sprintf("controller's blockOwnerDeletion %t", block)
			}
		}
		cur.SetOwnerReferences(refs)
	}
	return desc + ", " + what + " (status update)", env.Client.Status().Update(s.ctx, cur, client.FieldOwner("status-writer"))
}

// otherApply is another manager's forced server-side apply: always the
// same fields (our label tier among them, in some sequences), with random
// values.
func (s *sequence) otherApply(client.Object) (string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(s.k.gvk)
	u.SetNamespace(s.key.Namespace)
	u.SetName(s.key.Name)
	labels := map[string]string{otherLabel: s.pick("x", "y")}
	if s.otherTakesTier {
		labels["tier"] = s.pick(s.cfg.tier, "theirs")
	}
	u.SetLabels(labels)
	value, path := s.k.otherSpec(s.rnd)
	if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
		return "", err
	}
	desc := fmt.Sprintf("labels %v, %s=%v (server-side apply as other-operator, forced)", labels, strings.Join(path, "."), value)
	return desc, env.Client.Apply(s.ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("other-operator"), client.ForceOwnership)
}

func (s *sequence) deleteObject(cur client.Object) (string, error) {
	desc := "deleted"
	if len(cur.GetFinalizers()) > 0 {
		desc = "deleted, held by " + strings.Join(cur.GetFinalizers(), ",")
	}
	return desc, env.Client.Delete(s.ctx, cur)
}

// replace deletes the object and creates it again as it was, with a new
// UID, as another writer (a restore from a backup).
func (s *sequence) replace(cur client.Object) (string, error) {
	if len(cur.GetFinalizers()) > 0 {
		cur.SetFinalizers(nil)
		if err := env.Client.Update(s.ctx, cur, client.FieldOwner("other-controller")); err != nil {
			return "", fmt.Errorf("taking the finalizers off: %w", err)
		}
	}
	if err := env.Client.Delete(s.ctx, cur); err != nil {
		return "", fmt.Errorf("deleting: %w", err)
	}
	if err := s.waitGone(); err != nil {
		return "", err
	}
	cp := cur.DeepCopyObject().(client.Object)
	cp.SetResourceVersion("")
	cp.SetUID("")
	cp.SetCreationTimestamp(metav1.Time{})
	cp.SetManagedFields(nil)
	cp.SetGeneration(0)
	if s.k.forCreate != nil {
		s.k.forCreate(cp)
	}
	return "deleted, and created again as it was by another writer", env.Client.Create(s.ctx, cp, client.FieldOwner("other-controller"))
}

// waitGone polls the API server until it has no object.
func (s *sequence) waitGone() error {
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		err := env.Client.Get(s.ctx, s.key, s.k.newObj())
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("waiting for the deletion: %w", err)
		case time.Now().After(deadline):
			return errors.New("the deleted object is still there after 30 s")
		}
		select {
		case <-tick.C:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

func (s *sequence) webhookToggle(cur client.Object) (string, error) {
	labels := maps.Clone(cur.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	desc := "webhook on"
	if labels[webhookLabel] == "on" {
		delete(labels, webhookLabel)
		desc = "webhook off"
	} else {
		labels[webhookLabel] = "on"
	}
	cur.SetLabels(labels)
	return s.update(cur, desc)
}

func (s *sequence) webhookRewrite(cur client.Object) (string, error) {
	ann := maps.Clone(cur.GetAnnotations())
	if ann == nil {
		ann = map[string]string{}
	}
	desc := "the webhook rewrites our label tier"
	if ann[webhookOverride] != "" {
		delete(ann, webhookOverride)
		desc = "the webhook leaves our label alone"
	} else {
		ann[webhookOverride] = webhookTier
	}
	if cur.GetLabels()[webhookLabel] != "on" {
		desc += " (when on; it is off)"
	}
	cur.SetAnnotations(ann)
	return s.update(cur, desc)
}

// diffTally counts the answers by kind, edit and outcome.
type diffTally struct {
	mu     sync.Mutex
	counts map[[3]string]int
}

func (d *diffTally) add(kind, edit, outcome string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.counts[[3]string{kind, edit, outcome}]++
}

// sum adds up the counts of kind, edit and outcome ("": any).
func (d *diffTally) sum(kind, edit, outcome string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for k, v := range d.counts {
		if (kind == "" || k[0] == kind) && (edit == "" || k[1] == edit) && (outcome == "" || k[2] == outcome) {
			n += v
		}
	}
	return n
}

// table has a row per kind and per edit, a column per outcome.
func (d *diffTally) table() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	rows := map[string][]int{}
	for k, n := range d.counts {
		for _, row := range []string{"kind " + k[0], "edit " + k[1]} {
			if rows[row] == nil {
				rows[row] = make([]int, len(diffOutcomes))
			}
			rows[row][slices.Index(diffOutcomes, k[2])] += n
		}
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\t%s\t\n", strings.Join(diffOutcomes, "\t"))
	for _, row := range slices.Sorted(maps.Keys(rows)) {
		fmt.Fprint(w, row)
		for _, n := range rows[row] {
			fmt.Fprintf(w, "\t%d", n)
		}
		fmt.Fprintln(w, "\t")
	}
	_ = w.Flush()
	return b.String()
}

func diffWidget(ctx context.Context, t *testing.T, ns, name string) *testv1.Widget {
	t.Helper()
	w := &testv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	require.NoErrorf(t, env.Client.Create(ctx, w), "creating Widget %s", name)
	return w
}

// startDefaultingWebhook serves a mutating admission webhook for the
// kinds under test in namespace ns, on objects labelled webhookLabel=on,
// until t ends: it defaults an annotation (webhookDefaulted), a ConfigMap's
// data.defaulted and a Widget's spec.color, and, on an object annotated
// webhookOverride, rewrites our label tier.
func startDefaultingWebhook(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	srv := httptest.NewTLSServer(&admission.Webhook{Handler: admission.HandlerFunc(defaultForTest)})
	t.Cleanup(srv.Close)
	url := srv.URL + "/mutate"
	none, fail := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Fail
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "verdicts-diff-"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "default.verdicts.test",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url,
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{"", "apps", "autoscaling", widgetGVK.Group},
					APIVersions: []string{"*"},
					Resources:   []string{"configmaps", "services", "deployments", "horizontalpodautoscalers", "widgets"},
				},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{webhookLabel: "on"}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	require.NoError(t, env.Client.Create(ctx, cfg), "creating the MutatingWebhookConfiguration")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, client.IgnoreNotFound(env.Client.Delete(ctx, cfg)), "deleting the MutatingWebhookConfiguration")
	})
	// The API server calls the webhook once its informer has the
	// configuration.
	require.Eventually(t, func() bool {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns, Labels: map[string]string{webhookLabel: "on"}}}
		return env.Client.Create(ctx, cm, client.DryRunAll) == nil && cm.Annotations[webhookDefaulted] == "true"
	}, 30*time.Second, 10*time.Millisecond, "the defaulting webhook never answered")
}

func defaultForTest(_ context.Context, req admission.Request) admission.Response {
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	md := child(obj, "metadata")
	ann := child(md, "annotations")
	if _, ok := ann[webhookDefaulted]; !ok {
		ann[webhookDefaulted] = "true"
	}
	if v, _ := ann[webhookOverride].(string); v != "" {
		child(md, "labels")["tier"] = v
	}
	switch req.Kind.Kind {
	case "ConfigMap":
		if data := child(obj, "data"); data["defaulted"] == nil {
			data["defaulted"] = "by-webhook"
		}
	case "Widget":
		if spec, ok := obj["spec"].(map[string]any); ok && spec["color"] == nil {
			spec["color"] = "webhook-blue"
		}
	}
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

// child returns m[key] as a map, made if missing.
func child(m map[string]any, key string) map[string]any {
	c, ok := m[key].(map[string]any)
	if !ok {
		c = map[string]any{}
		m[key] = c
	}
	return c
}

// cleanUpNamespace deletes what the test created in ns, our finalizers
// taken off first, and ns itself (which envtest, without a namespace
// controller, leaves terminating, and empty).
func cleanUpNamespace(t *testing.T, ns string, kinds []diffKind) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range kinds {
		list := k.list()
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Errorf("cleaning up: listing %ss: %v", k.name, err)
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Errorf("cleaning up: %ss: %v", k.name, err)
			continue
		}
		for _, item := range items {
			obj := item.(client.Object)
			if len(obj.GetFinalizers()) > 0 {
				obj.SetFinalizers(nil)
				if err := env.Client.Update(ctx, obj); client.IgnoreNotFound(err) != nil {
					t.Errorf("cleaning up: taking the finalizers off %s %s: %v", k.name, obj.GetName(), err)
				}
			}
			if err := env.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("cleaning up: deleting %s %s: %v", k.name, obj.GetName(), err)
			}
		}
	}
	if err := env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
		t.Errorf("cleaning up: deleting namespace %s: %v", ns, err)
	}
}
