//go:build unix

package sharedstate

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testnet"
)

// TestRedisFrozenFailsWithinTimeout: a server that accepts but does not
// answer (SIGSTOP) makes every call fail after about the timeout, not
// hang; once it answers again the calls succeed.
func TestRedisFrozenFailsWithinTimeout(t *testing.T) {
	rs := testnet.StartRedis(t)
	const timeout = 200 * time.Millisecond
	r, err := NewRedis(RedisConfig{URL: rs.URL(), Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	if err := r.Heartbeat(ctx, "a", "a:1", time.Minute); err != nil {
		t.Fatal(err)
	}
	rs.Pause()
	for _, call := range []struct {
		name string
		fn   func() error
	}{
		{"ticket", func() error { return r.UseTicket(ctx, sha256.Sum256([]byte("t")), time.Now().Add(time.Minute)) }},
		{"session", func() error { return r.AcquireSession(ctx, "c", "a", "a/1", 2) }},
		{"dial", func() error { _, err := r.TakeDial(ctx, "c", 1, 2); return err }},
		{"resume lookup", func() error { _, err := r.ResumeOwner(ctx, sha256.Sum256([]byte("k"))); return err }},
	} {
		start := time.Now()
		err := call.fn()
		el := time.Since(start)
		if err == nil || el > 3*timeout {
			t.Errorf("%s with the server frozen: %v after %v; want an error within about %v", call.name, err, el, timeout)
		}
	}
	rs.Continue()
	if err := r.UseTicket(ctx, sha256.Sum256([]byte("after")), time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("after the server answers again: %v", err)
	}
}
