package v1

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/conversion"

	v2 "github.com/reconcilekit/reconcilekit/examples/webapp/api/v2"
)

// ResourcesAnnotation keeps, on a WebApp read as v1, the v2 spec.resources
// that v1 cannot express (limits that differ from requests, a limit or a
// request without the other), as JSON. Converting that v1 object back to v2
// restores them, unless spec.resources was changed through v1 meanwhile:
// then the v1 value wins. The key is reserved: the conversion writes and
// removes it.
const ResourcesAnnotation = "apps.example.com/v2-resources"

var _ conversion.Convertible = &WebApp{}

// ConvertTo converts this v1 WebApp to the hub version, v2: dbRef becomes
// database.serviceName, resources (request and limit in one) become equal
// requests and limits, unless ResourcesAnnotation holds the v2 resources this
// object was converted from.
func (src *WebApp) ConvertTo(hub conversion.Hub) error {
	dst, ok := hub.(*v2.WebApp)
	if !ok {
		return fmt.Errorf("converting a v1 WebApp to %T: not the hub", hub)
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	saved, hasSaved := dst.Annotations[ResourcesAnnotation]
	delete(dst.Annotations, ResourcesAnnotation)
	if len(dst.Annotations) == 0 {
		dst.Annotations = nil
	}

	dst.Spec = v2.WebAppSpec{
		Image:     src.Spec.Image,
		Replicas:  copyInt32(src.Spec.Replicas),
		Database:  databaseToV2(src.Spec.DBRef),
		Resources: resourcesToV2(src.Spec.Resources),
	}
	if hasSaved {
		var r v2.ResourceRequirements
		// A value that does not parse (edited by hand) is dropped: the v1
		// fields then say everything.
		if err := json.Unmarshal([]byte(saved), &r); err == nil &&
			equality.Semantic.DeepEqual(resourcesFromV2(&r), src.Spec.Resources) {
			dst.Spec.Resources = &r
		}
	}
	dst.Status = v2.WebAppStatus{
		Conditions:         copyConditions(src.Status.Conditions),
		Ready:              copyBool(src.Status.Ready),
		Replicas:           copyInt32(src.Status.Replicas),
		ReadyReplicas:      copyInt32(src.Status.ReadyReplicas),
		Message:            copyString(src.Status.Message),
		Selector:           copyString(src.Status.Selector),
		ObservedGeneration: copyInt64(src.Status.ObservedGeneration),
	}
	return nil
}

// ConvertFrom converts the hub version, v2, to this v1 WebApp. When
// spec.resources cannot be said in v1 (converting the v1 form back would not
// give the same v2 value), the v1 form carries the requests and
// ResourcesAnnotation the whole v2 value.
func (dst *WebApp) ConvertFrom(hub conversion.Hub) error {
	src, ok := hub.(*v2.WebApp)
	if !ok {
		return fmt.Errorf("converting %T to a v1 WebApp: not the hub", hub)
	}
	src.ObjectMeta.DeepCopyInto(&dst.ObjectMeta)
	delete(dst.Annotations, ResourcesAnnotation)

	dst.Spec = WebAppSpec{
		Image:     src.Spec.Image,
		Replicas:  copyInt32(src.Spec.Replicas),
		DBRef:     databaseFromV2(src.Spec.Database),
		Resources: resourcesFromV2(src.Spec.Resources),
	}
	if !equality.Semantic.DeepEqual(resourcesToV2(dst.Spec.Resources), src.Spec.Resources) {
		b, err := json.Marshal(src.Spec.Resources)
		if err != nil {
			return fmt.Errorf("converting WebApp %s/%s to v1: keeping spec.resources: %w", src.Namespace, src.Name, err)
		}
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations[ResourcesAnnotation] = string(b)
	}
	if len(dst.Annotations) == 0 {
		dst.Annotations = nil
	}
	dst.Status = WebAppStatus{
		Conditions:         copyConditions(src.Status.Conditions),
		Ready:              copyBool(src.Status.Ready),
		Replicas:           copyInt32(src.Status.Replicas),
		ReadyReplicas:      copyInt32(src.Status.ReadyReplicas),
		Message:            copyString(src.Status.Message),
		Selector:           copyString(src.Status.Selector),
		ObservedGeneration: copyInt64(src.Status.ObservedGeneration),
	}
	return nil
}

// resourcesToV2 is v1's meaning of spec.resources in v2: the same amounts as
// requests and as limits.
func resourcesToV2(r *ContainerResources) *v2.ResourceRequirements {
	if r == nil {
		return nil
	}
	amounts := &v2.ContainerResources{}
	if r.CPU != nil {
		amounts.CPU = new(r.CPU.DeepCopy())
	}
	if r.Memory != nil {
		amounts.Memory = new(r.Memory.DeepCopy())
	}
	return &v2.ResourceRequirements{Requests: amounts, Limits: amounts.DeepCopy()}
}

// resourcesFromV2 is the closest v1 form of v2's spec.resources: the
// requests (nil when v2 has no resources).
func resourcesFromV2(r *v2.ResourceRequirements) *ContainerResources {
	if r == nil {
		return nil
	}
	out := &ContainerResources{}
	if r.Requests == nil {
		return out
	}
	if r.Requests.CPU != nil {
		out.CPU = new(r.Requests.CPU.DeepCopy())
	}
	if r.Requests.Memory != nil {
		out.Memory = new(r.Requests.Memory.DeepCopy())
	}
	return out
}

// databaseToV2 is v1's spec.dbRef as v2's spec.database.
func databaseToV2(dbRef *string) *v2.DatabaseReference {
	if dbRef == nil {
		return nil
	}
	return &v2.DatabaseReference{ServiceName: *dbRef}
}

// databaseFromV2 is v2's spec.database as v1's spec.dbRef.
func databaseFromV2(db *v2.DatabaseReference) *string {
	if db == nil {
		return nil
	}
	return new(db.ServiceName)
}

func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	return new(*p)
}

func copyInt64(p *int64) *int64 {
	if p == nil {
		return nil
	}
	return new(*p)
}

func copyString(p *string) *string {
	if p == nil {
		return nil
	}
	return new(*p)
}

func copyBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	return new(*p)
}

func copyConditions(c []metav1.Condition) []metav1.Condition {
	if c == nil {
		return nil
	}
	out := make([]metav1.Condition, len(c))
	for i := range c {
		c[i].DeepCopyInto(&out[i])
	}
	return out
}
