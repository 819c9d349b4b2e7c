// Package isnil tells whether a value given as an interface is nil in
// effect: a nil interface, or one holding a nil pointer or func, whose
// methods would panic when called.
package isnil

import "reflect"

// Is reports whether v is nil, or holds a nil pointer or nil func. Nil
// maps, slices and channels are not reported: their methods may well work.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return rv.IsNil()
	}
	return false
}
