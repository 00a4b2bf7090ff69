package ticket

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/sharedstate"
	"github.com/wsmux/wsmux/internal/testnet"
)

// downTickets is a fleet's shared state that does not answer.
type downTickets struct{}

func (downTickets) UseTicket(context.Context, [sha256.Size]byte, time.Time) error {
	return errors.New("dial tcp 10.0.0.9:6379: connect: connection refused")
}

// TestVerifierShared: two verifiers (two replicas) sharing one store
// accept a ticket once between them; MaxOutstanding does not apply to
// the shared memory; a store that does not answer refuses every ticket
// (fail closed) with 503, Retry-After and a body that does not show the
// store's address, counted as ticket_store_unavailable.
func TestVerifierShared(t *testing.T) {
	clk := newClock()
	store := sharedstate.NewMemory()
	store.Now = clk.Now
	a := &Verifier{Now: clk.Now, Shared: store, MaxOutstanding: 1}
	b := &Verifier{Now: clk.Now, Shared: store, MaxOutstanding: 1}
	for _, v := range []*Verifier{a, b} {
		v.SetKeys([][]byte{key(1)})
	}
	target := controller.Target{Namespace: "default", Pod: "web-0", Subresource: "exec"}
	tk := mint(t, key(1), claims(t, clk.Now(), "web-0"))
	if _, err := a.Verify(tk, target); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(tk, target); reasonOf(err) != controller.ReasonReplayed {
		t.Fatalf("the other replica: %v, want replayed", err)
	}
	if _, err := a.Verify(mint(t, key(1), claims(t, clk.Now(), "web-0")), target); err != nil {
		t.Fatalf("a second ticket past MaxOutstanding 1: %v (the shared store has no such bound)", err)
	}

	down := &Verifier{Now: clk.Now, Shared: downTickets{}}
	down.SetKeys([][]byte{key(1)})
	m := ops.NewMetrics()
	served := 0
	h, err := NewHandler(Config{Verifier: down, Next: http.NotFoundHandler(), Metrics: m, Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
		ServeAs: func(http.ResponseWriter, *http.Request, controller.User) { served++ }})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/api/v1/namespaces/default/pods/web-0/exec", nil)
	r.Header.Set("Authorization", "Bearer "+mint(t, key(1), claims(t, clk.Now(), "web-0")))
	h.ServeHTTP(rec, r)
	if served != 0 || rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
		!strings.Contains(rec.Body.String(), "cannot check tickets") || strings.Contains(rec.Body.String(), "10.0.0.9") {
		t.Fatalf("store down: served %d, %d %q (Retry-After %q)", served, rec.Code, rec.Body.String(), rec.Header().Get("Retry-After"))
	}
	if ops.Value(m.AuthFailures.WithLabelValues(ReasonUnavailable)) != 1 {
		t.Fatal("not counted as ticket_store_unavailable")
	}
}
