// Package leakcheck fails a test, or a test binary, that leaves goroutines
// running: the core module's stand-in for go.uber.org/goleak (the subset
// its tests use, with the same meanings), so that the core requires nothing
// but gobwas/ws and golang.org/x.
//
// Goroutines of the test runner, of os/signal and of the runtime's tracer
// are never leaks. Goroutines that are still ending get a grace period:
// the check looks again, with growing pauses, for up to about two seconds,
// as goleak does, before it reports them.
//
// It is for _test.go files only and imports only the standard library.
package leakcheck

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Option narrows what a check reports.
type Option func(*options)

type options struct {
	ignoreIDs   map[int]bool
	ignoreTop   []string
	ignoreFrame []string
}

// IgnoreTopFunction ignores goroutines whose stack has the function f
// (its full name, as in a stack trace) on top.
func IgnoreTopFunction(f string) Option {
	return func(o *options) { o.ignoreTop = append(o.ignoreTop, f) }
}

// IgnoreAnyFunction ignores goroutines with the function f anywhere on
// their stack.
func IgnoreAnyFunction(f string) Option {
	return func(o *options) { o.ignoreFrame = append(o.ignoreFrame, f) }
}

// IgnoreCurrent ignores the goroutines running when it is called.
func IgnoreCurrent() Option {
	ids := map[int]bool{}
	for _, g := range goroutines() {
		ids[g.id] = true
	}
	return func(o *options) {
		for id := range ids {
			o.ignoreIDs[id] = true
		}
	}
}

// VerifyNone fails t if goroutines other than the ignored ones are still
// running after the grace period.
func VerifyNone(t testing.TB, opts ...Option) {
	t.Helper()
	if err := find(opts); err != nil {
		t.Error(err)
	}
}

// VerifyTestMain runs the tests of m and, if they passed, fails the binary
// when goroutines are left running. Call it from TestMain.
func VerifyTestMain(m *testing.M, opts ...Option) {
	code := m.Run()
	if code == 0 {
		if err := find(opts); err != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func find(opts []Option) error {
	o := options{ignoreIDs: map[int]bool{}}
	for _, opt := range opts {
		opt(&o)
	}
	pause := time.Microsecond
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := leaks(&o)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			fmt.Fprintf(&b, "found %d unexpected goroutine(s):\n", len(left))
			for _, g := range left {
				b.WriteString(g.stack)
				b.WriteString("\n\n")
			}
			return fmt.Errorf("%s", b.String())
		}
		// Waiting for goroutines that are ending: there is no event to wait
		// on, so the check polls the observable itself.
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}

func leaks(o *options) []goroutine {
	var left []goroutine
	self := currentID()
	for _, g := range goroutines() {
		if g.id == self || o.ignoreIDs[g.id] || g.system() || o.ignored(g) {
			continue
		}
		left = append(left, g)
	}
	return left
}

func (o *options) ignored(g goroutine) bool {
	for _, f := range o.ignoreTop {
		if g.first == f {
			return true
		}
	}
	for _, f := range o.ignoreFrame {
		if g.calls(f) {
			return true
		}
	}
	return false
}

type goroutine struct {
	id    int
	first string // the function on top of its stack
	stack string
}

// system reports whether g belongs to the test runner, os/signal or the
// tracer rather than to the code under test.
func (g goroutine) system() bool {
	switch {
	case strings.HasPrefix(g.first, "testing."),
		strings.HasPrefix(g.first, "os/signal."),
		strings.HasPrefix(g.first, "runtime.ReadTrace"),
		strings.HasPrefix(g.first, "runtime/trace."),
		strings.Contains(g.stack, "\ninternal/fuzz."):
		return true
	}
	return false
}

// calls reports whether f is one of the functions on g's stack.
func (g goroutine) calls(f string) bool {
	for _, line := range strings.Split(g.stack, "\n") {
		if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by ") {
			continue
		}
		if i := strings.LastIndexByte(line, '('); i > 0 && line[:i] == f {
			return true
		}
	}
	return false
}

func currentID() int {
	buf := make([]byte, 64)
	n := runtime.Stack(buf, false)
	id, _ := parseHeader(string(buf[:n]))
	return id
}

func goroutines() []goroutine {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var gs []goroutine
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		s := strings.TrimSpace(string(block))
		if s == "" {
			continue
		}
		id, ok := parseHeader(s)
		if !ok {
			continue
		}
		g := goroutine{id: id, stack: s}
		if lines := strings.SplitN(s, "\n", 3); len(lines) > 1 {
			g.first = lines[1]
			if i := strings.LastIndexByte(g.first, '('); i > 0 {
				g.first = g.first[:i]
			}
		}
		gs = append(gs, g)
	}
	return gs
}

// parseHeader reads the id of "goroutine 17 [running]:".
func parseHeader(s string) (int, bool) {
	rest, ok := strings.CutPrefix(s, "goroutine ")
	if !ok {
		return 0, false
	}
	idText, _, ok := strings.Cut(rest, " ")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(idText)
	return id, err == nil
}
