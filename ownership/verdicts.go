package ownership

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Apply's shortcut for an object it has already judged: the comparison is
// a function of the desired configuration and the live object alone, so a
// live object still at the resourceVersion Apply last found matching (or
// wrote) and a caller asking for the same configuration, byte for byte,
// of the same owner with the same options, need no comparison. On a
// converged pass that spares decoding the configuration, hashing it and
// converting and comparing the cached object (four fifths of an unchanged
// Apply: BenchmarkApplyUnchanged against BenchmarkApplyUnchangedFirst);
// what is left is encoding the configuration and the cached read.

// verdictsPeriod is how long a verdict is kept without being used: one
// that is not used for between one and two periods is dropped (an object
// deleted, or not reconciled for a while), and the next Apply of its
// object compares again.
const verdictsPeriod = 10 * time.Minute

// fingerprint identifies what a caller asked of Apply: the encoded
// configuration, the owner and the options that change the configuration
// or who may be taken over.
type fingerprint [16]byte

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
	var f fingerprint
	copy(f[:], h.Sum(nil))
	return f
}

// verdict is what an object looked like when Apply last found it matching
// the configuration with this fingerprint.
type verdict struct {
	resourceVersion string
	asked           fingerprint
}

// verdicts holds the last verdict per object UID in two generations: a
// lookup moves a verdict to the current one, and every verdictsPeriod the
// current one becomes the old one and the old one is dropped, so a
// deleted object's verdict does not outlive it for long.
type verdicts struct {
	mu       sync.Mutex
	cur, old map[types.UID]verdict
	rotated  time.Time
}

// matches reports whether obj is still the object judged to match the
// configuration fingerprinted asked.
func (v *verdicts) matches(obj client.Object, asked fingerprint) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rotate()
	uid := obj.GetUID()
	got, ok := v.cur[uid]
	if !ok {
		if got, ok = v.old[uid]; ok {
			delete(v.old, uid)
			v.cur[uid] = got
		}
	}
	return ok && got.asked == asked && got.resourceVersion == obj.GetResourceVersion()
}

// remember records that obj matches the configuration fingerprinted asked.
func (v *verdicts) remember(obj metav1.Object, asked fingerprint) {
	if obj.GetUID() == "" || obj.GetResourceVersion() == "" {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.rotate()
	delete(v.old, obj.GetUID())
	v.cur[obj.GetUID()] = verdict{resourceVersion: obj.GetResourceVersion(), asked: asked}
}

// forget drops obj's verdict.
func (v *verdicts) forget(uid types.UID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.cur, uid)
	delete(v.old, uid)
}

func (v *verdicts) rotate() {
	switch now := time.Now(); {
	case v.cur == nil:
		v.cur, v.old, v.rotated = map[types.UID]verdict{}, map[types.UID]verdict{}, now
	case now.Sub(v.rotated) >= verdictsPeriod:
		v.cur, v.old, v.rotated = map[types.UID]verdict{}, v.cur, now
	}
}

// judgedBefore reads the live object desired names from the cache and
// reports whether it is still the one Apply found matching the
// configuration fingerprinted asked; live is nil when it could not say
// which object desired names without decoding it (an apply configuration
// that does not say its name) or the cache has none.
func (a *Applier) judgedBefore(ctx context.Context, owner client.Object, desired runtime.ApplyConfiguration, asked fingerprint) (live client.Object, same bool, err error) {
	id, ok := desired.(identified)
	if !ok {
		return nil, false, nil
	}
	gv, err := schema.ParseGroupVersion(deref(id.GetAPIVersion()))
	if err != nil || deref(id.GetKind()) == "" || deref(id.GetName()) == "" {
		return nil, false, nil // buildDesired says what is wrong
	}
	gvk := gv.WithKind(deref(id.GetKind()))
	key := client.ObjectKey{Namespace: deref(id.GetNamespace()), Name: deref(id.GetName())}
	if key.Namespace == "" {
		namespaced, err := a.isNamespaced(gvk)
		if err != nil {
			return nil, false, nil // buildDesired says what is wrong
		}
		if namespaced {
			key.Namespace = owner.GetNamespace()
		}
	}
	live, err = a.read(ctx, a.Client, &desiredObject{gvk: gvk, key: key})
	if err != nil || live == nil {
		return nil, false, err
	}
	c := metav1.GetControllerOf(live)
	same = c != nil && c.UID == owner.GetUID() && a.learned().verdicts.matches(live, asked)
	return live, same, nil
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
