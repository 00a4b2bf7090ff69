// Package auth authenticates wsmux's server commands' callers: bearer
// tokens from a file, compared in constant time, and optionally TLS client
// certificates verified against a CA bundle.
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
)

// Failure reasons, as logged and as the auth_failures metric's label.
const (
	ReasonMissing    = "missing_credentials"
	ReasonBadToken   = "invalid_token"
	ReasonBadCert    = "invalid_client_certificate"
	ReasonBadRequest = "malformed_authorization"
)

// Authenticator checks a request's credentials. The zero value rejects
// everything.
type Authenticator struct {
	// digests are SHA-256 digests of the accepted tokens: comparing
	// fixed-size digests in constant time leaks neither a token's bytes nor
	// its length.
	digests [][sha256.Size]byte
	// clientCAs, when set, accepts TLS client certificates they sign.
	clientCAs *x509.CertPool
}

// New returns an Authenticator accepting tokens and, when clientCAs is not
// nil, client certificates it verifies.
func New(tokens []string, clientCAs *x509.CertPool) *Authenticator {
	a := &Authenticator{clientCAs: clientCAs}
	for _, t := range tokens {
		a.digests = append(a.digests, sha256.Sum256([]byte(t)))
	}
	return a
}

// Error is an authentication failure: Reason is one of the Reason
// constants, Detail the message for the caller and the log.
type Error struct {
	Reason string
	Detail string
}

func (e *Error) Error() string { return "unauthorized: " + e.Detail }

// Authenticate returns who the caller is ("token#N", N the token's
// position among the accepted tokens from 1, or "cert:<subject CN>"),
// or an *Error. A verified client certificate is enough; otherwise an
// "Authorization: Bearer <token>" header must carry an accepted token. A
// client certificate that does not verify is rejected even if a token is
// present, so a misconfigured client learns why.
func (a *Authenticator) Authenticate(r *http.Request) (string, error) {
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
			return "", &Error{Reason: ReasonBadCert, Detail: "client certificate rejected: " + err.Error()}
		}
		return "cert:" + leaf.Subject.CommonName, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", &Error{Reason: ReasonMissing, Detail: "no bearer token (Authorization header) and no client certificate"}
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", &Error{Reason: ReasonBadRequest, Detail: "Authorization header is not \"Bearer <token>\""}
	}
	n := a.tokenIndex(strings.TrimSpace(tok))
	if n == 0 {
		return "", &Error{Reason: ReasonBadToken, Detail: "invalid bearer token"}
	}
	return "token#" + strconv.Itoa(n), nil
}

// tokenIndex compares tok with every accepted token in constant time (no
// early exit on a match either) and returns the position of the first
// match from 1, or 0.
func (a *Authenticator) tokenIndex(tok string) int {
	d := sha256.Sum256([]byte(tok))
	idx := 0
	for i := range a.digests {
		eq := subtle.ConstantTimeCompare(d[:], a.digests[i][:])
		first := eq & subtle.ConstantTimeEq(int32(idx), 0)
		idx = subtle.ConstantTimeSelect(first, i+1, idx)
	}
	return idx
}

// Reject answers 401 with a plain-text body naming the failure.
func Reject(w http.ResponseWriter, err error) {
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
