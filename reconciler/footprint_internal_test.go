package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestCachesWholeCluster judges cache options the way cache.New defaults
// them: ByObject[kind] first, then DefaultNamespaces, then Default*.
func TestCachesWholeCluster(t *testing.T) {
	secret := corev1.SchemeGroupVersion.WithKind("Secret")
	managed := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "op"})
	byName := fields.OneTermEqualSelector("metadata.name", "x")
	secretMeta := &metav1.PartialObjectMetadata{}
	secretMeta.SetGroupVersionKind(secret)
	for _, tc := range []struct {
		name  string
		opts  cache.Options
		whole bool
	}{
		{"no options", cache.Options{}, true},
		{"another kind bounded", cache.Options{ByObject: map[client.Object]cache.ByObject{&appsv1.Deployment{}: {Label: managed}}}, true},
		{"ByObject label", cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: managed}}}, false},
		{"ByObject field", cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Field: byName}}}, false},
		{"ByObject keyed metadata-only", cache.Options{ByObject: map[client.Object]cache.ByObject{secretMeta: {Label: managed}}}, false},
		{"ByObject namespaces", cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Namespaces: map[string]cache.Config{"ops": {}}}}}, false},
		{"ByObject label Everything", cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.Everything()}}}, true},
		{"ByObject Everything overrides the default selector", cache.Options{
			DefaultLabelSelector: managed,
			ByObject:             map[client.Object]cache.ByObject{&corev1.Secret{}: {Label: labels.Everything()}},
		}, true},
		{"ByObject all namespaces", cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}}}}, true},
		{"ByObject all namespaces but one", cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{cache.AllNamespaces: {}, "ops": {LabelSelector: managed}},
		}}}, true},
		{"ByObject all namespaces with a label", cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Namespaces: map[string]cache.Config{cache.AllNamespaces: {LabelSelector: managed}},
		}}}, false},
		{"ByObject all namespaces, the kind's label", cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Label: managed, Namespaces: map[string]cache.Config{cache.AllNamespaces: {}},
		}}}, false},
		{"ByObject empty namespaces overrides DefaultNamespaces", cache.Options{
			DefaultNamespaces: map[string]cache.Config{"ops": {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {Namespaces: map[string]cache.Config{}}},
		}, true},
		{"ByObject nil namespaces takes DefaultNamespaces", cache.Options{
			DefaultNamespaces: map[string]cache.Config{"ops": {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Secret{}: {Transform: cache.TransformStripManagedFields()}},
		}, false},
		{"DefaultNamespaces", cache.Options{DefaultNamespaces: map[string]cache.Config{"ops": {}, "apps": {}}}, false},
		{"DefaultNamespaces all", cache.Options{DefaultNamespaces: map[string]cache.Config{cache.AllNamespaces: {}}}, true},
		{"DefaultNamespaces all with a label", cache.Options{DefaultNamespaces: map[string]cache.Config{cache.AllNamespaces: {LabelSelector: managed}}}, false},
		{"DefaultNamespaces all, default label", cache.Options{
			DefaultNamespaces: map[string]cache.Config{cache.AllNamespaces: {}}, DefaultLabelSelector: managed,
		}, false},
		{"DefaultLabelSelector", cache.Options{DefaultLabelSelector: managed}, false},
		{"DefaultFieldSelector", cache.Options{DefaultFieldSelector: byName}, false},
		{"DefaultFieldSelector Everything", cache.Options{DefaultFieldSelector: fields.Everything()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.whole, cachesWholeCluster(tc.opts, clientgoscheme.Scheme, secret))
		})
	}
}
