//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// TestWebAppSecurity checks that the operator needs no more than its
// generated RBAC, that the RBAC lets it write its own webhook
// configurations, certificate Secret and Lease and no others of their
// kinds, that every permission it holds is in the least-privilege
// assessment (operatorPermissions, with why it is needed), and that its
// pods meet Pod Security "restricted".
func TestWebAppSecurity(t *testing.T) {
	leastPrivilege := features.New("the operator runs with least privilege").
		WithLabel("area", "security").
		Assess("the operator authenticates as its ServiceAccount, with a token only", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			c := operatorClient(t)
			review := &authenticationv1.SelfSubjectReview{}
			if err := c.Create(ctx, review); err != nil {
				t.Fatal(err)
			}
			if got := review.Status.UserInfo.Username; got != operatorUser {
				t.Errorf("the operator's kubeconfig is %q, want %q", got, operatorUser)
			}
			kc, err := clientcmd.LoadFromFile(operator.saKubeconfig)
			if err != nil {
				t.Fatal(err)
			}
			for name, ai := range kc.AuthInfos {
				if ai.Token == "" || len(ai.ClientCertificateData) > 0 || ai.ClientCertificate != "" || ai.Username != "" || ai.Exec != nil || ai.AuthProvider != nil || ai.Impersonate != "" {
					t.Errorf("operator kubeconfig user %s carries more than a token: %+v", name, ai)
				}
			}
			if operator.mode == modeProcess {
				operator.mu.Lock()
				for _, p := range operator.processes {
					if p.kubeconfig == operator.saKubeconfig {
						continue
					}
					// A chaos scenario's proxy kubeconfig: another server,
					// the ServiceAccount's credentials and nothing else.
					pk, err := clientcmd.LoadFromFile(p.kubeconfig)
					same := err == nil && len(pk.AuthInfos) == len(kc.AuthInfos)
					for name, ai := range kc.AuthInfos {
						got, ok := pk.AuthInfos[name]
						same = same && ok && got.Token == ai.Token && got.ClientCertificate == "" && len(got.ClientCertificateData) == 0 &&
							got.Username == "" && got.Exec == nil && got.AuthProvider == nil && got.Impersonate == ""
					}
					if !same {
						t.Errorf("operator %s runs with kubeconfig %s, whose credentials are not the ServiceAccount's %s (%v)", p.name, p.kubeconfig, operator.saKubeconfig, err)
					}
				}
				operator.mu.Unlock()
			}
			return ctx
		}).
		Assess("what the generated RBAC does not grant is Forbidden", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			c := operatorClient(t)
			tests := []struct {
				what    string
				do      func() error
				allowed bool
			}{
				{"list Secrets in default", func() error { return c.List(ctx, &corev1.SecretList{}, client.InNamespace("default")) }, false},
				{"list Secrets cluster-wide", func() error { return c.List(ctx, &corev1.SecretList{}) }, false},
				{"list ConfigMaps in default", func() error { return c.List(ctx, &corev1.ConfigMapList{}, client.InNamespace("default")) }, false},
				{"delete a WebApp", func() error {
					return c.Delete(ctx, &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Name: "absent", Namespace: ns}}, client.DryRunAll)
				}, false},
				{"list Secrets in webapp-system", func() error {
					return c.List(ctx, &corev1.SecretList{}, client.InNamespace(operatorNamespace))
				}, false},
				{"list its certificate Secret in webapp-system (field selector metadata.name)", func() error {
					return c.List(ctx, &corev1.SecretList{}, client.InNamespace(operatorNamespace), client.MatchingFields{"metadata.name": certSecretName})
				}, true},
				{"list ValidatingWebhookConfigurations", func() error {
					return c.List(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{})
				}, false},
				{"list Deployments cluster-wide", func() error { return c.List(ctx, &appsv1.DeploymentList{}) }, true},
			}
			for _, tt := range tests {
				err := tt.do()
				switch {
				case tt.allowed && err != nil:
					t.Errorf("as the operator, %s: %v, want allowed", tt.what, err)
				case !tt.allowed && !apierrors.IsForbidden(err):
					t.Errorf("as the operator, %s: err = %v, want Forbidden", tt.what, err)
				}
			}
			return ctx
		}).
		Assess("the operator may write its own webhook configurations, certificate Secret and Lease, and no others", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			admin := cfg.Client().Resources().GetControllerRuntimeClient()
			c := operatorClient(t)
			// Next to each of the operator's own objects, one of the same
			// kind that is not its own: a webhook configuration of each kind
			// (without webhooks: it admits nothing), a Secret and a Lease in
			// the operator's namespace.
			foreign := "e2e-not-the-operators-" + ns
			kinds := []struct {
				kind          string
				own, foreign  client.Object
				list          func() client.ObjectList
				listOwn       bool // the Rotator's informers list and watch its objects by name; the Lease lock only gets
				createAllowed bool // create cannot be limited by name
			}{
				{
					"MutatingWebhookConfiguration",
					&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: mutatingConfigName}},
					&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: foreign}},
					func() client.ObjectList { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
					true, false,
				},
				{
					"ValidatingWebhookConfiguration",
					&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validatingConfigName}},
					&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: foreign}},
					func() client.ObjectList { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
					true, false,
				},
				{
					"Secret",
					&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: certSecretName, Namespace: operatorNamespace}},
					&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: foreign, Namespace: operatorNamespace}, StringData: map[string]string{"password": "not the operator's"}},
					func() client.ObjectList { return &corev1.SecretList{} },
					true, true,
				},
				{
					"Lease",
					&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leaseName, Namespace: operatorNamespace}},
					&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: foreign, Namespace: operatorNamespace}},
					func() client.ObjectList { return &coordinationv1.LeaseList{} },
					false, true,
				},
			}
			for _, k := range kinds {
				obj := k.foreign.DeepCopyObject().(client.Object)
				if err := admin.Create(ctx, obj); err != nil {
					t.Fatalf("creating %s %s: %v", k.kind, foreign, err)
				}
				t.Cleanup(func() {
					if err := admin.Delete(context.WithoutCancel(ctx), obj); err != nil && !apierrors.IsNotFound(err) {
						t.Errorf("deleting %s %s: %v", k.kind, foreign, err)
					}
				})
			}

			check := func(what string, err error, allowed bool) {
				t.Helper()
				switch {
				case allowed && err != nil:
					t.Errorf("as the operator, %s: %v, want allowed", what, err)
				case !allowed && !apierrors.IsForbidden(err):
					t.Errorf("as the operator, %s: err = %v, want Forbidden", what, err)
				}
			}
			for _, k := range kinds {
				for _, o := range []struct {
					whose string
					obj   client.Object
					mine  bool
				}{{"its own", k.own, true}, {"not its own", k.foreign, false}} {
					key := client.ObjectKeyFromObject(o.obj)
					what := func(op string) string { return fmt.Sprintf("%s %s %s (%s)", op, k.kind, key, o.whose) }
					check(what("get"), c.Get(ctx, key, o.obj.DeepCopyObject().(client.Object)), o.mine)
					check(what("list (field selector metadata.name)"),
						c.List(ctx, k.list(), client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name}), o.mine && k.listOwn)
					// The current object, read as admin, written back as the
					// operator; a dry run, so nothing changes either way. The
					// Lease is renewed every 2s: retry conflicts.
					err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
						cur := o.obj.DeepCopyObject().(client.Object)
						if err := admin.Get(ctx, key, cur); err != nil {
							return err
						}
						return c.Update(ctx, cur, client.DryRunAll)
					})
					check(what("update"), err, o.mine)
					check(what("delete"), c.Delete(ctx, o.obj.DeepCopyObject().(client.Object), client.DryRunAll), false)
				}
				in := k.own.GetNamespace()
				check(fmt.Sprintf("list every %s in %q", k.kind, in), c.List(ctx, k.list(), client.InNamespace(in)), false)
				created := k.foreign.DeepCopyObject().(client.Object)
				created.SetName(foreign + "-new")
				check(fmt.Sprintf("create %s %s (dry run)", k.kind, created.GetName()), c.Create(ctx, created, client.DryRunAll), k.createAllowed)
			}
			return ctx
		}).
		Assess("SubjectAccessReview and kubectl auth can-i agree", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			const admission = "admissionregistration.k8s.io"
			tests := []struct {
				verb, group, resource, subresource, namespace, name string
				allowed                                             bool
			}{
				{"get", "", "secrets", "", "default", "", false},
				{"list", "", "secrets", "", "", "", false},
				{"create", "", "secrets", "", ns, "", false},
				{"delete", "apps.example.com", "webapps", "", ns, "", false},
				{"update", "coordination.k8s.io", "leases", "", "default", leaseName, false},
				{"create", "apps", "deployments", "", ns, "", true},
				{"patch", "apps.example.com", "webapps", "status", ns, "", true},
				{"update", "apps.example.com", "webapps", "finalizers", ns, "", true},
				// The route registry: its shards and the legacy ConfigMap
				// by name; list/watch (its cache) in its namespace only.
				{"patch", "", "configmaps", "", operatorNamespace, registryShard("demo", "shop"), true},
				{"delete", "", "configmaps", "", operatorNamespace, registryShard("demo", "shop"), false},
				{"patch", "", "configmaps", "", operatorNamespace, legacyRegistryName, true},
				{"delete", "", "configmaps", "", operatorNamespace, legacyRegistryName, true},
				{"patch", "", "configmaps", "", operatorNamespace, "kube-root-ca.crt", false},
				{"list", "", "configmaps", "", operatorNamespace, "", true},
				{"list", "", "configmaps", "", ns, "", false},
				// Limited by name: its Lease, its certificate Secret, its two
				// webhook configurations.
				{"update", "coordination.k8s.io", "leases", "", operatorNamespace, leaseName, true},
				{"update", "coordination.k8s.io", "leases", "", operatorNamespace, "kube-controller-manager", false},
				{"list", "coordination.k8s.io", "leases", "", operatorNamespace, "", false},
				{"delete", "coordination.k8s.io", "leases", "", operatorNamespace, leaseName, false},
				{"create", "coordination.k8s.io", "leases", "", operatorNamespace, "", true},
				{"update", "", "secrets", "", operatorNamespace, certSecretName, true},
				{"watch", "", "secrets", "", operatorNamespace, certSecretName, true},
				{"get", "", "secrets", "", operatorNamespace, "some-other-secret", false},
				{"update", "", "secrets", "", operatorNamespace, "some-other-secret", false},
				{"watch", "", "secrets", "", operatorNamespace, "", false},
				{"delete", "", "secrets", "", operatorNamespace, certSecretName, false},
				{"create", "", "secrets", "", operatorNamespace, "", true},
				{"update", admission, "mutatingwebhookconfigurations", "", "", mutatingConfigName, true},
				{"update", admission, "validatingwebhookconfigurations", "", "", validatingConfigName, true},
				{"list", admission, "validatingwebhookconfigurations", "", "", validatingConfigName, true},
				{"update", admission, "mutatingwebhookconfigurations", "", "", "some-other-webhook", false},
				{"update", admission, "validatingwebhookconfigurations", "", "", "some-other-webhook", false},
				{"update", admission, "validatingwebhookconfigurations", "", "", mutatingConfigName, false},
				{"patch", admission, "validatingwebhookconfigurations", "", "", validatingConfigName, false},
				{"delete", admission, "validatingwebhookconfigurations", "", "", validatingConfigName, false},
				{"watch", admission, "mutatingwebhookconfigurations", "", "", "", false},
				{"create", admission, "validatingwebhookconfigurations", "", "", "", false},
			}
			for _, tt := range tests {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   operatorUser,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Verb: tt.verb, Group: tt.group, Resource: tt.resource, Subresource: tt.subresource, Namespace: tt.namespace, Name: tt.name,
					},
				}}
				if err := cfg.Client().Resources().Create(ctx, sar); err != nil {
					t.Fatal(err)
				}
				if sar.Status.Allowed != tt.allowed {
					t.Errorf("SubjectAccessReview %s %s/%s/%s %q in %q: allowed = %t, want %t (%s)", tt.verb, tt.group, tt.resource, tt.subresource, tt.name, tt.namespace, sar.Status.Allowed, tt.allowed, sar.Status.Reason)
				}
			}
			for _, tt := range []struct {
				args []string
				want string
			}{
				{[]string{"list", "secrets", "-n", "default"}, "no"},
				{[]string{"get", "secrets", "--all-namespaces"}, "no"},
				{[]string{"create", "deployments.apps", "-n", ns}, "yes"},
				{[]string{"patch", "webapps.apps.example.com", "--subresource=status", "-n", ns}, "yes"},
				{[]string{"update", "validatingwebhookconfigurations.admissionregistration.k8s.io/" + validatingConfigName}, "yes"},
				{[]string{"update", "validatingwebhookconfigurations.admissionregistration.k8s.io"}, "no"},
				{[]string{"update", "mutatingwebhookconfigurations.admissionregistration.k8s.io/some-other-webhook"}, "no"},
				{[]string{"get", "secrets/" + certSecretName, "-n", operatorNamespace}, "yes"},
				{[]string{"get", "secrets", "-n", operatorNamespace}, "no"},
			} {
				args := append([]string{"auth", "can-i", "--as", operatorUser}, tt.args...)
				out, err := harness.Kubectl(ctx, args...) // "no" exits 1
				if got := strings.TrimSpace(out); got != tt.want {
					t.Errorf("kubectl %s: %q (%v), want %q", strings.Join(args, " "), got, err, tt.want)
				}
			}
			return ctx
		}).
		Assess("every permission the operator holds is in the least-privilege assessment, with why it is needed", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// What the cluster grants (config/local here, config/default on
			// kind) and what both kustomizations render must be exactly
			// operatorPermissions.
			live, err := livePermissions(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			assessPermissions(t, "the suite cluster", live)
			for _, dir := range []string{"default", "local"} {
				rc := renderConfig(ctx, t, dir)
				got, err := rc.rbac.permissions()
				if err != nil {
					t.Errorf("config/%s: %v", dir, err)
				}
				assessPermissions(t, "config/"+dir, got)
				// The names in the role are the names the configurations
				// get after namePrefix (and the operator's flag defaults).
				if !slices.Equal(rc.mutating, []string{mutatingConfigName}) || !slices.Equal(rc.validating, []string{validatingConfigName}) {
					t.Errorf("config/%s renders the webhook configurations %v and %v; the role allows updating only %s and %s",
						dir, rc.mutating, rc.validating, mutatingConfigName, validatingConfigName)
				}
			}
			t.Logf("the operator's permissions and why it needs each:\n%s", describePermissions())
			return ctx
		}).
		Feature()

	podSecurity := features.New("a namespace enforcing Pod Security restricted admits the WebApp's pods").
		WithLabel("area", "security").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			harness.MustKubectl(ctx, t, "label", "namespace", Namespace(ctx, t),
				"pod-security.kubernetes.io/enforce=restricted", "pod-security.kubernetes.io/enforce-version=latest")
			return ctx
		}).
		Assess("the namespace enforces restricted", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// Without this control, pods admitted below would prove nothing.
			ns := Namespace(ctx, t)
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: ns},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/any:v1"}}},
			}
			err := cfg.Client().Resources().GetControllerRuntimeClient().Create(ctx, pod, client.DryRunAll)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted:latest"`) {
				t.Fatalf("a pod without a security context: err = %v, want Forbidden by PodSecurity restricted", err)
			}
			return ctx
		}).
		Assess("the WebApp's pods run, with no FailedCreate and no Pod Security warning", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			w := newWebApp(ns, "hardened", "registry.example.com/web:v1.0.0")
			w.Spec.Replicas = new(int32(2))
			createWebApp(ctx, t, cfg, w)
			waitWebAppReady(ctx, t, cfg, ns, w.Name, 2)
			eventually(ctx, t, convergeTimeout, "2 ready pods", func(ctx context.Context) (bool, string, error) {
				pods, err := readyPodsByImage(ctx, cfg, ns, w.Name)
				return err == nil && pods[w.Spec.Image] == 2, fmt.Sprint(pods), err
			})

			r := cfg.Client().Resources(ns)
			var events corev1.EventList
			if err := r.List(ctx, &events, resources.WithFieldSelector("reason=FailedCreate")); err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				t.Errorf("FailedCreate on %s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
			}
			var rss appsv1.ReplicaSetList
			if err := r.List(ctx, &rss, resources.WithLabelSelector(labelInstance+"="+w.Name)); err != nil {
				t.Fatal(err)
			}
			for _, rs := range rss.Items {
				for _, c := range rs.Status.Conditions {
					if c.Type == appsv1.ReplicaSetReplicaFailure {
						t.Errorf("ReplicaSet %s: %s=%s %s", rs.Name, c.Type, c.Status, c.Message)
					}
				}
			}

			// The apiserver warns about workloads whose pods would violate
			// the namespace's policy; a dry run of the operator's
			// Deployment under another name must draw no such warning.
			var d appsv1.Deployment
			if err := r.Get(ctx, w.Name, ns, &d); err != nil {
				t.Fatal(err)
			}
			probe := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-probe", Namespace: ns},
				Spec:       *d.Spec.DeepCopy(),
			}
			c, warnings := clientWithWarnings(t, cfg)
			if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
				t.Fatal(err)
			}
			for _, msg := range warnings.all() {
				if strings.Contains(msg, "PodSecurity") {
					t.Errorf("dry run of the operator's Deployment: warning %q", msg)
				}
			}
			return ctx
		}).
		Feature()

	// The operator's logs are read from here on: what ran before this
	// test (other features, other tests with other grants) is not its
	// verdict.
	mark := markOperatorLogs()
	var probe *operatorProcess
	neverDenied := features.New("the operator is never denied anything").
		WithLabel("area", "security").
		Setup(func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if operator.mode != modeProcess {
				t.Skip("reads host-process logs; E2E_OPERATOR=process")
			}
			return ctx
		}).
		Assess("control: a replica run with a flag its RBAC does not cover is denied, and the check sees it", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// --sharding needs to list the group's Leases, which config/local
			// does not grant (config/local-sharded does): the replica's
			// lease rounds are refused, and it logs each refusal as the
			// operator logs any (the API server's error in the JSON line).
			// Were the operator's log format or the API server's wording
			// to change, this finds nothing and fails, where the check
			// below would pass for not recognizing a denial.
			var err error
			if probe, err = operator.newProcess("rbac-control", false); err != nil {
				t.Fatal(err)
			}
			probe.noLeaderElection = true
			probe.extraArgs = []string{"--migrate-storage=false", "--sharding", "--shard-identity=rbac-control"}
			var once sync.Once
			stop := func(ctx context.Context) { once.Do(func() { stopRBACControl(ctx, t, cfg, probe) }) }
			t.Cleanup(func() { stop(context.WithoutCancel(ctx)) })
			if err := probe.start(ctx); err != nil {
				t.Fatal(err)
			}
			eventually(ctx, t, convergeTimeout, "the replica without the RBAC of --sharding is denied, and deniedLines finds it", func(context.Context) (bool, string, error) {
				logs, err := probe.logs()
				if err != nil {
					return false, "", err
				}
				found := deniedLines(logs)
				return len(found) > 0, fmt.Sprintf("%d denials in %d bytes of its log", len(found), len(logs)), nil
			})
			stop(ctx)
			return ctx
		}).
		Assess("the operator, taken through a WebApp's life, was never denied anything", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			// Since the mark the operator served this test's features; a
			// WebApp created, changed and deleted here makes sure it
			// reconciled, wrote every kind it owns, its status, its
			// registry, and finalized, whatever ran before. An RBAC rule
			// missing from the markers shows in its log as the
			// authorizer's denial (other Forbidden answers are not RBAC:
			// writes into a namespace being deleted are refused by
			// NamespaceLifecycle, "unable to create new content in
			// namespace ... because it is being terminated").
			ns := Namespace(ctx, t)
			w := newWebApp(ns, "audited", "registry.example.com/web:v1.0.0")
			w.Spec.Replicas = new(int32(2))
			createWebApp(ctx, t, cfg, w)
			waitWebAppReady(ctx, t, cfg, ns, w.Name, 2)
			patchWebApp(ctx, t, cfg, ns, w.Name, `{"spec":{"replicas":3,"image":"registry.example.com/web:v1.1.0"}}`)
			waitWebAppReady(ctx, t, cfg, ns, w.Name, 3)
			c := cfg.Client().Resources().GetControllerRuntimeClient()
			if err := deleteWebAppAndWait(ctx, c, client.ObjectKeyFromObject(w), convergeTimeout); err != nil {
				t.Fatal(err)
			}

			operator.mu.Lock()
			processes := slices.Clone(operator.processes)
			operator.mu.Unlock()
			for _, p := range processes {
				if p == probe {
					continue
				}
				logs, err := mark.since(p)
				if err != nil {
					t.Fatal(err)
				}
				for _, line := range deniedLines(logs) {
					t.Errorf("operator %s was denied: %s", p.name, line)
				}
			}
			return ctx
		}).
		Feature()

	testenv.Test(t, leastPrivilege, podSecurity, neverDenied)
}

// deniedLines returns the lines of an operator's log that carry the
// authorizer's denial of the operator's ServiceAccount: `... is
// forbidden: User "system:serviceaccount:..." cannot list resource ...`,
// its quotes escaped in the JSON line.
func deniedLines(logs string) []string {
	denied := `is forbidden: User \"` + operatorUser + `\" cannot`
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, denied) {
			out = append(out, line)
		}
	}
	return out
}

// logMark is where each operator process's log ended at a moment.
type logMark map[string]int64

// markOperatorLogs marks the end of every operator process's log now.
func markOperatorLogs() logMark {
	m := logMark{}
	operator.mu.Lock()
	defer operator.mu.Unlock()
	for _, p := range operator.processes {
		if fi, err := os.Stat(p.logPath); err == nil {
			m[p.logPath] = fi.Size()
		}
	}
	return m
}

// since returns what p logged after the mark: all of its log if it had
// none then.
func (m logMark) since(p *operatorProcess) (string, error) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(m[p.logPath], io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	return string(b), err
}

// stopRBACControl stops the control replica and deletes the Lease it
// created (its RBAC let it create one but not delete it).
func stopRBACControl(ctx context.Context, t *testing.T, cfg *envconf.Config, p *operatorProcess) {
	t.Helper()
	if err := p.stop(); err != nil {
		t.Error(err)
	}
	operator.retire(p)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "webapp-operator-rbac-control", Namespace: operatorNamespace}}
	if err := cfg.Client().Resources().GetControllerRuntimeClient().Delete(ctx, lease); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the control replica's Lease: %v", err)
	}
}

// operatorClient is a client with the operator's own credentials.
func operatorClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.New(operator.saConfig, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
