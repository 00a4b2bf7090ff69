package sharedstate

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testnet"
)

// stores returns the implementations under test: Memory, and Redis on a
// real redis-server (skipped without one unless CI is set).
func stores(t *testing.T) map[string]Store {
	rs := testnet.StartRedis(t)
	r, err := NewRedis(RedisConfig{URL: rs.URL(), Prefix: "test:" + t.Name() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return map[string]Store{"memory": NewMemory(), "redis": r}
}

// TestStoreContract: both stores give the same answers: a ticket is used
// once, sessions count across replicas up to the limit and stop counting
// when their replica's heartbeat is gone, the dial bucket refuses past its
// burst with the wait, and the resume directory records, refreshes and
// drops owners.
func TestStoreContract(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			d := sha256.Sum256([]byte("ticket"))
			if err := s.UseTicket(ctx, d, time.Now().Add(time.Minute)); err != nil {
				t.Fatalf("first use: %v", err)
			}
			if err := s.UseTicket(ctx, d, time.Now().Add(time.Minute)); !errors.Is(err, ErrTicketUsed) {
				t.Fatalf("second use: %v, want ErrTicketUsed", err)
			}

			for _, r := range []string{"a", "b"} {
				if err := s.Heartbeat(ctx, r, r+":1", 5*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			steps := []struct {
				replica, session string
				held             int // > 0: refused holding that many
			}{{"a", "a/1", 0}, {"b", "b/1", 0}, {"a", "a/2", 0}, {"b", "b/2", 3}}
			for _, st := range steps {
				err := s.AcquireSession(ctx, "alice", st.replica, st.session, 3)
				var ol *OverLimitError
				switch {
				case st.held == 0 && err != nil:
					t.Fatalf("acquire %s: %v", st.session, err)
				case st.held > 0 && (!errors.As(err, &ol) || ol.Held != st.held):
					t.Fatalf("acquire %s: %v, want over the limit holding %d", st.session, err, st.held)
				}
			}
			if err := s.AcquireSession(ctx, "bob", "b", "b/3", 3); err != nil {
				t.Fatalf("another caller: %v", err)
			}
			if err := s.ReleaseSession(ctx, "alice", "a/1"); err != nil {
				t.Fatal(err)
			}
			if err := s.AcquireSession(ctx, "alice", "b", "b/4", 3); err != nil {
				t.Fatalf("after a release: %v", err)
			}
			// Replica a leaves: its session a/2 no longer counts.
			if err := s.Leave(ctx, "a"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReplicaAddr(ctx, "a"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("replica a after leaving: %v", err)
			}
			if addr, err := s.ReplicaAddr(ctx, "b"); err != nil || addr != "b:1" {
				t.Fatalf("replica b: %q, %v", addr, err)
			}
			if err := s.AcquireSession(ctx, "alice", "b", "b/5", 3); err != nil {
				t.Fatalf("with replica a gone: %v", err)
			}

			for i := range 2 {
				if w, err := s.TakeDial(ctx, "alice", 0.5, 2); err != nil || w != 0 {
					t.Fatalf("dial %d: wait %v, %v", i, w, err)
				}
			}
			w, err := s.TakeDial(ctx, "alice", 0.5, 2)
			if err != nil || w <= 0 || w > 2*time.Second {
				t.Fatalf("dial past the burst: wait %v, %v; want (0, 2s]", w, err)
			}

			k1, k2 := sha256.Sum256([]byte("tok1")), sha256.Sum256([]byte("tok2"))
			if _, err := s.ResumeOwner(ctx, k1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown owner: %v", err)
			}
			for _, k := range [][32]byte{k1, k2} {
				if err := s.PutResumeOwner(ctx, k, "b", time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.RefreshResumeOwners(ctx, [][32]byte{k1, k2}, time.Minute); err != nil {
				t.Fatal(err)
			}
			if o, err := s.ResumeOwner(ctx, k1); err != nil || o != "b" {
				t.Fatalf("owner: %q, %v", o, err)
			}
			if err := s.DropResumeOwners(ctx, [][32]byte{k1}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ResumeOwner(ctx, k1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("dropped owner: %v", err)
			}
			if o, _ := s.ResumeOwner(ctx, k2); o != "b" {
				t.Fatalf("the other owner went too: %q", o)
			}
		})
	}
}

// TestRedisDownFailsFast: with the server stopped every call fails within
// about the timeout (no retries, no hang), and works again once it is back.
func TestRedisDownFailsFast(t *testing.T) {
	rs := testnet.StartRedis(t)
	r, err := NewRedis(RedisConfig{URL: rs.URL(), Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	d := sha256.Sum256([]byte("before"))
	if err := r.UseTicket(ctx, d, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	rs.Stop()
	start := time.Now()
	err = r.UseTicket(ctx, sha256.Sum256([]byte("during")), time.Now().Add(time.Minute))
	if err == nil || errors.Is(err, ErrTicketUsed) {
		t.Fatalf("with Redis down: %v, want a connection error", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("the failed call took %v", el)
	}
	rs.Start(t)
	if err := r.UseTicket(ctx, d, time.Now().Add(time.Minute)); !errors.Is(err, ErrTicketUsed) {
		t.Fatalf("after the restart the used ticket: %v, want ErrTicketUsed (append-only file)", err)
	}
}

func TestNewRedisBadURL(t *testing.T) {
	for _, u := range []string{"http://x", "redis//x", "redis://:secret@h:1/x"} {
		_, err := NewRedis(RedisConfig{URL: u})
		if err == nil {
			t.Errorf("%s: no error", u)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: the error shows the password: %v", u, err)
		}
	}
}
