package httpstream_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// spdystream's Close leaves a shutdown goroutine that waits out its
		// own close timeout, and a CreateStream pending when its connection
		// died waits the full 30 s: both are SPDY's, not ours.
		goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown"),
		goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown.func1"),
		goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Stream).WaitTimeout"),
	)
}
