package require

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"testing"
)

type fakeT struct{ failed bool }

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) FailNow()              {}

type myInt int

// TestAssertions checks each assertion both ways: it holds on the first
// input and fails on the second, as testify's does.
func TestAssertions(t *testing.T) {
	x, y := new(int), new(int)
	var nilMap map[string]int
	pathErr := &fs.PathError{Op: "open", Path: "p", Err: fs.ErrNotExist}
	tests := []struct {
		name       string
		pass, fail func(TestingT)
	}{
		{"Equal", func(t TestingT) { Equal(t, []byte("a"), []byte("a")) }, func(t TestingT) { Equal(t, 1, int64(1)) }},
		{"EqualNilBytes", func(t TestingT) { Equal(t, []byte(nil), []byte(nil)) }, func(t TestingT) { Equal(t, []byte{}, []byte(nil)) }},
		{"NotEqual", func(t TestingT) { NotEqual(t, 1, 2) }, func(t TestingT) { NotEqual(t, "a", "a") }},
		{"EqualValues", func(t TestingT) { EqualValues(t, 3, uint64(3)) }, func(t TestingT) { EqualValues(t, 256, uint8(0)) }},
		{"EqualValuesNamed", func(t TestingT) { EqualValues(t, myInt(2), 2) }, func(t TestingT) { EqualValues(t, myInt(2), 3) }},
		{"Same", func(t TestingT) { Same(t, x, x) }, func(t TestingT) { Same(t, x, y) }},
		{"NotSame", func(t TestingT) { NotSame(t, x, y) }, func(t TestingT) { NotSame(t, x, x) }},
		{"IsType", func(t TestingT) { IsType(t, 0, 5) }, func(t TestingT) { IsType(t, 0, "5") }},
		{"Zero", func(t TestingT) { Zero(t, struct{ a int }{}) }, func(t TestingT) { Zero(t, 1) }},
		{"NotZero", func(t TestingT) { NotZero(t, "x") }, func(t TestingT) { NotZero(t, "") }},
		{"True", func(t TestingT) { True(t, true) }, func(t TestingT) { True(t, false) }},
		{"False", func(t TestingT) { False(t, false) }, func(t TestingT) { False(t, true) }},
		{"Nil", func(t TestingT) { Nil(t, nilMap) }, func(t TestingT) { Nil(t, x) }},
		{"NotNil", func(t TestingT) { NotNil(t, x) }, func(t TestingT) { NotNil(t, (*int)(nil)) }},
		{"Empty", func(t TestingT) { Empty(t, []int{}) }, func(t TestingT) { Empty(t, "a") }},
		{"EmptyPointer", func(t TestingT) { Empty(t, new(string)) }, func(t TestingT) { Empty(t, &[]int{1}) }},
		{"NotEmpty", func(t TestingT) { NotEmpty(t, map[int]int{1: 1}) }, func(t TestingT) { NotEmpty(t, 0) }},
		{"Len", func(t TestingT) { Len(t, "abc", 3) }, func(t TestingT) { Len(t, []int{1}, 2) }},
		{"LenOfInt", func(t TestingT) { Len(t, [0]int{}, 0) }, func(t TestingT) { Len(t, 1, 1) }},
		{"ContainsString", func(t TestingT) { Contains(t, "hello", "ell") }, func(t TestingT) { Contains(t, "hello", "z") }},
		{"ContainsSlice", func(t TestingT) { Contains(t, []string{"a", "b"}, "b") }, func(t TestingT) { Contains(t, []string{"a"}, "b") }},
		{"ContainsMapKey", func(t TestingT) { Contains(t, map[string]int{"k": 1}, "k") }, func(t TestingT) { Contains(t, map[string]int{"k": 1}, "v") }},
		{"ContainsWrongKind", func(t TestingT) { Contains(t, "a", "a") }, func(t TestingT) { Contains(t, 5, 5) }},
		{"NotContains", func(t TestingT) { NotContains(t, "abc", "d") }, func(t TestingT) { NotContains(t, "abc", "b") }},
		{"NoError", func(t TestingT) { NoError(t, nil) }, func(t TestingT) { NoError(t, io.EOF) }},
		{"Error", func(t TestingT) { Error(t, io.EOF) }, func(t TestingT) { Error(t, nil) }},
		{"ErrorIs", func(t TestingT) { ErrorIs(t, fmt.Errorf("w: %w", io.EOF), io.EOF) }, func(t TestingT) { ErrorIs(t, io.ErrUnexpectedEOF, io.EOF) }},
		{"ErrorAs", func(t TestingT) { var pe *fs.PathError; ErrorAs(t, fmt.Errorf("w: %w", pathErr), &pe) }, func(t TestingT) { var pe *fs.PathError; ErrorAs(t, io.EOF, &pe) }},
		{"ErrorContains", func(t TestingT) { ErrorContains(t, errors.New("abc"), "b") }, func(t TestingT) { ErrorContains(t, nil, "b") }},
		{"NotPanics", func(t TestingT) { NotPanics(t, func() {}) }, func(t TestingT) { NotPanics(t, func() { panic("x") }) }},
		{"Greater", func(t TestingT) { Greater(t, 2, 1) }, func(t TestingT) { Greater(t, 1, 1) }},
		{"GreaterOrEqual", func(t TestingT) { GreaterOrEqual(t, 1.0, 1.0) }, func(t TestingT) { GreaterOrEqual(t, uint(0), uint(1)) }},
		{"Less", func(t TestingT) { Less(t, "a", "b") }, func(t TestingT) { Less(t, 2, 1) }},
		{"LessOrEqual", func(t TestingT) { LessOrEqual(t, 1, 1) }, func(t TestingT) { LessOrEqual(t, 1, int64(2)) }},
		{"Positive", func(t TestingT) { Positive(t, int64(1)) }, func(t TestingT) { Positive(t, 0.0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ok, bad fakeT
			tt.pass(&ok)
			tt.fail(&bad)
			if ok.failed {
				t.Error("failed on the input it should accept")
			}
			if !bad.failed {
				t.Error("held on the input it should refuse")
			}
		})
	}
}
