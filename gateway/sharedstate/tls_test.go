package sharedstate

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testnet"
)

// TestRedisTLSAndPassword: a rediss:// server with a private CA and a
// password serves the store when the CA is given and the password is
// right, and every other way in fails (no trust in the CA, a wrong
// password, plain TCP to the TLS port) with an error that does not show
// the password.
func TestRedisTLSAndPassword(t *testing.T) {
	rs := testnet.StartRedisTLS(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute)
	const timeout = 2 * time.Second

	ok, err := NewRedis(RedisConfig{URL: rs.URL(), TLS: &tls.Config{RootCAs: rs.RootCAs}, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	d := sha256.Sum256([]byte("tls ticket"))
	if err := ok.UseTicket(ctx, d, exp); err != nil {
		t.Fatalf("over TLS with the CA: %v", err)
	}
	if err := ok.UseTicket(ctx, d, exp); !errors.Is(err, ErrTicketUsed) {
		t.Fatalf("second use over TLS: %v, want ErrTicketUsed", err)
	}

	wrongPass := strings.Replace(rs.URL(), rs.Password, "not-the-password", 1)
	for _, c := range []struct {
		name string
		cfg  RedisConfig
	}{
		{"the system's roots only", RedisConfig{URL: rs.URL()}},
		{"a wrong password", RedisConfig{URL: wrongPass, TLS: &tls.Config{RootCAs: rs.RootCAs}}},
		{"plain TCP to the TLS port", RedisConfig{URL: strings.Replace(rs.URL(), "rediss://", "redis://", 1)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Timeout = timeout
			r, err := NewRedis(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			err = r.UseTicket(ctx, sha256.Sum256([]byte(c.name)), exp)
			if err == nil {
				t.Fatal("the call succeeded; want it refused")
			}
			if strings.Contains(err.Error(), rs.Password) || strings.Contains(err.Error(), "not-the-password") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}
