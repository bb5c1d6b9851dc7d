package reconciler

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reconcilekit/reconcilekit/conditions"
	"github.com/reconcilekit/reconcilekit/internal/fastpath"
)

// maxStatusAttempts bounds the conflict retries of one status write; after
// that the pass fails and controller-runtime retries it with backoff.
const maxStatusAttempts = 5

var conditionsType = reflect.TypeOf([]metav1.Condition(nil))

// statusOf returns the addressable Status struct of obj, or an invalid
// Value when obj has none.
func statusOf(obj client.Object) reflect.Value {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return reflect.Value{}
	}
	s := v.Elem().FieldByName("Status")
	if !s.IsValid() || s.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return s
}

// setObservedGeneration stamps status.observedGeneration when the type has
// an ObservedGeneration field of type int64 or *int64 in its Status struct.
func setObservedGeneration(obj client.Object) {
	s := statusOf(obj)
	if !s.IsValid() {
		return
	}
	f := s.FieldByName("ObservedGeneration")
	if !f.IsValid() || !f.CanSet() {
		return
	}
	switch {
	case f.Kind() == reflect.Int64:
		f.SetInt(obj.GetGeneration())
	case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Int64:
		g := reflect.New(f.Type().Elem())
		g.Elem().SetInt(obj.GetGeneration())
		f.Set(g)
	}
}

// statusChanged reports whether obj's status differs from orig's.
func statusChanged(orig, obj client.Object) bool {
	a, b := statusOf(orig), statusOf(obj)
	if !a.IsValid() || !b.IsValid() {
		return false
	}
	return !equality.Semantic.DeepEqual(a.Interface(), b.Interface())
}

// reapply copies onto fresh the status changes between orig and want.
func reapply[T Object](orig, want, fresh T) {
	o, w, f := statusOf(orig), statusOf(want), statusOf(fresh)
	for i := range w.NumField() {
		if w.Type().Field(i).Type == conditionsType || !f.Field(i).CanSet() {
			continue
		}
		if !equality.Semantic.DeepEqual(o.Field(i).Interface(), w.Field(i).Interface()) {
			f.Field(i).Set(w.Field(i))
		}
	}
	conds := fresh.GetConditions()
	for _, c := range want.GetConditions() {
		before := meta.FindStatusCondition(orig.GetConditions(), c.Type)
		if before == nil || !equality.Semantic.DeepEqual(*before, c) {
			if f := meta.FindStatusCondition(conds, c.Type); f != nil && f.Status != c.Status {
				// A flip relative to the fresh copy happens now, not when
				// it happened relative to the stale one.
				c.LastTransitionTime = metav1.Now()
			}
			// SetStatusCondition keeps fresh's lastTransitionTime when the
			// status is the same: a pass that started from a stale copy
			// must not move it (nor write at all, when fresh already says
			// what this pass computed).
			meta.SetStatusCondition(&conds, c)
		}
	}
	for _, c := range orig.GetConditions() {
		if meta.FindStatusCondition(want.GetConditions(), c.Type) == nil {
			meta.RemoveStatusCondition(&conds, c.Type)
		}
	}
	conditions.Sort(conds)
	fresh.SetConditions(conds)
}

// changedOutsideStatus returns the path of a field outside status (and
// TypeMeta) where obj differs from orig, for example "spec.replicas" or
// "metadata.labels", or "" when only status changed.
func changedOutsideStatus(orig, obj client.Object) string {
	a, b := reflect.ValueOf(orig).Elem(), reflect.ValueOf(obj).Elem()
	if a.Kind() != reflect.Struct {
		return ""
	}
	for i := range a.NumField() {
		f := a.Type().Field(i)
		if !serialised(f) || f.Name == "Status" || f.Name == "TypeMeta" {
			continue
		}
		if path := firstDifference(a.Field(i), b.Field(i), jsonName(f), 1); path != "" {
			return path
		}
	}
	return ""
}

// firstDifference descends depth more struct levels to name the field that
// differs.
func firstDifference(a, b reflect.Value, path string, depth int) string {
	if equality.Semantic.DeepEqual(a.Interface(), b.Interface()) {
		return ""
	}
	if depth == 0 || a.Kind() != reflect.Struct {
		return path
	}
	for i := range a.NumField() {
		f := a.Type().Field(i)
		if !serialised(f) {
			continue
		}
		name := jsonName(f)
		if f.Anonymous {
			name = ""
		}
		sub := path
		if name != "" {
			sub += "." + name
		}
		if p := firstDifference(a.Field(i), b.Field(i), sub, depth-1); p != "" {
			return p
		}
	}
	return path
}

// serialised reports whether f is part of the object's JSON, the only
// fields a write could carry.
func serialised(f reflect.StructField) bool {
	return f.IsExported() && f.Tag.Get("json") != "-"
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "" || name == "-" {
		return f.Name
	}
	return name
}

// copyOutsideStatus copies from's serialised fields, except status, into to.
func copyOutsideStatus(from, to client.Object) {
	a, b := reflect.ValueOf(from.DeepCopyObject()).Elem(), reflect.ValueOf(to).Elem()
	for i := range a.NumField() {
		if f := a.Type().Field(i); serialised(f) && f.Name != "Status" && b.Field(i).CanSet() {
			b.Field(i).Set(a.Field(i))
		}
	}
}

// statusPatch is the status part of what client.MergeFrom(base) with
// MergeFromWithOptimisticLock sends: a JSON merge patch of the status,
// with base's resourceVersion as the precondition. The status subresource
// ignores every other field, so only the two statuses are encoded and
// diffed: MergeFrom deep-copies both whole objects and encodes and diffs
// their metadata (managedFields, annotations) and spec too, on every
// status write, a cost that grows with the object while this one grows
// with the status alone (BenchmarkStatusPatchData against
// BenchmarkMergeFromData, on a Widget whose status is most of it).
//
// Each status is encoded by encoding/json under its Status field's own
// tag, as in the whole object, and diffed by the json-patch package
// MergeFrom uses, so the status in the patch is MergeFrom's: every field
// as the API encodes it (a time, a quantity or an int-or-string as its
// JSON string or number, an inline or promoted field under its own name,
// a ,string field as a string), a list or raw JSON array replaced whole,
// a key an object lost as null, and a status that omitzero leaves out as
// null. TestStatusPatchMatchesMergeFrom checks it against MergeFrom on
// every kind of client-go's scheme that has a status.
type statusPatch struct{ base client.Object }

// statusPatchFrom is the status write's patch from base: statusPatch, or
// with that fast path switched off (fastpath.StatusPatch, for the bench)
// the upstream one it stands for, MergeFrom's with the optimistic lock.
func statusPatchFrom(base client.Object) client.Patch {
	if fastpath.Off(fastpath.StatusPatch) {
		return client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	}
	return statusPatch{base: base}
}

func (p statusPatch) Type() types.PatchType { return types.MergePatchType }

// Data is {"metadata":{"resourceVersion":rv},"status":patch}, under the
// status field's JSON name, where patch is the JSON merge patch from
// base's status to obj's (null when omitzero leaves obj's out). When the
// two encode the same (statusChanged compares them semantically: a time
// that moved by less than a second differs, and encodes the same), patch
// is {}: a write that changes nothing but still fails on a newer
// resourceVersion, as before.
func (p statusPatch) Data(obj client.Object) ([]byte, error) {
	key := client.ObjectKeyFromObject(obj)
	rv := p.base.GetResourceVersion()
	if rv == "" {
		return nil, fmt.Errorf("status patch of %s: the object it starts from has no resourceVersion", key)
	}
	before, err := statusJSON(p.base)
	if err != nil {
		return nil, fmt.Errorf("status patch of %s: encoding the status it starts from: %w", key, err)
	}
	after, err := statusJSON(obj)
	if err != nil {
		return nil, fmt.Errorf("status patch of %s: encoding the status: %w", key, err)
	}
	diff, err := jsonpatch.CreateMergePatch(before, after)
	if err != nil {
		return nil, fmt.Errorf("status patch of %s: %w", key, err)
	}
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(diff, &patch); err != nil {
		return nil, fmt.Errorf("status patch of %s: %w", key, err)
	}
	if len(patch) == 0 {
		patch = map[string]json.RawMessage{jsonName(statusField(obj)): json.RawMessage(`{}`)}
	}
	if patch["metadata"], err = json.Marshal(map[string]string{"resourceVersion": rv}); err != nil {
		return nil, fmt.Errorf("status patch of %s: %w", key, err)
	}
	return json.Marshal(patch)
}

// statusJSON is obj's JSON with nothing but its status: encoding/json
// encodes the Status struct under the Status field's own tag, so the
// result is {"status":{...}} as in obj's whole JSON, or {} when the tag's
// omitzero leaves a zero status out there.
func statusJSON(obj client.Object) ([]byte, error) {
	s := statusOf(obj)
	if !s.IsValid() {
		return nil, fmt.Errorf("%T has no Status struct", obj)
	}
	f := statusField(obj)
	only := reflect.New(reflect.StructOf([]reflect.StructField{{Name: f.Name, Type: f.Type, Tag: f.Tag}}))
	only.Elem().Field(0).Set(s)
	return json.Marshal(only.Interface())
}

// statusField is the Status field of obj's struct type.
func statusField(obj client.Object) reflect.StructField {
	f, _ := reflect.TypeOf(obj).Elem().FieldByName("Status")
	return f
}
