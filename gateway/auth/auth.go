// Package auth authenticates wsmux's server commands' callers: bearer
// tokens from a file, compared in constant time, optionally TLS client
// certificates verified against a CA bundle, and optionally bearer tokens
// checked with a TokenReview webhook. It must not import the commands'
// other packages (gateway, tunnel, ops).
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/wsmux/wsmux/controller"
)

// Failure reasons, as logged and as the auth_failures metric's label.
const (
	ReasonMissing    = "missing_credentials"
	ReasonBadToken   = "invalid_token"
	ReasonBadCert    = "invalid_client_certificate"
	ReasonBadRequest = "malformed_authorization"
	// ReasonAmbiguous is a request that carries its credential more than
	// once (answered 400, not 401: no credential was rejected).
	ReasonAmbiguous = "ambiguous_credentials"
	// ReasonRejected is an error of an Authenticator that is not an *Error.
	ReasonRejected = "rejected"
)

// Authenticator says who a request's caller is: the gateway and the tunnel
// server call it for every request and act as the user it returns (its ID
// names the caller in logs and limits). A refusal is an error: an *Error
// names its reason (logged, and the auth_failures metric's label) and its
// status (401, or 400 for ReasonAmbiguous); any other error is refused
// with 401 under ReasonRejected. Credentials is this package's; a program
// that embeds the gateway may bring its own (OIDC, a session cookie, a
// header its own proxy sets), as gateway.Example shows.
type Authenticator interface {
	Authenticate(r *http.Request) (controller.User, error)
}

// Credentials authenticates a request by its TLS client certificate or its
// bearer token (from a token file, or reviewed by the cluster's TokenReview
// API). The zero value rejects everything.
type Credentials struct {
	// tokens are the accepted tokens (replaced atomically on reload).
	tokens atomic.Pointer[tokenSet]
	// clientCAs, when set, accepts TLS client certificates they sign.
	clientCAs *x509.CertPool
	// reviewer, when set, checks bearer tokens the file does not hold.
	reviewer *TokenReviewer
}

// UseTokenReview makes bearer tokens that the token file does not hold go
// to r (set before serving).
func (a *Credentials) UseTokenReview(r *TokenReviewer) { a.reviewer = r }

// tokenSet holds SHA-256 digests of the accepted tokens (comparing
// fixed-size digests in constant time leaks neither a token's bytes nor its
// length) and the user of each.
type tokenSet struct {
	digests [][sha256.Size]byte
	users   []controller.User
}

// New returns Credentials accepting tokens and, when clientCAs is not
// nil, client certificates it verifies.
func New(tokens []string, clientCAs *x509.CertPool) *Credentials {
	ts := make([]Token, len(tokens))
	for i, t := range tokens {
		ts[i] = Token{Token: t}
	}
	return NewWithUsers(ts, clientCAs)
}

// Error is an authentication failure: Reason is one of the Reason
// constants, Detail the message for the caller and the log.
type Error struct {
	Reason string
	Detail string
}

func (e *Error) Error() string {
	if e.Reason == ReasonAmbiguous {
		return "bad request: " + e.Detail
	}
	return "unauthorized: " + e.Detail
}

// StatusCode is the HTTP status of the failure: 400 for an ambiguous
// request, 401 for the others.
func (e *Error) StatusCode() int {
	if e.Reason == ReasonAmbiguous {
		return http.StatusBadRequest
	}
	return http.StatusUnauthorized
}

// BearerProtocolPrefix is Kubernetes' way for browsers, which cannot set
// headers on a WebSocket, to send a bearer token: a subprotocol
// "base64url.bearer.authorization.k8s.io.<unpadded base64url token>".
const BearerProtocolPrefix = "base64url.bearer.authorization.k8s.io."

// BearerProtocols returns the bearer-token subprotocols r offers, in order.
func BearerProtocols(r *http.Request) []string {
	var out []string
	for _, v := range r.Header.Values("Sec-Websocket-Protocol") {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); strings.HasPrefix(p, BearerProtocolPrefix) {
				out = append(out, p)
			}
		}
	}
	return out
}

// CheckUnambiguous returns an *Error (ReasonAmbiguous) when r carries a
// credential more than once: two Authorization headers, one holding
// several comma-separated values (what a proxy that joins repeated headers
// makes of two; a bearer token has no comma), or two bearer-token
// subprotocols. Taking the first (or the last) would let a client decide
// which of its credentials a proxy in front of the server sees and which
// the server checks; such a request is refused, whichever is valid.
func CheckUnambiguous(r *http.Request) error {
	as := r.Header.Values("Authorization")
	switch {
	case len(as) > 1:
		return &Error{Reason: ReasonAmbiguous, Detail: fmt.Sprintf("%d Authorization headers: send exactly one (if you sent one, a proxy on the way added its own)", len(as))}
	case len(as) == 1 && strings.Contains(as[0], ","):
		return &Error{Reason: ReasonAmbiguous, Detail: "the Authorization header holds several comma-separated values: send exactly one credential (a proxy on the way may have joined two headers)"}
	}
	if n := len(BearerProtocols(r)); n > 1 {
		return &Error{Reason: ReasonAmbiguous, Detail: fmt.Sprintf("%d bearer-token subprotocols (%s...): send exactly one", n, BearerProtocolPrefix)}
	}
	return nil
}

// Identify authenticates as Authenticate does and returns the caller's
// User: a token's from the token file, a client certificate's subject
// (CN the name, O the groups), or, for a bearer token the file does not
// hold, what the token review says (UseTokenReview).
func (a *Credentials) Authenticate(r *http.Request) (controller.User, error) {
	if err := CheckUnambiguous(r); err != nil {
		return controller.User{}, err
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && a.clientCAs != nil {
		leaf := r.TLS.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, c := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := leaf.Verify(x509.VerifyOptions{
			Roots:         a.clientCAs,
			Intermediates: inter,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return controller.User{}, &Error{Reason: ReasonBadCert, Detail: "client certificate rejected: " + err.Error()}
		}
		return controller.User{ID: "cert:" + leaf.Subject.CommonName, Name: leaf.Subject.CommonName,
			Groups: append([]string(nil), leaf.Subject.Organization...)}, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return controller.User{}, &Error{Reason: ReasonMissing, Detail: "no bearer token (Authorization header) and no client certificate"}
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return controller.User{}, &Error{Reason: ReasonBadRequest, Detail: "Authorization header is not \"Bearer <token>\""}
	}
	tok = strings.TrimSpace(tok)
	ts := a.tokens.Load()
	n := ts.index(tok)
	if n == 0 && a.reviewer != nil {
		return a.reviewer.Review(r.Context(), tok)
	}
	if n == 0 {
		return controller.User{}, &Error{Reason: ReasonBadToken, Detail: "invalid bearer token"}
	}
	u := ts.users[n-1]
	u.ID = "token#" + strconv.Itoa(n)
	return u, nil
}

// tokenIndex compares tok with every accepted token in constant time (no
// early exit on a match either) and returns the position of the first
// match from 1, or 0.
func (ts *tokenSet) index(tok string) int {
	if ts == nil {
		return 0
	}
	d := sha256.Sum256([]byte(tok))
	idx := 0
	for i := range ts.digests {
		eq := subtle.ConstantTimeCompare(d[:], ts.digests[i][:])
		first := eq & subtle.ConstantTimeEq(int32(idx), 0)
		idx = subtle.ConstantTimeSelect(first, i+1, idx)
	}
	return idx
}

// AsError returns the *Error an Authenticator's refusal holds, or, for an
// error of another kind, one with ReasonRejected and the error's text.
func AsError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	return &Error{Reason: ReasonRejected, Detail: err.Error()}
}

// Reject answers 401 with a plain-text body naming the failure, or 400 for
// an ambiguous request (ReasonAmbiguous).
func Reject(w http.ResponseWriter, err error) {
	if AsError(err).StatusCode() == http.StatusBadRequest {
		http.Error(w, "wsmux: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="wsmux"`)
	http.Error(w, "wsmux: "+err.Error(), http.StatusUnauthorized)
}

// ReadTokens reads a token file: one token per line; blank lines and lines
// starting with # are ignored. At least one token is required.
func ReadTokens(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no token in file", path)
	}
	return out, nil
}

// ReadToken returns the first token of a token file (see ReadTokens).
func ReadToken(path string) (string, error) {
	ts, err := ReadTokens(path)
	if err != nil {
		return "", err
	}
	return ts[0], nil
}

// LoadCertPool reads a PEM bundle of CA certificates.
func LoadCertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		return nil, errors.New(path + ": no PEM certificate found")
	}
	return p, nil
}
