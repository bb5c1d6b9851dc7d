// Command cache-operator runs the Cache controller.
package main

import (
	"context"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
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

// run starts a manager with the Cache controller, until SIGTERM.
func run() error {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return err
	}
	if err := setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// setup adds the Cache kind to mgr's scheme and registers its controller:
// one step, whose outcome is the Available condition and, with it, Ready.
// SetupWithManager watches the Caches and the kinds in Owns.
func setup(mgr ctrl.Manager) error {
	if err := cachev1alpha1.AddToScheme(mgr.GetScheme()); err != nil {
		return err
	}
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

// applyDeployment applies memcached's Deployment (server-side apply, a
// write only on drift) and waits until it is rolled out.
func applyDeployment(ctx context.Context, s *reconciler.Scope[*cachev1alpha1.Cache]) reconciler.Outcome {
	labels := map[string]string{"app.kubernetes.io/instance": s.Object.Name}
	dep := appsv1ac.Deployment(s.Object.Name, s.Object.Namespace).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(ptr.Deref(s.Object.Spec.Replicas, 1)).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("memcached").WithImage("memcached:1.6.38")))))
	return s.ApplyAndWait(ctx, dep, &appsv1.Deployment{})
}
