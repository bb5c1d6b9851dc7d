// Command cache-operator runs the Cache controller: one step, and the kind
// it owns.
package main

import (
	"context"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/reconciler"

	cachev1alpha1 "github.com/reconcilekit/reconcilekit/docs/quickstart/api/v1alpha1"
)

func main() {
	ctrl.SetLogger(zap.New())
	if err := run(); err != nil {
		ctrl.Log.Error(err, "cache-operator")
		os.Exit(1)
	}
}

// run starts a manager with the Cache controller, until SIGTERM. Its scheme
// is client-go's, with the Cache added.
func run() error {
	if err := cachev1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	if err := setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// setup registers the Cache controller with mgr: it watches Caches and the
// Deployments they own.
func setup(mgr ctrl.Manager) error {
	r, err := reconciler.New(mgr, reconciler.Options[*cachev1alpha1.Cache]{
		Name:  "cache-controller",
		Owns:  []client.Object{&appsv1.Deployment{}},
		Steps: []reconciler.Step[*cachev1alpha1.Cache]{{Name: "deployment", Condition: "Available", Run: applyDeployment}},
	})
	if err != nil {
		return err
	}
	return r.SetupWithManager(mgr)
}

// applyDeployment applies memcached's Deployment and waits for its rollout.
func applyDeployment(ctx context.Context, s *reconciler.Scope[*cachev1alpha1.Cache]) reconciler.Outcome {
	labels := map[string]string{"app.kubernetes.io/instance": s.Object.Name}
	dep := appsv1ac.Deployment(s.Object.Name, s.Object.Namespace).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(ptr.Deref(s.Object.Spec.Replicas, 1)).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("memcached").WithImage(s.Object.Spec.Image)))))
	return s.ApplyAndWait(ctx, dep, &appsv1.Deployment{})
}
