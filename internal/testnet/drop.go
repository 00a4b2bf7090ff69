package testnet

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/internal/wshandshake"
)

// DropKind is how a connect-and-drop cycle ends its connection after the
// 101, before its SETTINGS could make resumption take effect.
type DropKind int

// The kinds of drop, which a burst takes in turn.
const (
	DropAfter101      DropKind = iota // close at once (FIN)
	ResetAfter101                     // close with a TCP reset
	DropInSettings                    // half of a SETTINGS frame, then close
	DropAfterSettings                 // a SETTINGS without RESUME, then close
	DropKinds
)

func (k DropKind) String() string {
	return [...]string{"dropped after the 101", "reset after the 101", "dropped inside its SETTINGS",
		"dropped after SETTINGS without RESUME"}[k]
}

// SettingsMessage is a client's SETTINGS, RESUME set or not, as one masked
// WebSocket message.
func SettingsMessage(t testing.TB, resume bool) []byte {
	t.Helper()
	var set frame.Settings
	if resume {
		if err := set.Set(frame.SettingFeatures, frame.FeatureResume); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := ws.WriteFrame(&b, ws.MaskFrame(ws.NewBinaryFrame(frame.AppendSettings(nil, &set)))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// Dropper upgrades to URL with Header and drops the connection before its
// SETTINGS set RESUME. Each 101 must carry the header TokenHeader (the
// resume token), so that the server did offer resumption.
type Dropper struct {
	URL         string
	Header      http.Header
	TokenHeader string

	settings, plain []byte // a SETTINGS with RESUME, and one without
}

// NewDropper returns a Dropper for url.
func NewDropper(t testing.TB, url string, h http.Header, tokenHeader string) *Dropper {
	return &Dropper{URL: url, Header: h, TokenHeader: tokenHeader,
		settings: SettingsMessage(t, true), plain: SettingsMessage(t, false)}
}

// Drop runs one connect-and-drop cycle that ends as k says; a refused
// upgrade is the handshake's error.
func (d *Dropper) Drop(k DropKind) error {
	conn, _, hdr, err := wshandshake.Dial(context.Background(), d.URL, wshandshake.DialOptions{Header: d.Header})
	if err != nil {
		return err
	}
	defer conn.Close()
	if hdr.Get(d.TokenHeader) == "" {
		return fmt.Errorf("no %s in the 101", d.TokenHeader)
	}
	switch k {
	case ResetAfter101:
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	case DropInSettings:
		_, err = conn.Write(d.settings[:len(d.settings)/2])
	case DropAfterSettings:
		_, err = conn.Write(d.plain)
	}
	return err
}

// Burst runs n cycles, workers at a time, the kinds of drop in turn; it
// reports the first error.
func (d *Dropper) Burst(n, workers int) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				k := DropKind(i % int(DropKinds))
				if err := d.Drop(k); err != nil {
					once.Do(func() { first = fmt.Errorf("cycle %d (%v): %w", i, k, err) })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
