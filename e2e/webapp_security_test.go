//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	webappv1 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v1"
)

// TestWebAppSecurity checks that the operator needs no more than its
// generated RBAC and that its pods meet Pod Security "restricted".
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
					if p.kubeconfig != operator.saKubeconfig {
						t.Errorf("operator %s runs with kubeconfig %s, want the ServiceAccount's %s", p.name, p.kubeconfig, operator.saKubeconfig)
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
				{"list Secrets in webapp-system (its certificate)", func() error {
					return c.List(ctx, &corev1.SecretList{}, client.InNamespace(operatorNamespace))
				}, true},
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
		Assess("SubjectAccessReview and kubectl auth can-i agree", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			ns := Namespace(ctx, t)
			tests := []struct {
				verb, group, resource, subresource, namespace string
				allowed                                       bool
			}{
				{"get", "", "secrets", "", "default", false},
				{"list", "", "secrets", "", "", false},
				{"create", "", "secrets", "", ns, false},
				{"delete", "apps.example.com", "webapps", "", ns, false},
				{"update", "coordination.k8s.io", "leases", "", "default", false},
				{"create", "apps", "deployments", "", ns, true},
				{"patch", "apps.example.com", "webapps", "status", ns, true},
				{"update", "apps.example.com", "webapps", "finalizers", ns, true},
				{"update", "coordination.k8s.io", "leases", "", operatorNamespace, true},
				{"patch", "", "configmaps", "", operatorNamespace, true},
			}
			for _, tt := range tests {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   operatorUser,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Verb: tt.verb, Group: tt.group, Resource: tt.resource, Subresource: tt.subresource, Namespace: tt.namespace,
					},
				}}
				if err := cfg.Client().Resources().Create(ctx, sar); err != nil {
					t.Fatal(err)
				}
				if sar.Status.Allowed != tt.allowed {
					t.Errorf("SubjectAccessReview %s %s/%s/%s in %q: allowed = %t, want %t (%s)", tt.verb, tt.group, tt.resource, tt.subresource, tt.namespace, sar.Status.Allowed, tt.allowed, sar.Status.Reason)
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
			} {
				args := append([]string{"auth", "can-i", "--as", operatorUser}, tt.args...)
				out, err := harness.Kubectl(ctx, args...) // "no" exits 1
				if got := strings.TrimSpace(out); got != tt.want {
					t.Errorf("kubectl %s: %q (%v), want %q", strings.Join(args, " "), got, err, tt.want)
				}
			}
			return ctx
		}).
		Assess("the operator was never denied anything", func(ctx context.Context, t *testing.T, _ *envconf.Config) context.Context {
			if operator.mode != modeProcess {
				t.Skip("reads host-process logs; E2E_OPERATOR=process")
			}
			// Every feature so far ran against it; an RBAC rule missing from
			// the markers would show up in its log as the authorizer's
			// denial: `... is forbidden: User "system:serviceaccount:..."
			// cannot list resource ...`. (Other Forbidden answers are not
			// RBAC: writes into a namespace being deleted are refused by
			// NamespaceLifecycle, "unable to create new content in
			// namespace ... because it is being terminated".)
			denied := `is forbidden: User \"` + operatorUser + `\" cannot`
			operator.mu.Lock()
			defer operator.mu.Unlock()
			for _, p := range operator.processes {
				b, err := os.ReadFile(p.logPath)
				if err != nil {
					t.Fatal(err)
				}
				for _, line := range strings.Split(string(b), "\n") {
					if strings.Contains(line, denied) {
						t.Errorf("operator %s was denied: %s", p.name, line)
					}
				}
			}
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

	testenv.Test(t, leastPrivilege, podSecurity)
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
