package reconciler

import (
	"fmt"
	"reflect"
)

// checkContract checks, at New, what the reconciler needs of T beyond the
// Object interface: a Status struct field (the only part of T a pass
// writes) and, if that struct has an ObservedGeneration field, an int64 or
// a *int64, which every pass sets to the generation it reconciled. Any
// other type (an int32) would silently never be set.
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
	return nil
}
