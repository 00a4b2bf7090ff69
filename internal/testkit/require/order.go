package require

import (
	"fmt"
	"reflect"
)

// compare orders two values of the same ordered kind: -1, 0 or +1; ok is
// false when they are not of one integer, float or string kind and type.
func compare(a, b any) (c int, ok bool) {
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	if !av.IsValid() || !bv.IsValid() || av.Type() != bv.Type() {
		return 0, false
	}
	switch av.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return cmp3(av.Int() < bv.Int(), av.Int() > bv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return cmp3(av.Uint() < bv.Uint(), av.Uint() > bv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return cmp3(av.Float() < bv.Float(), av.Float() > bv.Float()), true
	case reflect.String:
		return cmp3(av.String() < bv.String(), av.String() > bv.String()), true
	}
	return 0, false
}

func cmp3(less, greater bool) int {
	switch {
	case less:
		return -1
	case greater:
		return 1
	}
	return 0
}

func order(t TestingT, e1, e2 any, want func(int) bool, rel string, msgAndArgs []any) {
	c, ok := compare(e1, e2)
	if !ok {
		fail(t, fmt.Sprintf("cannot order %T and %T", e1, e2), msgAndArgs)
		return
	}
	if !want(c) {
		fail(t, fmt.Sprintf("%v is not %s %v", e1, rel, e2), msgAndArgs)
	}
}

// Greater asserts e1 > e2 (same type, ordered kind).
func Greater(t TestingT, e1, e2 any, msgAndArgs ...any) {
	order(t, e1, e2, func(c int) bool { return c > 0 }, "greater than", msgAndArgs)
}

// GreaterOrEqual asserts e1 >= e2.
func GreaterOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) {
	order(t, e1, e2, func(c int) bool { return c >= 0 }, "greater than or equal to", msgAndArgs)
}

// Less asserts e1 < e2.
func Less(t TestingT, e1, e2 any, msgAndArgs ...any) {
	order(t, e1, e2, func(c int) bool { return c < 0 }, "less than", msgAndArgs)
}

// LessOrEqual asserts e1 <= e2.
func LessOrEqual(t TestingT, e1, e2 any, msgAndArgs ...any) {
	order(t, e1, e2, func(c int) bool { return c <= 0 }, "less than or equal to", msgAndArgs)
}

// Positive asserts e > 0.
func Positive(t TestingT, e any, msgAndArgs ...any) {
	zero := reflect.Zero(reflect.TypeOf(e)).Interface()
	order(t, e, zero, func(c int) bool { return c > 0 }, "greater than", msgAndArgs)
}
