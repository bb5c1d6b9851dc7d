package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/reconcilekit/reconcilekit/sharding"

	webappv2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
)

// SelectCache restricts opts, a sharded replica's cache, to the WebApps of
// the ranges member claims and their Deployments and Services
// (sharding.Member.SelectCache), so that memory splits across the
// replicas, not only work. scheme is the manager's.
func SelectCache(opts cache.Options, member *sharding.Member, scheme *runtime.Scheme) (cache.Options, error) {
	// The kinds New lists in Options.Owns.
	return member.SelectCache(opts, scheme, &webappv2.WebApp{}, &appsv1.Deployment{}, &corev1.Service{})
}
