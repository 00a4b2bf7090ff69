package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/wsmux/wsmux/controller"
)

// ReasonReviewFailed is a bearer token that could not be checked: the
// TokenReview endpoint did not answer, or answered with an error.
const ReasonReviewFailed = "token_review_failed"

// reviewTimeout bounds one TokenReview request.
const reviewTimeout = 10 * time.Second

// maxReviewCache bounds the cached reviews.
const maxReviewCache = 4096

// TokenReviewer checks bearer tokens with a TokenReview webhook, as
// kube-apiserver's --authentication-token-webhook-config-file does: it POSTs
// an authentication.k8s.io/v1 TokenReview to the kubeconfig's server URL,
// as is (a webhook; for the cluster's own TokenReview API, the URL ends in
// /apis/authentication.k8s.io/v1/tokenreviews and the credentials may
// create tokenreviews), with the kubeconfig's credentials. Answers are
// cached by the token's digest: an authenticated user for SuccessTTL, a
// rejection for FailureTTL; a failed review is not cached. Requests for a
// token whose review is under way wait for it; one that gives up does not
// stop the review.
type TokenReviewer struct {
	url        string
	client     *http.Client
	successTTL time.Duration
	failureTTL time.Duration
	now        func() time.Time

	mu       sync.Mutex
	cache    map[[sha256.Size]byte]review
	inflight map[[sha256.Size]byte]*flight // reviews under way, by token digest
	sent     int                           // reviews sent (not answered from the cache)
}

// flight is one review under way; the requests for the same token that
// arrive meanwhile wait for its answer instead of sending their own (as
// Kubernetes' cached token authenticator does), so a burst of connections
// with a new token costs the endpoint one review.
type flight struct {
	done chan struct{}
	user controller.User
	rej  *Error
	err  error // no answer: the review failed
}

type review struct {
	user  controller.User
	err   *Error // the rejection, nil when authenticated
	until time.Time
}

// NewTokenReviewer returns a TokenReviewer for the endpoint and credentials
// of cfg (typically from a kubeconfig file).
func NewTokenReviewer(cfg *rest.Config, successTTL, failureTTL time.Duration) (*TokenReviewer, error) {
	if cfg == nil || cfg.Host == "" {
		return nil, fmt.Errorf("token review: no server URL")
	}
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err)
	}
	u := cfg.Host
	if !strings.Contains(u, "://") {
		u = "https://" + u
	}
	return &TokenReviewer{url: u, client: c, successTTL: successTTL, failureTTL: failureTTL, now: time.Now,
		cache: map[[sha256.Size]byte]review{}, inflight: map[[sha256.Size]byte]*flight{}}, nil
}

// Sent returns how many reviews went to the endpoint (cache misses).
func (t *TokenReviewer) Sent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sent
}

// Review returns the user the endpoint says token belongs to, or an *Error:
// ReasonBadToken when it rejected the token, ReasonReviewFailed when it
// could not be asked.
func (t *TokenReviewer) Review(ctx context.Context, token string) (controller.User, error) {
	key := sha256.Sum256([]byte(token))
	t.mu.Lock()
	if e, ok := t.cache[key]; ok && t.now().Before(e.until) {
		t.mu.Unlock()
		if e.err != nil {
			return controller.User{}, e.err
		}
		return e.user, nil
	}
	f, ok := t.inflight[key]
	if !ok {
		// The review belongs to every request that waits for it, not to
		// this one: it runs on its own, bounded by reviewTimeout.
		f = &flight{done: make(chan struct{})}
		t.inflight[key] = f
		t.sent++
		go t.send(context.WithoutCancel(ctx), key, token, f)
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		return f.result()
	case <-ctx.Done():
		return controller.User{}, reviewFailed(ctx.Err())
	}
}

// send runs the review of f and caches its answer.
func (t *TokenReviewer) send(ctx context.Context, key [sha256.Size]byte, token string, f *flight) {
	f.user, f.rej, f.err = t.ask(ctx, token)
	t.mu.Lock()
	delete(t.inflight, key)
	if f.err == nil {
		e := review{user: f.user, err: f.rej, until: t.now().Add(t.successTTL)}
		if f.rej != nil {
			e.until = t.now().Add(t.failureTTL)
		}
		if len(t.cache) >= maxReviewCache {
			t.evict()
		}
		t.cache[key] = e
	}
	t.mu.Unlock()
	close(f.done)
}

func (f *flight) result() (controller.User, error) {
	switch {
	case f.err != nil:
		return controller.User{}, reviewFailed(f.err)
	case f.rej != nil:
		return controller.User{}, f.rej
	}
	return f.user, nil
}

func reviewFailed(err error) *Error {
	return &Error{Reason: ReasonReviewFailed, Detail: "the token could not be checked (TokenReview: " + err.Error() + "): retry later; if it persists, the gateway's token review endpoint is down"}
}

// evict drops expired entries, and arbitrary ones if none expired (t.mu
// held).
func (t *TokenReviewer) evict() {
	now := t.now()
	for k, e := range t.cache {
		if !now.Before(e.until) {
			delete(t.cache, k)
		}
	}
	for k := range t.cache {
		if len(t.cache) < maxReviewCache {
			break
		}
		delete(t.cache, k)
	}
}

// ask sends one TokenReview. It returns the user, or the rejection, or an
// error when there is no answer to trust.
func (t *TokenReviewer) ask(ctx context.Context, token string) (controller.User, *Error, error) {
	body, err := json.Marshal(authnv1.TokenReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"},
		Spec:     authnv1.TokenReviewSpec{Token: token},
	})
	if err != nil {
		return controller.User{}, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return controller.User{}, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return controller.User{}, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return controller.User{}, nil, err
	}
	if resp.StatusCode/100 != 2 {
		return controller.User{}, nil, fmt.Errorf("%s answered %s: %s", t.url, resp.Status, clip(strings.TrimSpace(string(b)), 200))
	}
	var tr authnv1.TokenReview
	if err := json.Unmarshal(b, &tr); err != nil {
		return controller.User{}, nil, fmt.Errorf("%s answered something else than a TokenReview: %v", t.url, err)
	}
	st := tr.Status
	if !st.Authenticated {
		why := "invalid bearer token (rejected by the token review)"
		if st.Error != "" {
			why += ": " + clip(st.Error, 200)
		}
		return controller.User{}, &Error{Reason: ReasonBadToken, Detail: why}, nil
	}
	if st.User.Username == "" {
		return controller.User{}, nil, fmt.Errorf("%s authenticated the token without a user name", t.url)
	}
	return controller.User{ID: "review:" + st.User.Username, Name: st.User.Username, UID: st.User.UID,
		Groups: append([]string(nil), st.User.Groups...)}, nil, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
