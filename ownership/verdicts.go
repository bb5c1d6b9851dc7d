package ownership

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"reflect"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply's shortcut for an object it has already judged: the comparison is
// a function of the desired configuration and the live object alone, so a
// live object still at the resourceVersion Apply last found matching (or
// wrote), or changed since in its status alone, and a caller asking for
// the same configuration, byte for byte, of the same owner with the same
// options, need no comparison. That spares decoding the configuration,
// hashing it and converting and comparing the cached object, most of an
// Apply that writes nothing (BenchmarkApplyUnchanged and
// BenchmarkApplyAfterStatusUpdate against BenchmarkApplyCompared); what is
// left is encoding the configuration and the cached read.

// verdictsPeriod is how long a verdict is kept without being used: one
// that is not used for between one and two periods is dropped (an object
// deleted, or not reconciled for a while), and the next Apply of its
// object compares again.
const verdictsPeriod = 10 * time.Minute

// fingerprint identifies what a caller asked of Apply: the encoded
// configuration, the owner and the options that change the configuration
// or who may be taken over. 64 bits: a collision would have to happen
// between two requests for one object.
type fingerprint uint64

func fingerprintOf(encoded []byte, owner client.Object, o options) fingerprint {
	h := sha256.New()
	h.Write(encoded)
	h.Write([]byte{0})
	h.Write([]byte(owner.GetUID()))
	for _, p := range o.ignore {
		h.Write([]byte{0, 'i'})
		h.Write([]byte(p))
	}
	keys := make([]string, 0, len(o.labels))
	for k := range o.labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.Write([]byte{0, 'l'})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(o.labels[k]))
	}
	if o.adopt {
		h.Write([]byte{0, 'a'})
	}
	return fingerprint(binary.LittleEndian.Uint64(h.Sum(nil)))
}

// verdict is what an object looked like when Apply last found it matching
// the configuration with this fingerprint.
type verdict struct {
	resourceVersion uint64 // hashed (short)
	asked           fingerprint
	// generation and meta (metaOf) stand for the resourceVersion across
	// writes of status alone, for an object whose generation follows its
	// spec (generationTracksSpec). That is asked of the object judged
	// later, not of the one remembered: the answer to a create shows no
	// status.observedGeneration until the object's controller writes its
	// first status, the write that would otherwise cost a comparison.
	generation int64
	meta       uint64
}

// generationTracksSpec reports whether obj says, by reporting
// status.observedGeneration, that it follows the API convention kstatus
// relies on: metadata.generation changes with every change outside
// metadata and status (a custom resource with a status subresource, a
// Deployment, StatefulSet, DaemonSet, ReplicaSet or PodDisruptionBudget;
// the kind must be one generationFollowsSpec allows too). A status update then leaves generation and
// metadata alone, and the verdict stands: a Deployment's rollout writes its
// status several times, and each would otherwise cost a comparison.
func generationTracksSpec(obj client.Object) bool {
	if obj.GetGeneration() <= 0 {
		return false
	}
	if u, ok := obj.(runtime.Unstructured); ok {
		g, found, err := unstructured.NestedInt64(u.UnstructuredContent(), "status", "observedGeneration")
		return err == nil && found && g > 0
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	s := v.Elem().FieldByName("Status")
	if !s.IsValid() || s.Kind() != reflect.Struct {
		return false
	}
	g := s.FieldByName("ObservedGeneration")
	switch {
	case !g.IsValid():
		return false
	case g.Kind() == reflect.Int64:
		return g.Int() > 0
	case g.Kind() == reflect.Pointer && !g.IsNil() && g.Elem().Kind() == reflect.Int64:
		return g.Elem().Int() > 0
	}
	return false
}

// generationFollowsSpec reports whether the API server bumps the generation
// of every object of kind gk on each change of its spec, which the
// generation shortcut needs on top of the object's word
// (generationTracksSpec): reporting status.observedGeneration is not
// enough. A HorizontalPodAutoscaler reports it, and on a cluster without
// the HPA generation feature its spec changes leave the generation alone,
// so another writer's edit of it was taken for one of its status. The
// kinds of the API server's own groups are allowed by name (apps'
// workloads and the PodDisruptionBudget, whose registries bump it); any
// other group is a custom resource's, whose generation the API server
// bumps on every change outside metadata and status.
func generationFollowsSpec(gk schema.GroupKind) bool {
	switch gk {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}, schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"}, schema.GroupKind{Group: "apps", Kind: "ReplicaSet"},
		schema.GroupKind{Group: "policy", Kind: "PodDisruptionBudget"}:
		return true
	}
	return !clientgoscheme.Scheme.IsGroupRegistered(gk.Group)
}

// seed seeds the hashes verdicts keep: they live in one process.
var seed = maphash.MakeSeed()

// controllerAnnotation reports whether key is an annotation a built-in
// controller writes on the objects it manages whenever they roll out: the
// Deployment controller records each new revision
// (deployment.kubernetes.io/revision) on the Deployment after its create
// and after every change of its pod template, with or just before its
// status. metaOf leaves it out, so that write keeps the verdict, as the
// status writes around it do; a configuration never sets it (remember
// keeps no generation for one that does).
func controllerAnnotation(key string) bool {
	return key == "deployment.kubernetes.io/revision"
}

// metaOf hashes the metadata a configuration may set and a status update
// leaves alone: labels, annotations (but controllerAnnotation's), owner
// references and finalizers (the first two order-free, as maps are).
func metaOf(obj client.Object) uint64 {
	var sum uint64
	var h maphash.Hash
	entries := func(tag byte, m map[string]string) {
		for k, v := range m {
			if tag == 'a' && controllerAnnotation(k) {
				continue
			}
			h.SetSeed(seed)
			h.WriteByte(tag)
			h.WriteString(k)
			h.WriteByte(0)
			h.WriteString(v)
			sum += h.Sum64()
		}
	}
	entries('l', obj.GetLabels())
	entries('a', obj.GetAnnotations())
	h.SetSeed(seed)
	for _, r := range obj.GetOwnerReferences() {
		h.WriteString(r.APIVersion)
		h.WriteByte(0)
		h.WriteString(r.Kind)
		h.WriteByte(0)
		h.WriteString(r.Name)
		h.WriteByte(0)
		h.WriteString(string(r.UID))
		h.WriteByte(0)
		if r.Controller != nil && *r.Controller {
			h.WriteByte('c')
		}
		if r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
			h.WriteByte('b')
		}
	}
	for _, f := range obj.GetFinalizers() {
		h.WriteByte('f')
		h.WriteString(f)
	}
	return sum ^ h.Sum64()
}

// verdicts holds the last verdict per object UID in two generations: a
// lookup moves a verdict to the current one, and every verdictsPeriod the
// current one becomes the old one and the old one is dropped, so a
// deleted object's verdict does not outlive it for long.
type verdicts struct {
	mu       sync.Mutex
	cur, old map[uint64]verdict // by hashed (short) UID
	rotated  time.Time
}

// matches reports whether obj is still the object judged to match the
// configuration fingerprinted asked.
func (v *verdicts) matches(obj client.Object, asked fingerprint) bool {
	uid := short(string(obj.GetUID()))
	v.mu.Lock()
	v.rotate()
	got, ok := v.cur[uid]
	if !ok {
		if got, ok = v.old[uid]; ok {
			delete(v.old, uid)
			v.cur[uid] = got
		}
	}
	v.mu.Unlock()
	if !ok || got.asked != asked {
		return false
	}
	return got.resourceVersion == short(obj.GetResourceVersion()) ||
		got.generation == obj.GetGeneration() && generationTracksSpec(obj) && got.meta == metaOf(obj)
}

// remember records that obj, of kind gk, matches the configuration
// fingerprinted asked; byVersion says the verdict may stand on obj's
// resourceVersion alone (the configuration sets an annotation metaOf
// leaves out), and so it does for a kind outside generationFollowsSpec.
func (v *verdicts) remember(obj client.Object, gk schema.GroupKind, asked fingerprint, byVersion bool) {
	if obj.GetUID() == "" || obj.GetResourceVersion() == "" {
		return
	}
	got := verdict{resourceVersion: short(obj.GetResourceVersion()), asked: asked,
		generation: obj.GetGeneration(), meta: metaOf(obj)}
	if byVersion || !generationFollowsSpec(gk) {
		got.generation = -1
	}
	uid := short(string(obj.GetUID()))
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rotate()
	delete(v.old, uid)
	v.cur[uid] = got
}

// forget drops obj's verdict.
func (v *verdicts) forget(obj types.UID) {
	uid := short(string(obj))
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.cur, uid)
	delete(v.old, uid)
}

// short hashes a UID or a resourceVersion to 64 bits, which is what
// verdicts keep of them: some 50 bytes a verdict in all.
func short(s string) uint64 { return maphash.String(seed, s) }

func (v *verdicts) rotate() {
	switch now := time.Now(); {
	case v.cur == nil:
		v.cur, v.old, v.rotated = map[uint64]verdict{}, map[uint64]verdict{}, now
	case now.Sub(v.rotated) >= verdictsPeriod:
		v.cur, v.old, v.rotated = map[uint64]verdict{}, v.cur, now
	}
}

// judgedBefore reads the live object desired names from the cache and
// reports whether it is still the one Apply found matching the
// configuration fingerprinted asked. read says whether it read the cache:
// not when it could not say which object desired names without decoding
// it (an apply configuration that does not say its name); live is nil when
// it did not, or the cache has none (which Apply need not ask again).
func (a *Applier) judgedBefore(ctx context.Context, owner client.Object, desired runtime.ApplyConfiguration, asked fingerprint) (live client.Object, read, same bool, err error) {
	d, ok := a.ownedKey(owner, desired)
	if !ok {
		return nil, false, false, nil
	}
	if live, err = a.read(ctx, a.Client, d); err != nil {
		return nil, false, false, fmt.Errorf("apply %s %s: reading live object: %w", d.gvk.Kind, d.key, err)
	}
	if live == nil {
		return nil, true, false, nil
	}
	c := metav1.GetControllerOf(live)
	same = c != nil && c.UID == owner.GetUID() && a.learned().verdicts.matches(live, asked)
	return live, true, same, nil
}

// ownedKey returns the kind and key of the object desired names, as its
// apply configuration says them, false for one buildDesired would refuse
// (it says why): no name, or a namespace an object owner controls cannot be
// in.
func (a *Applier) ownedKey(owner client.Object, desired runtime.ApplyConfiguration) (*desiredObject, bool) {
	id, ok := desired.(identified)
	if !ok {
		return nil, false
	}
	gv, err := schema.ParseGroupVersion(deref(id.GetAPIVersion()))
	if err != nil || deref(id.GetKind()) == "" || deref(id.GetName()) == "" {
		return nil, false
	}
	d := &desiredObject{gvk: gv.WithKind(deref(id.GetKind())),
		key: client.ObjectKey{Namespace: deref(id.GetNamespace()), Name: deref(id.GetName())}}
	namespaced, err := a.isNamespaced(d.gvk)
	switch {
	case err != nil,
		!namespaced && (d.key.Namespace != "" || owner.GetNamespace() != ""),
		namespaced && (owner.GetNamespace() == "" || d.key.Namespace != "" && d.key.Namespace != owner.GetNamespace()):
		return nil, false
	case namespaced:
		d.key.Namespace = owner.GetNamespace()
	}
	return d, true
}

// identified is what generated apply configurations say of themselves.
type identified interface {
	GetAPIVersion() *string
	GetKind() *string
	GetNamespace() *string
	GetName() *string
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
