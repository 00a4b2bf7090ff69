package auth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
)

// TestTokenReviewCache: an authenticated token is reviewed once per
// success TTL, a rejected one once per failure TTL, on a fake clock; with
// TTLs of 0 every request is reviewed.
func TestTokenReviewCache(t *testing.T) {
	sent := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sent++
		if tr.Spec.Token == "good" {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "gus", Groups: []string{"g"}}}
		}
		json.NewEncoder(w).Encode(tr)
	}))
	defer srv.Close()
	now := time.Unix(1_000_000, 0)
	r, err := NewTokenReviewer(&rest.Config{Host: srv.URL}, time.Minute, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return now }
	check := func(tok string, wantOK bool, wantSent int) {
		t.Helper()
		u, err := r.Review(context.Background(), tok)
		var ae *Error
		switch {
		case wantOK && (err != nil || u.Name != "gus" || u.ID != "review:gus" || len(u.Groups) != 1):
			t.Fatalf("%s: %+v %v", tok, u, err)
		case !wantOK && (!errors.As(err, &ae) || ae.Reason != ReasonBadToken):
			t.Fatalf("%s: %v, want a rejection", tok, err)
		}
		if sent != wantSent || r.Sent() != wantSent {
			t.Fatalf("%s: %d reviews sent (%d counted), want %d", tok, sent, r.Sent(), wantSent)
		}
	}
	check("good", true, 1)
	check("good", true, 1)
	check("bad", false, 2)
	check("bad", false, 2)
	now = now.Add(11 * time.Second) // past the failure TTL only
	check("good", true, 2)
	check("bad", false, 3)
	now = now.Add(time.Minute)
	check("good", true, 4)

	r0, err := NewTokenReviewer(&rest.Config{Host: srv.URL}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	r = r0
	sent = 0
	check("good", true, 1)
	check("good", true, 2)
}
