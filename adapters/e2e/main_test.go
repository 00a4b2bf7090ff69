package e2e_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// spdystream's Close leaves a shutdown goroutine that waits out its
		// own close timeout.
		goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown"),
		goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown.func1"),
	)
}
