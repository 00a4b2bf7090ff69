package recording

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Sink takes recordings. Open starts the recording of the session m (its
// content type m.ContentType) and returns where its bytes go, in order, as
// the session runs; Close ends it. An error from Open means the sink
// cannot take the recording (with Config.Required the session is
// refused); from Write or Close, that it failed. Close must end a Write
// under way.
type Sink interface {
	Open(ctx context.Context, m Meta) (io.WriteCloser, error)
}

// DirSink writes each recording to a file of its own in Dir, as the
// session runs (a crash loses at most what was still buffered): casts as
// TIME_ID.cast, port-forwards as TIME_ID.portforward.jsonl, mode 0600.
type DirSink struct {
	Dir string
}

// Name returns the file name of m's recording.
func (d *DirSink) Name(m Meta) string {
	ext := ".cast"
	if m.Kind == "portforward" {
		ext = ".portforward.jsonl"
	}
	return m.Start.UTC().Format("20060102T150405.000Z") + "_" + m.ID + ext
}

// Open creates the recording's file.
func (d *DirSink) Open(_ context.Context, m Meta) (io.WriteCloser, error) {
	if strings.ContainsAny(m.ID, `/\.`) || m.ID == "" {
		return nil, fmt.Errorf("recording: bad id %q", m.ID)
	}
	f, err := os.OpenFile(filepath.Join(d.Dir, d.Name(m)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// HTTPSink POSTs each recording to URL as it runs, one streaming request
// per session (chunked; Content-Type application/x-asciicast or, for
// port-forwards, application/x-ndjson; the session in the
// Wsmux-Recording-Id and -Kind headers). The collector answers when the
// body ends; any status but 2xx fails the recording.
type HTTPSink struct {
	URL string
	// Client sends the requests (nil: http.DefaultClient); its Timeout
	// must be zero or longer than any session.
	Client *http.Client
	// Header is added to every request (an Authorization for the
	// collector, say).
	Header http.Header
}

// Open starts the POST and returns once its headers are on the wire (the
// collector is reachable), or with the error that kept them off.
func (h *HTTPSink) Open(ctx context.Context, m Meta) (io.WriteCloser, error) {
	pr, pw := io.Pipe()
	wrote := make(chan struct{})
	var once sync.Once
	trace := &httptrace.ClientTrace{WroteHeaders: func() { once.Do(func() { close(wrote) }) }}
	// The request outlives Open: its context is not Open's.
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(rctx, trace), http.MethodPost, h.URL, pr)
	if err != nil {
		cancel()
		return nil, err
	}
	for k, v := range h.Header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", m.ContentType)
	req.Header.Set("Wsmux-Recording-Id", m.ID)
	req.Header.Set("Wsmux-Recording-Kind", m.Kind)
	c := h.Client
	if c == nil {
		c = http.DefaultClient
	}
	w := &httpWriter{pw: pw, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(w.done)
		defer cancel()
		resp, err := c.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				err = fmt.Errorf("the collector answered %s", resp.Status)
			}
		}
		w.err = err
		if err == nil {
			err = errors.New("the collector answered before the recording ended")
		}
		_ = pr.CloseWithError(err) // a Write from now on fails
	}()
	select {
	case <-wrote:
		return w, nil
	case <-w.done:
		if w.err == nil {
			return nil, errors.New("the collector answered before the recording began")
		}
		return nil, w.err
	case <-ctx.Done():
		cancel()
		<-w.done
		return nil, fmt.Errorf("the collector %s did not take the request: %w", h.URL, ctx.Err())
	}
}

// answerTimeout bounds the wait for the collector's answer once a
// recording's body ended.
const answerTimeout = 10 * time.Second

type httpWriter struct {
	pw     *io.PipeWriter
	done   chan struct{}
	cancel context.CancelFunc
	err    error // set before done is closed
}

func (w *httpWriter) Write(p []byte) (int, error) { return w.pw.Write(p) }

// Close ends the body and waits for the collector's answer.
func (w *httpWriter) Close() error {
	_ = w.pw.Close()
	t := time.NewTimer(answerTimeout)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
		w.cancel()
		<-w.done
	}
	return w.err
}
