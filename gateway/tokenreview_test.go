package gateway

import (
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
)

// tokenWebhook is a TokenReview webhook: review-alice is alice (uid u-9,
// group dev), review-broken makes it fail, every other token is rejected.
type tokenWebhook struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // the token of every review, in order
	auth []string // the Authorization header of every review
}

func startTokenWebhook(t *testing.T) *tokenWebhook {
	w := &tokenWebhook{}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var tr authnv1.TokenReview
		if r.Method != http.MethodPost || r.URL.Path != "/review" || json.NewDecoder(r.Body).Decode(&tr) != nil ||
			tr.Kind != "TokenReview" || tr.APIVersion != "authentication.k8s.io/v1" {
			http.Error(rw, "not a TokenReview", http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.seen = append(w.seen, tr.Spec.Token)
		w.auth = append(w.auth, r.Header.Get("Authorization"))
		w.mu.Unlock()
		switch tr.Spec.Token {
		case "review-broken":
			http.Error(rw, "webhook down", http.StatusInternalServerError)
			return
		case "review-alice":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true,
				User: authnv1.UserInfo{Username: "alice", UID: "u-9", Groups: []string{"dev"}}}
		default:
			tr.Status = authnv1.TokenReviewStatus{Error: "token expired"}
		}
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(tr)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *tokenWebhook) reviews() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}

// TestTokenReviewWebhook: bearer tokens the token file does not hold are
// checked with a TokenReview webhook (with the webhook kubeconfig's own
// credentials): an authenticated token acts upstream as the user the
// webhook named (impersonation), and is not reviewed again while cached; a
// rejected token gets 401 with the webhook's reason, cached too; a review
// that fails gets 401 saying the token could not be checked, and is asked
// again next time; the token file's tokens never reach the webhook.
func TestTokenReviewWebhook(t *testing.T) {
	g, _ := startImpersonating(t)
	wh := startTokenWebhook(t)
	r, err := auth.NewTokenReviewer(&rest.Config{Host: wh.srv.URL + "/review", BearerToken: "webhook-credential",
		TLSClientConfig: rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: wh.srv.Certificate().Raw})}},
		time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g.g.cfg.Auth.(*auth.Credentials).UseTokenReview(r)

	for range 2 {
		if out, err := execIn(t, g, "review-alice", "a"); err != nil || out != "hi a" {
			t.Fatalf("reviewed alice in a: %q %v", out, err)
		}
	}
	imps := g.cl.Impersonations()
	if last := imps[len(imps)-1]; last.User != "alice" || last.UID != "u-9" || strings.Join(last.Groups, ",") != "dev" {
		t.Errorf("the cluster saw %+v, want alice, u-9, dev", last)
	}
	if _, err := execIn(t, g, "review-alice", "b"); !isForbidden(err) {
		t.Errorf("reviewed alice in b: %v, want the cluster's 403", err)
	}
	for range 2 {
		_, err := execIn(t, g, "review-mallory", "a")
		var ae *kubeclient.AuthError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || !strings.Contains(err.Error(), "token expired") {
			t.Fatalf("rejected token: %v, want 401 with the webhook's reason", err)
		}
	}
	for range 2 {
		_, err := execIn(t, g, "review-broken", "a")
		var ae *kubeclient.AuthError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || !strings.Contains(err.Error(), "could not be checked") {
			t.Fatalf("failed review: %v, want 401 saying the token could not be checked", err)
		}
	}
	if out, err := execIn(t, g, "alice-token", "a"); err != nil || out != "hi a" {
		t.Fatalf("token file's alice: %q %v", out, err)
	}
	if got := strings.Join(wh.reviews(), " "); got != "review-alice review-mallory review-broken review-broken" {
		t.Errorf("reviews sent: %s", got)
	}
	for _, a := range wh.auth {
		if a != "Bearer webhook-credential" {
			t.Errorf("a review carried Authorization %q, want the webhook kubeconfig's", a)
		}
	}
	if v := ops.Value(g.g.Metrics().AuthFailures.WithLabelValues(auth.ReasonReviewFailed)); v != 2 {
		t.Errorf("auth failures token_review_failed %v, want 2", v)
	}
}
