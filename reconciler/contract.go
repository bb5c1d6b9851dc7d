package reconciler

import (
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkContract checks, at New, what the reconciler needs of T beyond the
// Object interface, and names the field or method that breaks it:
//
//   - a Status struct field, the only part of T a pass writes;
//   - SetConditions stores the conditions in Status, where GetConditions
//     returns them: conditions kept anywhere else, or set through a value
//     receiver, would be computed on every pass and never written;
//   - the Status field serialized as observedGeneration, if there is one,
//     is named ObservedGeneration and is an int64 or a *int64: the
//     reconciler sets the field of that name and those types, and any
//     other would silently never be set.
func checkContract[T Object]() error {
	var zero T
	t := reflect.TypeOf(zero).Elem()
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("reconciler: %v must point to a struct", reflect.TypeOf(zero))
	}
	status, ok := t.FieldByName("Status")
	if !ok || status.Type.Kind() != reflect.Struct {
		return fmt.Errorf("reconciler: %v has no Status struct field: the reconciler writes a pass's result there", t)
	}
	if f, ok := status.Type.FieldByName("ObservedGeneration"); ok && f.Type != reflect.TypeFor[int64]() && f.Type != reflect.TypeFor[*int64]() {
		return fmt.Errorf("reconciler: %v.Status.ObservedGeneration is a %v; it must be an int64 or a *int64 for the reconciler to set it", t, f.Type)
	}
	for i := range status.Type.NumField() {
		f := status.Type.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "observedGeneration" && f.Name != "ObservedGeneration" {
			return fmt.Errorf("reconciler: %v.Status.%s is serialized as observedGeneration but the reconciler sets only a field named ObservedGeneration (an int64 or a *int64): rename it", t, f.Name)
		}
	}
	obj := reflect.New(t).Interface().(T)
	obj.SetConditions([]metav1.Condition{{Type: "ContractCheck", Status: metav1.ConditionTrue, Reason: "ContractCheck"}})
	if got := obj.GetConditions(); len(got) != 1 || got[0].Type != "ContractCheck" {
		return fmt.Errorf("reconciler: %v.GetConditions does not return what SetConditions set (does SetConditions have a pointer receiver?)", t)
	}
	if statusOf(obj).IsZero() {
		return fmt.Errorf("reconciler: %v.SetConditions does not store the conditions in Status: the reconciler writes only the status subresource, so they would never be saved", t)
	}
	return nil
}
