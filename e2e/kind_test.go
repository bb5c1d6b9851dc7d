//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// What only a real node shows: kind_test.go runs on E2E_PROVIDER=kind with
// the operator deployed from config/default (`make test-kind`) and skips
// everywhere else (kwok's node never runs a container, and pod and Service
// IPs there are fake). Nothing here connects from the host to a pod or a
// Service: traffic inside the cluster is sent by Jobs running the suite's
// web image (hack/web) in client mode, `web -get URL`, and the
// test reads their exit status and logs through the apiserver.

// Names on the kind cluster, from hack/image.sh and examples/webapp/config.
const (
	// kindWebImage is hack/image.sh's WEB_IMG default; the same binary is
	// also tagged with the names the WebApps use (registry.example.com/web:...).
	kindWebImage          = "reconcilekit/web:dev"
	kindWebAppImage       = "registry.example.com/web:v1.0.0"
	webhookSecret         = "webapp-webhook-server-cert"
	webhookService        = "webapp-webhook-service"
	mutatingWebhookConfig = "webapp-mutating-webhook-configuration"
	validatingWebhookCfg  = "webapp-validating-webhook-configuration"
	metricsReaderRole     = "webapp-metrics-reader"
	operatorPodLabel      = "control-plane=controller-manager"
	// jobTimeout bounds a client Job: scheduling, start and its own
	// -deadline.
	jobTimeout = 3 * time.Minute
)

// requireKind skips t unless the suite runs on kind with the operator
// deployed in the cluster.
func requireKind(t *testing.T) {
	t.Helper()
	if harness.opts.Provider != ProviderKind || operator.mode != modeDeployment {
		t.Skipf("needs a real node: E2E_PROVIDER=kind with E2E_OPERATOR=deployment (here %s, %s); run make test-kind", harness.opts.Provider, operator.mode)
	}
}

// TestKindPodsRunAndServiceRoutes: a WebApp's pods run our web image for
// real, and its Service routes to them from inside the cluster.
func TestKindPodsRunAndServiceRoutes(t *testing.T) {
	requireKind(t)
	const app = "served"
	f := features.New("kind: a WebApp's pods run and its Service routes").
		WithLabel("area", "kind").
		Assess("the pods run the web image: Running, containers started and Ready", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			w := newWebApp(ns, app, kindWebAppImage)
			w.Spec.Replicas = new(int32(2))
			w.Spec.Resources = &webappv1.ContainerResources{CPU: new(resource.MustParse("50m")), Memory: new(resource.MustParse("32Mi"))}
			createWebApp(ctx, t, cfg, w)
			waitWebAppReady(ctx, t, cfg, ns, app, 2)
			pods := webAppPods(ctx, t, cfg, ns, app)
			if len(pods) != 2 {
				t.Fatalf("WebApp %s has %d pods, want 2: %v", app, len(pods), podNames(pods))
			}
			for _, p := range pods {
				requirePodRunning(t, &p, kindWebAppImage)
			}
			return ctx
		}).
		Assess("a Job in the cluster gets 200 from http://<service>.<namespace>.svc, answered by one of the pods", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			url := fmt.Sprintf("http://%s.%s.svc/", app, ns)
			logs := runClientJob(ctx, t, cfg, ns, "get-"+app, "", "-get", url, "-times", "4", "-deadline", "60s")
			// The web server answers with its hostname: the pod's name.
			pods := webAppPods(ctx, t, cfg, ns, app)
			if !slices.ContainsFunc(pods, func(p corev1.Pod) bool { return strings.Contains(logs, "webapp "+p.Name+" /") }) {
				t.Fatalf("the Service's answer names none of the WebApp's pods %v; Job log:\n%s", podNames(pods), logs)
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// TestKindOperatorFailover: config/default's two replicas run with leader
// election; deleting the leader's pod hands the Lease to another replica,
// which reconciles.
func TestKindOperatorFailover(t *testing.T) {
	requireKind(t)
	var deleted corev1.Pod
	f := features.New("kind: the operator leader's pod is deleted; another replica takes over").
		WithLabel("area", "kind").
		Assess("config/default runs two Ready replicas of the operator image with --leader-elect", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			waitDeployment(ctx, t, cfg, operatorNamespace, operatorDeployment, "2 replicas rolled out", func(d *appsv1.Deployment) bool {
				return deploymentRolledOut(d, 2)
			})
			pods := operatorPods(ctx, t, cfg)
			if len(pods) != 2 {
				t.Fatalf("%d operator pods, want 2: %v", len(pods), podNames(pods))
			}
			for _, p := range pods {
				requirePodRunning(t, &p, operator.image)
				if !slices.Contains(p.Spec.Containers[0].Args, "--leader-elect") {
					t.Errorf("pod %s runs without --leader-elect: %v", p.Name, p.Spec.Containers[0].Args)
				}
			}
			return ctx
		}).
		Assess("deleting the leader's pod moves the Lease to another pod", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			lease, err := operator.lease(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			holder := ptrString(lease.Spec.HolderIdentity)
			pods := operatorPods(ctx, t, cfg)
			leader := slices.IndexFunc(pods, func(p corev1.Pod) bool { return holdsLease(holder, p.Name) })
			if leader < 0 {
				t.Fatalf("Lease holder %q is none of the operator pods %v", holder, podNames(pods))
			}
			deleted = pods[leader]
			t.Logf("deleting the leader's pod %s (holder %s)", deleted.Name, holder)
			if err := cfg.Client().Resources().Delete(ctx, &deleted); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, convergeTimeout, "another pod holds the Lease", func(ctx context.Context) (bool, string, error) {
				l, err := operator.lease(ctx, cfg)
				if err != nil {
					return false, "", err
				}
				now := ptrString(l.Spec.HolderIdentity)
				return now != "" && now != holder && !holdsLease(now, deleted.Name), "holder=" + now, nil
			})
			l, err := operator.lease(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the Lease moved from %s to %s (transitions %d)", holder, ptrString(l.Spec.HolderIdentity), ptrInt32(l.Spec.LeaseTransitions))
			return ctx
		}).
		Assess("a WebApp created after the deletion becomes Ready with its pods running", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			// The deleted pod's webhook endpoint goes away with it; the
			// new WebApp is admitted by the remaining replicas.
			if err := operator.waitWebhookServing(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			w := newWebApp(ns, "after-failover", kindWebAppImage)
			w.Spec.Resources = &webappv1.ContainerResources{CPU: new(resource.MustParse("50m")), Memory: new(resource.MustParse("32Mi"))}
			createWebApp(ctx, t, cfg, w)
			waitWebAppReady(ctx, t, cfg, ns, w.Name, 1)
			for _, p := range webAppPods(ctx, t, cfg, ns, w.Name) {
				requirePodRunning(t, &p, kindWebAppImage)
			}
			return ctx
		}).
		Assess("the Deployment replaces the deleted pod: two Ready replicas again", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			waitOperatorReplaced(ctx, t, cfg, deleted.UID)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// Whatever failed above, the next feature needs both replicas.
			if _, err := harness.Kubectl(ctx, "rollout", "status", "-n", operatorNamespace, "deployment/"+operatorDeployment, "--timeout=3m"); err != nil {
				t.Error(err)
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// TestKindWebhookCertificateReissued: the webhook certificate Secret is
// deleted; the leader re-issues it (a new CA, staged in the caBundles
// before a certificate it signed is served) and admission never fails
// meanwhile, through the webhook Service.
func TestKindWebhookCertificateReissued(t *testing.T) {
	requireKind(t)
	f := features.New("kind: the webhook Secret is deleted, the certificate is re-issued, admission keeps working").
		WithLabel("area", "kind").
		Assess("re-issued and served through the Service, no admission failing meanwhile", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			r := cfg.Client().Resources()
			var old corev1.Secret
			if err := r.Get(ctx, webhookSecret, operatorNamespace, &old); err != nil {
				t.Fatal(err)
			}
			oldLeaf, _ := parseWebhookSecret(t, &old)
			oldCAs := parseCerts(t, "old ca.crt", old.Data["ca.crt"])
			// Any path: only the certificate the Service's backends present counts.
			url := fmt.Sprintf("https://%s.%s.svc/mutate-apps-example-com-v1-webapp", webhookService, operatorNamespace)
			// The client sees the certificate webhookkit issued: the check
			// below can tell one certificate from another.
			runClientJob(ctx, t, cfg, ns, "cert-before", "", "-get", url, "-insecure", "-want", "any",
				"-cert-sha256", fingerprint(oldLeaf), "-times", "6", "-deadline", "60s")

			probe := startAdmissionProbe(ctx, cfg, ns)
			defer probe.stop()
			// The probe runs back to back from before the deletion to after
			// the new certificate is served: it is seen admitting first.
			probe.waitAdmitted(ctx, t, time.Now(), "before the Secret is deleted")
			if err := r.Delete(ctx, &old); err != nil {
				t.Fatal(err)
			}
			t.Logf("deleted Secret %s/%s (uid %s)", operatorNamespace, webhookSecret, old.UID)

			var leaf, signer *x509.Certificate
			eventually(ctx, t, 3*time.Minute, "a new certificate, signed by a new CA that both caBundles trust", func(ctx context.Context) (bool, string, error) {
				var s corev1.Secret
				if err := r.Get(ctx, webhookSecret, operatorNamespace, &s); err != nil {
					return false, "", client.IgnoreNotFound(err)
				}
				if s.UID == old.UID {
					return false, "the old Secret is still there", nil
				}
				if len(s.Data[corev1.TLSCertKey]) == 0 || len(s.Data["ca.crt"]) == 0 {
					return false, "the new Secret has no certificate yet", nil
				}
				leaf, signer = parseWebhookSecret(t, &s)
				state := fmt.Sprintf("Secret uid %s, certificate %s issued by %q", s.UID, fingerprint(leaf)[:12], leaf.Issuer.CommonName)
				if leaf.Equal(oldLeaf) || signer == nil || slices.ContainsFunc(oldCAs, signer.Equal) {
					return false, state + ": not yet re-issued by a new CA", nil
				}
				for _, bundle := range webhookCABundles(ctx, t, cfg) {
					if !slices.ContainsFunc(parseCerts(t, "caBundle", bundle), signer.Equal) {
						return false, state + ": the new CA is not in every caBundle yet", nil
					}
				}
				return true, state, nil
			})
			runClientJob(ctx, t, cfg, ns, "cert-after", "", "-get", url, "-insecure", "-want", "any",
				"-cert-sha256", fingerprint(leaf), "-times", "8", "-deadline", "90s")
			// One more admission with the new certificate served, begun by
			// the probe after it was seen served: the probe covered the
			// whole re-issue, however few requests a loaded machine let it
			// make.
			probe.waitAdmitted(ctx, t, time.Now(), "with the re-issued certificate served")
			ok, failures, timeouts := probe.stop()
			t.Logf("admission probe: %d dry-run creates admitted, %d refused, %d without an answer in time", ok, len(failures), len(timeouts))
			for _, err := range timeouts {
				// Slowness, not the certificate: a webhook call or request
				// that outlived its deadline got no verdict either way.
				t.Logf("no answer in time (not counted): %v", err)
			}
			if len(failures) > 0 {
				t.Fatalf("%d dry-run creates were refused while the certificate was re-issued; first: %v", len(failures), failures[0])
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// TestKindSecureMetrics: the operator's HTTPS metrics endpoint, through
// config/prometheus' metrics Service, answers a ServiceAccount bound to the
// metrics-reader ClusterRole and refuses one that is not.
func TestKindSecureMetrics(t *testing.T) {
	requireKind(t)
	var createdService bool
	var binding *rbacv1.ClusterRoleBinding
	f := features.New("kind: secure metrics through the Service, for an allowed ServiceAccount only").
		WithLabel("area", "kind").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			r := cfg.Client().Resources()
			svc := metricsService(t)
			switch err := r.Create(ctx, svc); {
			case err == nil:
				createdService = true
			case !apierrors.IsAlreadyExists(err):
				t.Fatal(err)
			}
			for _, sa := range []string{"scraper", "stranger"} {
				if err := r.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
					t.Fatal(err)
				}
			}
			binding = &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "e2e-" + ns + "-metrics-reader", Labels: map[string]string{namespaceLabel: "true"}},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
			}
			if err := r.Create(ctx, binding); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("the bound ServiceAccount gets 200 and reconcilekit_ metrics", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			logs := runClientJob(ctx, t, cfg, ns, "scrape-allowed", "scraper", metricsArgs("200")...)
			if !hasAll(logs, "# TYPE reconcilekit_", "reconcilekit_webhook_certificate_expiration_timestamp_seconds") {
				t.Fatalf("the metrics lack reconcilekit_ series; Job log:\n%s", tailLines(logs, 40))
			}
			return ctx
		}).
		Assess("a ServiceAccount without the role gets 403", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			logs := runClientJob(ctx, t, cfg, ns, "scrape-denied", "stranger", metricsArgs("403")...)
			if strings.Contains(logs, "# TYPE") {
				t.Fatalf("the refused ServiceAccount got metrics; Job log:\n%s", tailLines(logs, 40))
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			r := cfg.Client().Resources()
			if binding != nil {
				if err := r.Delete(ctx, binding); client.IgnoreNotFound(err) != nil {
					t.Error(err)
				}
			}
			if createdService {
				if err := r.Delete(ctx, metricsService(t)); client.IgnoreNotFound(err) != nil {
					t.Error(err)
				}
			}
			return ctx
		}).
		Feature()
	testenv.Test(t, f)
}

// metricsService is config/prometheus' metrics Service as config/default
// would name it (namePrefix webapp-, namespace webapp-system). It is not
// in config/default (config/prometheus needs the Prometheus Operator's
// CRDs), so the feature creates it from the shipped file.
func metricsService(t *testing.T) *corev1.Service {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "config", "prometheus", "metrics_service.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict(b, &svc); err != nil {
		t.Fatalf("config/prometheus/metrics_service.yaml: %v", err)
	}
	svc.Name, svc.Namespace = "webapp-"+svc.Name, operatorNamespace
	return &svc
}

// metricsArgs are the client's arguments for a scrape through the metrics
// Service with the pod's ServiceAccount token, expecting status want. The
// endpoint's certificate is controller-runtime's self-signed one.
func metricsArgs(want string) []string {
	return []string{
		"-get", fmt.Sprintf("https://webapp-controller-manager-metrics-service.%s.svc:8443/metrics", operatorNamespace),
		"-insecure", "-bearer-file", "/var/run/secrets/kubernetes.io/serviceaccount/token",
		"-want", want, "-times", "4", "-deadline", "60s",
	}
}

// runClientJob runs the web image in client mode (`web args...`) as a Job
// in ns under ServiceAccount sa ("" for default), waits for it to finish,
// fails t unless it succeeded, and returns its log (each attempt's status
// and certificate on stderr, the last body on stdout).
func runClientJob(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name, sa string, args ...string) string {
	t.Helper()
	job := clientJob(ns, name, sa, args)
	r := cfg.Client().Resources()
	if err := r.Create(ctx, job); err != nil {
		t.Fatalf("create Job %s/%s: %v", ns, name, err)
	}
	var failed bool
	eventually(ctx, t, jobTimeout, fmt.Sprintf("Job %s/%s (web %s) finishes", ns, name, strings.Join(args, " ")), func(ctx context.Context) (bool, string, error) {
		var j batchv1.Job
		if err := r.Get(ctx, name, ns, &j); err != nil {
			return false, "", err
		}
		for _, c := range j.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
				failed = c.Type == batchv1.JobFailed
				return true, string(c.Type), nil
			}
		}
		return false, fmt.Sprintf("active=%d succeeded=%d failed=%d", j.Status.Active, j.Status.Succeeded, j.Status.Failed), nil
	})
	logs, err := harness.Kubectl(ctx, "logs", "-n", ns, "job/"+name)
	if err != nil {
		t.Fatalf("logs of Job %s/%s: %v", ns, name, err)
	}
	if failed {
		t.Fatalf("Job %s/%s (web %s) failed; its log:\n%s", ns, name, strings.Join(args, " "), tailLines(logs, 40))
	}
	return logs
}

// clientJob is a Job of one pod that runs the web image in client mode,
// with no retries (the client retries until its -deadline itself) and the
// Pod Security "restricted" settings.
func clientJob(ns, name, sa string, args []string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit:          new(int32(0)),
			ActiveDeadlineSeconds: new(int64(jobTimeout / time.Second)),
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: sa,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   new(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "web",
						Image:           kindWebImage,
						ImagePullPolicy: corev1.PullNever, // loaded by hack/image.sh; nothing can be pulled
						Args:            args,
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: new(false),
							ReadOnlyRootFilesystem:   new(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

// requirePodRunning fails t unless p really runs image (its first
// container's): Running, every container started by the container runtime
// (an image ID and a container ID), running, Ready and never restarted.
func requirePodRunning(t *testing.T, p *corev1.Pod, image string) {
	t.Helper()
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		t.Fatalf("pod %s: phase %s, IP %q; want Running with an IP", p.Name, p.Status.Phase, p.Status.PodIP)
	}
	if len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		t.Fatalf("pod %s: %d container statuses for %d containers", p.Name, len(p.Status.ContainerStatuses), len(p.Spec.Containers))
	}
	if got := p.Spec.Containers[0].Image; got != image {
		t.Errorf("pod %s: image %q, want %q", p.Name, got, image)
	}
	// The statuses name the image by whichever of its tags the runtime
	// lists first (hack/image.sh tags one image with several names), so
	// only the IDs are checked there.
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.ImageID == "" || !strings.Contains(cs.ContainerID, "://"):
			t.Errorf("pod %s container %s: imageID %q, containerID %q; want both from the runtime", p.Name, cs.Name, cs.ImageID, cs.ContainerID)
		case cs.State.Running == nil || !cs.Ready || cs.Started == nil || !*cs.Started:
			t.Errorf("pod %s container %s: state %+v ready=%t; want running, started and ready", p.Name, cs.Name, cs.State, cs.Ready)
		case cs.RestartCount != 0:
			t.Errorf("pod %s container %s restarted %d times", p.Name, cs.Name, cs.RestartCount)
		}
	}
}

// webAppPods lists the live pods of a WebApp.
func webAppPods(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, name string) []corev1.Pod {
	t.Helper()
	return listPods(ctx, t, cfg, ns, labels.SelectorFromSet(labels.Set{labelInstance: name}).String())
}

// operatorPods lists the live pods of the operator's Deployment.
func operatorPods(ctx context.Context, t *testing.T, cfg *envconf.Config) []corev1.Pod {
	t.Helper()
	return listPods(ctx, t, cfg, operatorNamespace, operatorPodLabel)
}

func listPods(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, selector string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := cfg.Client().Resources(ns).List(ctx, &pods, resources.WithLabelSelector(selector)); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool { return p.DeletionTimestamp != nil })
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// holdsLease reports whether a Lease holder identity is the pod's:
// controller-runtime's identity is <hostname>_<uuid>, and a pod's hostname
// is its name.
func holdsLease(holder, pod string) bool { return strings.HasPrefix(holder, pod+"_") }

// waitOperatorReplaced waits until the operator Deployment is rolled out
// with two Ready pods, none of them the pod with UID gone.
func waitOperatorReplaced(ctx context.Context, t *testing.T, cfg *envconf.Config, gone types.UID) {
	t.Helper()
	eventually(ctx, t, convergeTimeout, "two Ready operator pods, the deleted one replaced", func(ctx context.Context) (bool, string, error) {
		var d appsv1.Deployment
		if err := cfg.Client().Resources().Get(ctx, operatorDeployment, operatorNamespace, &d); err != nil {
			return false, "", err
		}
		var pods corev1.PodList
		if err := cfg.Client().Resources(operatorNamespace).List(ctx, &pods, resources.WithLabelSelector(operatorPodLabel)); err != nil {
			return false, "", err
		}
		var names []string
		stale := false
		for _, p := range pods.Items {
			names = append(names, p.Name)
			stale = stale || p.UID == gone
		}
		return deploymentRolledOut(&d, 2) && !stale && len(pods.Items) == 2, fmt.Sprintf("%s pods %v", describeDeployment(&d), names), nil
	})
}

// parseWebhookSecret returns the serving certificate of the webhook Secret
// and the CA of its ca.crt that signed it (nil if none did).
func parseWebhookSecret(t *testing.T, s *corev1.Secret) (leaf, signer *x509.Certificate) {
	t.Helper()
	certs := parseCerts(t, "tls.crt", s.Data[corev1.TLSCertKey])
	if len(certs) == 0 {
		t.Fatalf("Secret %s has no certificate in tls.crt", s.Name)
	}
	leaf = certs[0]
	for _, ca := range parseCerts(t, "ca.crt", s.Data["ca.crt"]) {
		if leaf.CheckSignatureFrom(ca) == nil {
			return leaf, ca
		}
	}
	return leaf, nil
}

// parseCerts parses the PEM certificates in b.
func parseCerts(t *testing.T, what string, b []byte) []*x509.Certificate {
	t.Helper()
	out, err := decodeCerts(b)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return out
}

// decodeCerts parses the PEM certificates in b.
func decodeCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
}

// fingerprint is a certificate's SHA-256, as the web client prints it.
func fingerprint(c *x509.Certificate) string {
	s := sha256.Sum256(c.Raw)
	return hex.EncodeToString(s[:])
}

// webhookCABundles returns the caBundle of every webhook in the operator's
// two webhook configurations.
func webhookCABundles(ctx context.Context, t *testing.T, cfg *envconf.Config) [][]byte {
	t.Helper()
	r := cfg.Client().Resources()
	var m admissionregistrationv1.MutatingWebhookConfiguration
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := r.Get(ctx, mutatingWebhookConfig, "", &m); err != nil {
		t.Fatal(err)
	}
	if err := r.Get(ctx, validatingWebhookCfg, "", &v); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, w := range m.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	for _, w := range v.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

// dryRunWebApp creates a WebApp with a server-side dry run: both webhooks
// are called, nothing is stored. It checks the mutating webhook defaulted
// it.
func dryRunWebApp(ctx context.Context, cfg *envconf.Config, ns string) error {
	w := &webappv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "admission-probe-", Namespace: ns},
		Spec:       webappv1.WebAppSpec{Image: kindWebAppImage},
	}
	if err := cfg.Client().Resources().GetControllerRuntimeClient().Create(ctx, w, client.DryRunAll); err != nil {
		return err
	}
	if w.Spec.Resources == nil || w.Spec.Resources.CPU == nil {
		return fmt.Errorf("admitted without the mutating webhook's defaults: %+v", w.Spec)
	}
	return nil
}

// admissionProbe makes dry-run creates of WebApps back to back until
// stopped, and counts them: admitted, refused (an answer that is not an
// admission: an untrusted certificate, a refused connection, a denial),
// and timed out (no answer within the webhook's or the request's
// deadline, which says the machine is slow, not that admission failed).
type admissionProbe struct {
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	ok       int
	lastOK   time.Time // when the last admitted request began
	failures []error
	timeouts []error
}

// probeRequestTimeout is a probe request's own deadline: longer than the
// webhook's (timeoutSeconds, 10 s by default), so that a slow webhook call
// comes back as the API server's answer, whose text says it timed out.
const probeRequestTimeout = 30 * time.Second

// startAdmissionProbe starts a probe in the background: one dry-run create
// every 100ms, each with its own deadline (probeRequestTimeout).
func startAdmissionProbe(ctx context.Context, cfg *envconf.Config, ns string) *admissionProbe {
	ctx, cancel := context.WithCancel(ctx)
	p := &admissionProbe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			began := time.Now()
			reqCtx, reqCancel := context.WithTimeout(ctx, probeRequestTimeout)
			err := dryRunWebApp(reqCtx, cfg, ns)
			reqCancel()
			if ctx.Err() != nil {
				return // stopped while a request was in flight: not counted
			}
			p.mu.Lock()
			switch {
			case err == nil:
				p.ok++
				p.lastOK = began
			case timedOut(err):
				p.timeouts = append(p.timeouts, fmt.Errorf("%s: %w", began.Format(time.RFC3339Nano), err))
			default:
				p.failures = append(p.failures, fmt.Errorf("%s: %w", began.Format(time.RFC3339Nano), err))
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// waitAdmitted waits until a request the probe began at or after since was
// admitted.
func (p *admissionProbe) waitAdmitted(ctx context.Context, t *testing.T, since time.Time, when string) {
	t.Helper()
	eventually(ctx, t, convergeTimeout, "the admission probe admitted "+when, func(context.Context) (bool, string, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.lastOK.Before(since), fmt.Sprintf("%d admitted (the last begun at %s), %d refused, %d timed out",
			p.ok, p.lastOK.Format(time.RFC3339Nano), len(p.failures), len(p.timeouts)), nil
	})
}

// stop ends the probe and returns its counts; it may be called again.
func (p *admissionProbe) stop() (ok int, failures, timeouts []error) {
	p.once.Do(func() {
		p.cancel()
		<-p.done
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok, p.failures, p.timeouts
}

// timedOut reports whether err is an admission that got no answer in time:
// the request's own deadline, the API server's, or its call of the webhook
// outliving the webhook's timeoutSeconds. A certificate that is not
// trusted or a connection refused is an answer, and not a timeout.
func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"context deadline exceeded", "Client.Timeout exceeded", "i/o timeout", "TLS handshake timeout"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// tailLines returns the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func ptrInt32(i *int32) int32 {
	if i == nil {
		return 0
	}
	return *i
}

// pauseSuiteOperator stops the suite's operator (config/default) for a
// feature that installs another copy of the operator on the same cluster
// (TestKindBundleInstall's OLM bundle, TestKindHelmInstall's chart): both
// would reconcile the same WebApps, and the suite's Rotator would rewrite
// the CRD's conversion caBundle. It scales the Deployment to zero, waits
// until its pods are gone and deletes its webhook configurations.
//
// A cleanup on t (the feature's t: it runs when the feature ends, pass or
// fail, after the cleanups the feature registers later) brings it back:
// config/default as the suite installed it (installed.yaml, server-side
// with --force-conflicts, which takes back every field the other install
// owned and recreates what it deleted: the CRD, the roles, the webhook
// configurations), rolled out, its webhooks admitting and the CRD's
// conversion calling its Service with its CA again.
func pauseSuiteOperator(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	t.Helper()
	c := cfg.Client().Resources().GetControllerRuntimeClient()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		start := time.Now()
		installed := filepath.Join(operator.workDir, "installed.yaml")
		if _, err := harness.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", installed); err != nil {
			t.Errorf("restoring the suite's operator: %v", err)
			return
		}
		if _, err := harness.Kubectl(ctx, "rollout", "status", "-n", operatorNamespace, "deployment/"+operatorDeployment, "--timeout=5m"); err != nil {
			t.Errorf("restoring the suite's operator: %v", err)
			return
		}
		if err := operator.waitWebhookServing(ctx, cfg); err != nil {
			t.Errorf("restoring the suite's operator: %v", err)
			return
		}
		if err := waitSuiteConversion(ctx, c); err != nil {
			t.Errorf("restoring the suite's operator: %v", err)
			return
		}
		t.Logf("the suite's operator is back in %v", time.Since(start).Round(time.Second))
	})
	harness.MustKubectl(ctx, t, "scale", "-n", operatorNamespace, "deployment/"+operatorDeployment, "--replicas=0")
	eventually(ctx, t, 2*time.Minute, "the suite's operator scaled to zero", func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(operatorNamespace), client.MatchingLabels{"control-plane": "controller-manager"}); err != nil {
			return false, "", err
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items)), nil
	})
	harness.MustKubectl(ctx, t, "delete", "--ignore-not-found", "mutatingwebhookconfiguration/"+mutatingWebhookConfig, "validatingwebhookconfiguration/"+validatingWebhookCfg)
}

// waitSuiteConversion waits until the WebApp CRD's conversion webhook
// calls the suite operator's Service with a caBundle that holds the CA of
// its certificate Secret: installed.yaml names the Service, the suite's
// Rotator injects the CA (another install left its own there).
func waitSuiteConversion(ctx context.Context, c client.Client) error {
	state, last := "(never read)", error(nil)
	err := wait.PollUntilContextTimeout(ctx, pollInterval, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var ok bool
		ok, state, last = suiteConversion(ctx, c)
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("the WebApp CRD's conversion webhook does not call %s/%s with the suite operator's CA: %w (last: %s, error %v)", operatorNamespace, webhookService, err, state, last)
	}
	return nil
}

// suiteConversion is one check of waitSuiteConversion.
func suiteConversion(ctx context.Context, c client.Client) (bool, string, error) {
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: webhookSecret}, &s); err != nil {
		return false, "no certificate Secret", err
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := c.Get(ctx, client.ObjectKey{Name: webappCRD}, crd); err != nil {
		return false, "no CRD", err
	}
	return conversionTrusts(crd, webhookService, operatorNamespace, s.Data["ca.crt"])
}

// conversionTrusts reports whether crd's conversion webhook calls the
// Service namespace/service with a caBundle holding one of the CAs in
// caPEM, and describes what it calls.
func conversionTrusts(crd *unstructured.Unstructured, service, namespace string, caPEM []byte) (bool, string, error) {
	cc := []string{"spec", "conversion", "webhook", "clientConfig"}
	name, _, _ := unstructured.NestedString(crd.Object, append(cc, "service", "name")...)
	ns, _, _ := unstructured.NestedString(crd.Object, append(cc, "service", "namespace")...)
	encoded, _, _ := unstructured.NestedString(crd.Object, append(cc, "caBundle")...)
	bundle, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return false, "", fmt.Errorf("CRD %s: caBundle: %w", crd.GetName(), err)
	}
	trusted, err := decodeCerts(bundle)
	if err != nil {
		return false, "", fmt.Errorf("CRD %s: caBundle: %w", crd.GetName(), err)
	}
	cas, err := decodeCerts(caPEM)
	if err != nil {
		return false, "", fmt.Errorf("ca.crt: %w", err)
	}
	ok := name == service && ns == namespace && slices.ContainsFunc(cas, func(ca *x509.Certificate) bool { return slices.ContainsFunc(trusted, ca.Equal) })
	return ok, fmt.Sprintf("conversion calls %s/%s with %d CAs in its caBundle (%d in ca.crt)", ns, name, len(trusted), len(cas)), nil
}
