package bench

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/wsmux/wsmux/mux"
)

// wsmux-eventloop: the wsmux transport with both sessions on
// mux.DriverEventLoop (one epoll instance, a bounded worker pool and one
// timer wheel for every session; no goroutine per session). Same setup and
// Config as "wsmux" otherwise.

func init() {
	Register(Transport{
		Name:        "wsmux-eventloop",
		Multiplexed: true,
		Description: "wsmux as \"wsmux\" with Config.Driver = mux.DriverEventLoop on both ends (epoll, worker pool, timer wheel)",
		MaxStreams:  wsmuxMaxStreams,
		Pair:        wsmuxEventLoopPair,
	})
}

func wsmuxEventLoopConfig() *mux.Config {
	c := wsmuxConfig()
	c.Driver = mux.DriverEventLoop
	return c
}

func wsmuxEventLoopPair(tb testing.TB) (client, server Session, cleanup func()) {
	conns := newConnSet()
	var ss *mux.Session
	u := startUpgradeServer(tb, conns, func(w http.ResponseWriter, r *http.Request) error {
		s, err := mux.Upgrade(w, r, wsmuxEventLoopConfig())
		ss = s
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := mux.Dialer{Config: wsmuxEventLoopConfig(), NetDial: trackingDial(conns)}
	cs, err := d.Dial(ctx, u.url())
	if err != nil {
		conns.closeAll()
		u.stop()
		mustf(tb, err, "wsmux-eventloop: dial")
	}
	if err := u.wait(); err != nil {
		conns.closeAll()
		cs.Close()
		mustf(tb, err, "wsmux-eventloop: upgrade")
	}
	return wsmuxSession{cs}, wsmuxSession{ss}, muxCleanup(tb, "wsmux-eventloop", conns, cs.Close, ss.Close)
}
