// Package require is the core module's assertion helper for tests: the
// subset of testify's require API that the core's tests use, with the same
// names and meanings, so that the core module (frame, flow, mux, controller)
// requires nothing but gobwas/ws and golang.org/x. A failed assertion stops
// the test with FailNow.
//
// It is for _test.go files only: no library package may import it
// (scripts/check-layers.sh). It imports only the standard library.
package require

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// TestingT is what the assertions need of *testing.T and *testing.B.
type TestingT interface {
	Errorf(format string, args ...any)
	FailNow()
}

type helper interface{ Helper() }

func fail(t TestingT, msg string, msgAndArgs []any) {
	if h, ok := t.(helper); ok {
		h.Helper()
	}
	if extra := message(msgAndArgs); extra != "" {
		msg += "\n\tmessage: " + extra
	}
	t.Errorf("%s", msg)
	t.FailNow()
}

func message(msgAndArgs []any) string {
	switch len(msgAndArgs) {
	case 0:
		return ""
	case 1:
		if s, ok := msgAndArgs[0].(string); ok {
			return s
		}
		return fmt.Sprintf("%+v", msgAndArgs[0])
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// ObjectsAreEqual reports whether expected and actual are equal: byte
// slices by content, everything else by reflect.DeepEqual.
func ObjectsAreEqual(expected, actual any) bool {
	if expected == nil || actual == nil {
		return expected == actual
	}
	if e, ok := expected.([]byte); ok {
		a, ok := actual.([]byte)
		if !ok {
			return false
		}
		if e == nil || a == nil {
			return e == nil && a == nil
		}
		return bytes.Equal(e, a)
	}
	return reflect.DeepEqual(expected, actual)
}

// objectsAreEqualValues is ObjectsAreEqual after converting one value to
// the other's type where Go allows it (EqualValues).
func objectsAreEqualValues(expected, actual any) bool {
	if ObjectsAreEqual(expected, actual) {
		return true
	}
	if expected == nil || actual == nil {
		return false
	}
	ev, av := reflect.ValueOf(expected), reflect.ValueOf(actual)
	if ev.Type().ConvertibleTo(av.Type()) && ObjectsAreEqual(ev.Convert(av.Type()).Interface(), actual) {
		// A narrowing conversion could make unequal values equal: check back.
		return !av.Type().ConvertibleTo(ev.Type()) || ObjectsAreEqual(expected, av.Convert(ev.Type()).Interface())
	}
	if av.Type().ConvertibleTo(ev.Type()) && ObjectsAreEqual(expected, av.Convert(ev.Type()).Interface()) {
		return !ev.Type().ConvertibleTo(av.Type()) || ObjectsAreEqual(ev.Convert(av.Type()).Interface(), actual)
	}
	return false
}

func show(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case []byte:
		if len(x) > 64 {
			return fmt.Sprintf("[]byte(len %d) %x...", len(x), x[:64])
		}
	}
	return fmt.Sprintf("%#v", v)
}

// Equal asserts ObjectsAreEqual(expected, actual).
func Equal(t TestingT, expected, actual any, msgAndArgs ...any) {
	if !ObjectsAreEqual(expected, actual) {
		fail(t, fmt.Sprintf("not equal:\n\texpected: %s\n\tactual:   %s", show(expected), show(actual)), msgAndArgs)
	}
}

// NotEqual asserts !ObjectsAreEqual(expected, actual).
func NotEqual(t TestingT, expected, actual any, msgAndArgs ...any) {
	if ObjectsAreEqual(expected, actual) {
		fail(t, fmt.Sprintf("should not be %s", show(actual)), msgAndArgs)
	}
}

// EqualValues asserts that expected and actual are equal once converted to
// the same type.
func EqualValues(t TestingT, expected, actual any, msgAndArgs ...any) {
	if !objectsAreEqualValues(expected, actual) {
		fail(t, fmt.Sprintf("not equal values:\n\texpected: %s\n\tactual:   %s", show(expected), show(actual)), msgAndArgs)
	}
}

// Same asserts that expected and actual are pointers to the same object.
func Same(t TestingT, expected, actual any, msgAndArgs ...any) {
	if !samePointers(expected, actual) {
		fail(t, fmt.Sprintf("not the same pointer:\n\texpected: %p %#v\n\tactual:   %p %#v", expected, expected, actual, actual), msgAndArgs)
	}
}

// NotSame asserts that expected and actual are not pointers to the same object.
func NotSame(t TestingT, expected, actual any, msgAndArgs ...any) {
	if samePointers(expected, actual) {
		fail(t, fmt.Sprintf("the same pointer: %p", actual), msgAndArgs)
	}
}

func samePointers(a, b any) bool {
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	if av.Kind() != reflect.Pointer || bv.Kind() != reflect.Pointer || av.Type() != bv.Type() {
		return false
	}
	return av.Pointer() == bv.Pointer()
}

// IsType asserts that object has the type of expectedType.
func IsType(t TestingT, expectedType, object any, msgAndArgs ...any) {
	if reflect.TypeOf(object) != reflect.TypeOf(expectedType) {
		fail(t, fmt.Sprintf("type %T, want %T", object, expectedType), msgAndArgs)
	}
}

func isZero(v any) bool {
	return v == nil || reflect.ValueOf(v).IsZero()
}

// Zero asserts that v is its type's zero value.
func Zero(t TestingT, v any, msgAndArgs ...any) {
	if !isZero(v) {
		fail(t, fmt.Sprintf("should be zero, is %s", show(v)), msgAndArgs)
	}
}

// NotZero asserts that v is not its type's zero value.
func NotZero(t TestingT, v any, msgAndArgs ...any) {
	if isZero(v) {
		fail(t, fmt.Sprintf("should not be zero, is %s", show(v)), msgAndArgs)
	}
}

// True asserts that v is true.
func True(t TestingT, v bool, msgAndArgs ...any) {
	if !v {
		fail(t, "should be true", msgAndArgs)
	}
}

// False asserts that v is false.
func False(t TestingT, v bool, msgAndArgs ...any) {
	if v {
		fail(t, "should be false", msgAndArgs)
	}
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Chan, reflect.Func, reflect.Interface, reflect.Map, reflect.Pointer, reflect.Slice, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// Nil asserts that v is nil (a nil interface or a nil pointer, slice, map,
// channel or function in one).
func Nil(t TestingT, v any, msgAndArgs ...any) {
	if !isNil(v) {
		fail(t, fmt.Sprintf("should be nil, is %s", show(v)), msgAndArgs)
	}
}

// NotNil asserts that v is not nil.
func NotNil(t TestingT, v any, msgAndArgs ...any) {
	if isNil(v) {
		fail(t, "should not be nil", msgAndArgs)
	}
}

// isEmpty follows testify: nil, a zero value, an empty collection, or a
// pointer to an empty value.
func isEmpty(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Chan, reflect.Map, reflect.Slice, reflect.Array, reflect.String:
		return rv.Len() == 0
	case reflect.Pointer:
		if rv.IsNil() {
			return true
		}
		return isEmpty(rv.Elem().Interface())
	}
	return rv.IsZero()
}

// Empty asserts that v is empty (see isEmpty).
func Empty(t TestingT, v any, msgAndArgs ...any) {
	if !isEmpty(v) {
		fail(t, fmt.Sprintf("should be empty, is %s", show(v)), msgAndArgs)
	}
}

// NotEmpty asserts that v is not empty.
func NotEmpty(t TestingT, v any, msgAndArgs ...any) {
	if isEmpty(v) {
		fail(t, fmt.Sprintf("should not be empty, is %s", show(v)), msgAndArgs)
	}
}

// Len asserts that the string, slice, array, map or channel v has n elements.
func Len(t TestingT, v any, n int, msgAndArgs ...any) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Chan, reflect.Map, reflect.Slice, reflect.Array, reflect.String:
		if rv.Len() != n {
			fail(t, fmt.Sprintf("should have %d item(s), has %d: %s", n, rv.Len(), show(v)), msgAndArgs)
		}
	default:
		fail(t, fmt.Sprintf("cannot take the length of %T", v), msgAndArgs)
	}
}

// contains reports whether s holds elem: a substring of a string, an
// element of a slice or array, a key of a map. ok is false when s is none
// of these.
func contains(s, elem any) (found, ok bool) {
	sv := reflect.ValueOf(s)
	switch sv.Kind() {
	case reflect.String:
		e, isStr := elem.(string)
		if !isStr {
			return false, false
		}
		return strings.Contains(sv.String(), e), true
	case reflect.Map:
		for _, k := range sv.MapKeys() {
			if ObjectsAreEqual(k.Interface(), elem) {
				return true, true
			}
		}
		return false, true
	case reflect.Slice, reflect.Array:
		for i := range sv.Len() {
			if ObjectsAreEqual(sv.Index(i).Interface(), elem) {
				return true, true
			}
		}
		return false, true
	}
	return false, false
}

// Contains asserts that s holds elem (see contains).
func Contains(t TestingT, s, elem any, msgAndArgs ...any) {
	found, ok := contains(s, elem)
	if !ok {
		fail(t, fmt.Sprintf("%T cannot contain %T", s, elem), msgAndArgs)
	} else if !found {
		fail(t, fmt.Sprintf("%s does not contain %s", show(s), show(elem)), msgAndArgs)
	}
}

// NotContains asserts that s does not hold elem.
func NotContains(t TestingT, s, elem any, msgAndArgs ...any) {
	found, ok := contains(s, elem)
	if !ok {
		fail(t, fmt.Sprintf("%T cannot contain %T", s, elem), msgAndArgs)
	} else if found {
		fail(t, fmt.Sprintf("%s should not contain %s", show(s), show(elem)), msgAndArgs)
	}
}

// NoError asserts that err is nil.
func NoError(t TestingT, err error, msgAndArgs ...any) {
	if err != nil {
		fail(t, fmt.Sprintf("unexpected error: %v", err), msgAndArgs)
	}
}

// Error asserts that err is not nil.
func Error(t TestingT, err error, msgAndArgs ...any) {
	if err == nil {
		fail(t, "an error is expected, got nil", msgAndArgs)
	}
}

// ErrorIs asserts errors.Is(err, target).
func ErrorIs(t TestingT, err, target error, msgAndArgs ...any) {
	if !errors.Is(err, target) {
		fail(t, fmt.Sprintf("error chain does not hold the target:\n\terror:  %v\n\ttarget: %v", err, target), msgAndArgs)
	}
}

// ErrorAs asserts errors.As(err, target).
func ErrorAs(t TestingT, err error, target any, msgAndArgs ...any) {
	if !errors.As(err, target) {
		fail(t, fmt.Sprintf("error chain holds no %s: %v", reflect.TypeOf(target).Elem(), err), msgAndArgs)
	}
}

// ErrorContains asserts that err is not nil and its text holds substr.
func ErrorContains(t TestingT, err error, substr string, msgAndArgs ...any) {
	if err == nil {
		fail(t, fmt.Sprintf("an error containing %q is expected, got nil", substr), msgAndArgs)
	} else if !strings.Contains(err.Error(), substr) {
		fail(t, fmt.Sprintf("error %q does not contain %q", err.Error(), substr), msgAndArgs)
	}
}

// NotPanics asserts that f returns without panicking.
func NotPanics(t TestingT, f func(), msgAndArgs ...any) {
	var (
		panicked  = true
		recovered any
	)
	func() {
		defer func() { recovered = recover() }()
		f()
		panicked = false
	}()
	if panicked {
		fail(t, fmt.Sprintf("panicked: %v", recovered), msgAndArgs)
	}
}
