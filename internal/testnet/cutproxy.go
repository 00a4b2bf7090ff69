package testnet

import (
	"testing"

	"github.com/wsmux/wsmux/internal/resetproxy"
)

// NewCutProxy starts a proxy to target that cuts every connection through
// it each time every more bytes have moved, at most max times (a load
// balancer ending connections mid-transfer); t's cleanup closes it.
func NewCutProxy(t testing.TB, target string, every int64, max int) *resetproxy.Proxy {
	t.Helper()
	p, err := resetproxy.Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	p.CutEvery(every, max)
	t.Cleanup(p.Close)
	return p
}
