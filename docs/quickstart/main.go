// Command cache-operator runs the Cache controller, with the permissions of reconcilekit's docs/reconciler.md:
// +kubebuilder:rbac:groups=cache.example.com,resources=caches,verbs=get;list;watch
// +kubebuilder:rbac:groups=cache.example.com,resources=caches/status,verbs=patch
// +kubebuilder:rbac:groups=cache.example.com,resources=caches/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
package main

import (
	"context"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/reconcilekit/reconcilekit/reconciler"

	cachev1alpha1 "github.com/reconcilekit/reconcilekit/docs/quickstart/api/v1alpha1"
)

func main() {
	ctrl.SetLogger(zap.New())
	mgr, err := newManager(ctrl.GetConfigOrDie())
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		ctrl.Log.Error(err, "cache-operator")
		os.Exit(1)
	}
}

// newManager returns a manager (metrics off) running the Cache controller.
func newManager(cfg *rest.Config) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return nil, err
	}
	if err := cachev1alpha1.AddToScheme(mgr.GetScheme()); err != nil {
		return nil, err
	}
	r, err := reconciler.New(mgr, reconciler.Options[*cachev1alpha1.Cache]{
		Name:  "cache-controller",
		Owns:  []client.Object{&appsv1.Deployment{}},
		Steps: []reconciler.Step[*cachev1alpha1.Cache]{{Name: "deployment", Condition: "Available", Run: applyDeployment}},
	})
	if err != nil {
		return nil, err
	}
	return mgr, r.SetupWithManager(mgr)
}

// applyDeployment applies memcached's Deployment and waits for its rollout.
func applyDeployment(ctx context.Context, s *reconciler.Scope[*cachev1alpha1.Cache]) reconciler.Outcome {
	labels := map[string]string{"app.kubernetes.io/instance": s.Object.Name}
	dep := appsv1ac.Deployment(s.Object.Name, s.Object.Namespace).WithSpec(appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("memcached").WithImage("memcached:1.6.38")))))
	return s.ApplyAndWait(ctx, dep, nil)
}
