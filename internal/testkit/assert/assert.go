// Package assert is the non-fatal twin of internal/testkit/require, for
// goroutines other than the test's own (where FailNow must not be called):
// each assertion reports a failure with Errorf and returns whether it held.
//
// It is for _test.go files only and imports only the standard library.
package assert

import "fmt"

// TestingT is what the assertions need of *testing.T.
type TestingT interface {
	Errorf(format string, args ...any)
}

// NoError reports whether err is nil, and a test failure when it is not.
func NoError(t TestingT, err error, msgAndArgs ...any) bool {
	if err == nil {
		return true
	}
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	msg := fmt.Sprintf("unexpected error: %v", err)
	if len(msgAndArgs) > 0 {
		msg += "\n\tmessage: " + fmt.Sprint(msgAndArgs...)
	}
	t.Errorf("%s", msg)
	return false
}
