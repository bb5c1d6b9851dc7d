package reconciler

import (
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// internKind interns the strings that repeat across objects in the spec
// and status of the kinds operators most often own (the server's
// defaults, such as a container's terminationMessagePath, the images, the
// condition types and reasons), and the conditions of an object that
// reports them as conditions.Getter does (the reconciler's own kind).
func (t *interner) internKind(obj any) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		o.Spec.Strategy.Type = appsv1.DeploymentStrategyType(t.of(string(o.Spec.Strategy.Type)))
		t.podTemplate(&o.Spec.Template)
		o.Spec.Template.Labels = sameMap(o.Spec.Template.Labels, o.Labels)
		for i := range o.Status.Conditions {
			c := &o.Status.Conditions[i]
			c.Type = appsv1.DeploymentConditionType(t.of(string(c.Type)))
			c.Status = corev1.ConditionStatus(t.of(string(c.Status)))
			c.Reason = t.of(c.Reason) // not the message, mostly the object's own
		}
	case *appsv1.StatefulSet:
		t.podTemplate(&o.Spec.Template)
	case *appsv1.DaemonSet:
		t.podTemplate(&o.Spec.Template)
	case *appsv1.ReplicaSet:
		t.podTemplate(&o.Spec.Template)
	case *batchv1.Job:
		t.podTemplate(&o.Spec.Template)
	case *corev1.Service:
		t.serviceSpec(&o.Spec)
	case interface{ GetConditions() []metav1.Condition }:
		conds := o.GetConditions()
		for i := range conds {
			c := &conds[i]
			c.Type, c.Reason = t.of(c.Type), t.of(c.Reason)
			c.Status = metav1.ConditionStatus(t.of(string(c.Status)))
		}
	}
}

func (t *interner) podTemplate(p *corev1.PodTemplateSpec) {
	t.objectMeta(&p.ObjectMeta)
	s := &p.Spec
	s.RestartPolicy = corev1.RestartPolicy(t.of(string(s.RestartPolicy)))
	s.DNSPolicy = corev1.DNSPolicy(t.of(string(s.DNSPolicy)))
	s.SchedulerName, s.ServiceAccountName = t.of(s.SchedulerName), t.of(s.ServiceAccountName)
	s.NodeSelector = t.stringMap(s.NodeSelector)
	if s.SecurityContext != nil && s.SecurityContext.SeccompProfile != nil {
		sp := s.SecurityContext.SeccompProfile
		sp.Type = corev1.SeccompProfileType(t.of(string(sp.Type)))
	}
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			c := &cs[i]
			c.Name, c.Image = t.of(c.Name), t.of(c.Image)
			c.ImagePullPolicy = corev1.PullPolicy(t.of(string(c.ImagePullPolicy)))
			c.TerminationMessagePath = t.of(c.TerminationMessagePath)
			c.TerminationMessagePolicy = corev1.TerminationMessagePolicy(t.of(string(c.TerminationMessagePolicy)))
			c.Resources.Limits = t.resources(c.Resources.Limits)
			c.Resources.Requests = t.resources(c.Resources.Requests)
			for j := range c.Ports {
				c.Ports[j].Name = t.of(c.Ports[j].Name)
				c.Ports[j].Protocol = corev1.Protocol(t.of(string(c.Ports[j].Protocol)))
			}
		}
	}
}

func (t *interner) serviceSpec(s *corev1.ServiceSpec) {
	s.Selector = t.stringMap(s.Selector)
	s.Type = corev1.ServiceType(t.of(string(s.Type)))
	s.SessionAffinity = corev1.ServiceAffinity(t.of(string(s.SessionAffinity)))
	if s.IPFamilyPolicy != nil {
		*s.IPFamilyPolicy = corev1.IPFamilyPolicy(t.of(string(*s.IPFamilyPolicy)))
	}
	if s.InternalTrafficPolicy != nil {
		*s.InternalTrafficPolicy = corev1.ServiceInternalTrafficPolicy(t.of(string(*s.InternalTrafficPolicy)))
	}
	for i := range s.IPFamilies {
		s.IPFamilies[i] = corev1.IPFamily(t.of(string(s.IPFamilies[i])))
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		p.Name, p.TargetPort.StrVal = t.of(p.Name), t.of(p.TargetPort.StrVal)
		p.Protocol = corev1.Protocol(t.of(string(p.Protocol)))
	}
}

// resources returns the canonical copy of l: the first map with the same
// content (each quantity as it prints, and its format), which every later
// equal one is replaced by. Cached objects are read-only, so objects may
// share it; a container's limits and requests are among the largest maps
// a cached workload holds, and most workloads of an operator set the same.
func (t *interner) resources(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 || len(l) > 8 {
		return l
	}
	var names [8]corev1.ResourceName
	n := 0
	for name := range l {
		names[n] = name
		n++
	}
	slices.Sort(names[:n])
	var buf [256]byte
	key := buf[:0]
	for _, name := range names[:n] {
		q := l[name]
		key = append(key, name...)
		key = append(key, '=')
		key = append(key, q.String()...)
		key = append(key, '/')
		key = append(key, q.Format...)
		key = append(key, ';')
	}
	return canonical(t, &t.lists, string(key), func() corev1.ResourceList { return l })
}

// sameMap returns other when it holds what m does: an object whose pod
// template is labelled as the object itself (the usual way) keeps one map.
func sameMap(m, other map[string]string) map[string]string {
	if len(m) > 0 && maps.Equal(m, other) {
		return other
	}
	return m
}
