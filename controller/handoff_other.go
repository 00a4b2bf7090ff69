//go:build !unix

package controller

import (
	"context"
	"net/http"
	"syscall"
)

// Handoff returns ErrHandoffUnsupported: descriptors cannot be passed here.
func Handoff(ctx context.Context, socketPath string, client syscall.Conn, m HandoffMessage) error {
	return ErrHandoffUnsupported
}

// HandoffHTTP answers 501 and returns ErrHandoffUnsupported.
func HandoffHTTP(w http.ResponseWriter, r *http.Request, socketPath string, u User, t Target) error {
	http.Error(w, ErrHandoffUnsupported.Error(), http.StatusNotImplemented)
	return ErrHandoffUnsupported
}
