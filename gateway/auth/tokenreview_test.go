package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"

	"github.com/wsmux/wsmux/controller"
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

// heldEndpoint is a TokenReview endpoint in memory whose answers wait for
// release; it counts the requests it got.
type heldEndpoint struct {
	got     chan struct{} // one value per request received
	release chan struct{}
}

func (h *heldEndpoint) RoundTrip(r *http.Request) (*http.Response, error) {
	var tr authnv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
		return nil, err
	}
	h.got <- struct{}{}
	select {
	case <-h.release:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "gus"}}
	b, _ := json.Marshal(tr)
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(b)), Request: r}, nil
}

// TestTokenReviewCoalesces: requests for a token whose review is under way
// wait for it instead of sending their own; one that gives up while
// waiting returns at once, and when the request that started the review
// gives up, the review goes on for the others.
func TestTokenReviewCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &heldEndpoint{got: make(chan struct{}, 16), release: make(chan struct{})}
		r, err := NewTokenReviewer(&rest.Config{Host: "https://review.invalid"}, time.Minute, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r.client = &http.Client{Transport: h}
		type answer struct {
			u   controller.User
			err error
		}
		review := func(ctx context.Context, tok string) <-chan answer {
			ch := make(chan answer, 1)
			go func() {
				u, err := r.Review(ctx, tok)
				ch <- answer{u, err}
			}()
			return ch
		}
		wantFailed := func(a answer) {
			t.Helper()
			var ae *Error
			if !errors.As(a.err, &ae) || ae.Reason != ReasonReviewFailed {
				t.Fatalf("got %+v %v, want %s", a.u, a.err, ReasonReviewFailed)
			}
		}

		// Eight at once: one review; a ninth gives up while it waits.
		var answers []<-chan answer
		for range 8 {
			answers = append(answers, review(context.Background(), "good"))
		}
		synctest.Wait()
		quitter, quit := context.WithCancel(context.Background())
		gaveUp := review(quitter, "good") // after the review went out: it waits
		synctest.Wait()
		if len(h.got) != 1 || r.Sent() != 1 {
			t.Fatalf("%d requests (%d counted) for 9 concurrent reviews, want 1", len(h.got), r.Sent())
		}
		quit()
		wantFailed(<-gaveUp)
		close(h.release)
		for _, ch := range answers {
			if a := <-ch; a.err != nil || a.u.Name != "gus" {
				t.Fatalf("got %+v %v, want gus", a.u, a.err)
			}
		}
		if r.Sent() != 1 {
			t.Fatalf("%d reviews sent, want 1", r.Sent())
		}

		// The request that started the review gives up: the review goes
		// on, and the one waiting gets its answer.
		h.release = make(chan struct{})
		starter, cancel := context.WithCancel(context.Background())
		first := review(starter, "other")
		synctest.Wait()
		second := review(context.Background(), "other")
		synctest.Wait()
		cancel()
		wantFailed(<-first)
		synctest.Wait()
		if r.Sent() != 2 || len(h.got) != 2 {
			t.Fatalf("%d reviews sent (%d received), want 2", r.Sent(), len(h.got))
		}
		close(h.release)
		if a := <-second; a.err != nil || a.u.Name != "gus" {
			t.Fatalf("got %+v %v, want gus", a.u, a.err)
		}
	})
}

// TestTokenReviewAmbiguous: with a token review behind the token file, two
// Authorization headers are refused as ambiguous before either token goes
// to the review (before, the first went, and a good one authenticated).
func TestTokenReviewAmbiguous(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		_ = json.NewDecoder(r.Body).Decode(&tr)
		tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "gus"}}
		json.NewEncoder(w).Encode(tr)
	}))
	defer srv.Close()
	rv, err := NewTokenReviewer(&rest.Config{Host: srv.URL}, time.Minute, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	a := New([]string{"file-token"}, nil)
	a.UseTokenReview(rv)
	for _, hs := range [][]string{{"Bearer reviewed", "Bearer file-token"}, {"Bearer file-token", "Bearer reviewed"}, {"Bearer reviewed", "Bearer reviewed"}} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header["Authorization"] = hs
		u, err := a.Authenticate(r)
		var ae *Error
		if !errors.As(err, &ae) || ae.Reason != ReasonAmbiguous {
			t.Errorf("%q: %+v %v, want %s", hs, u, err, ReasonAmbiguous)
		}
	}
	if rv.Sent() != 0 {
		t.Errorf("%d reviews sent for ambiguous requests", rv.Sent())
	}
}
