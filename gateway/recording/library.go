package recording

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Entry is one recording of a Library.
type Entry struct {
	Name   string `json:"name"`
	Meta   Meta   `json:"meta"`
	Width  int    `json:"width,omitempty"`
	Height int    `json:"height,omitempty"`
	Size   int64  `json:"size"`
}

// Filter selects recordings: Caller matches the caller's credential or
// user name, Pod the pod's name (both substrings, ignoring case; "" is
// any), Since and Until the start time (zero: open).
type Filter struct {
	Caller, Pod  string
	Since, Until time.Time
}

func (f Filter) match(m Meta) bool {
	has := func(v, sub string) bool { return strings.Contains(strings.ToLower(v), strings.ToLower(sub)) }
	if f.Caller != "" && !has(m.Caller, f.Caller) && !has(m.User, f.Caller) {
		return false
	}
	if f.Pod != "" && !has(m.Pod, f.Pod) {
		return false
	}
	return (f.Since.IsZero() || !m.Start.Before(f.Since)) && (f.Until.IsZero() || m.Start.Before(f.Until))
}

// Library lists and opens stored recordings (DirSink does, for replay).
type Library interface {
	List(f Filter, limit int) ([]Entry, error)
	OpenRecording(name string) (io.ReadCloser, error)
}

// maxHeaderLine bounds the first line List reads of each file.
const maxHeaderLine = 64 << 10

// ErrNotFound is a recording name the library does not hold.
var ErrNotFound = errors.New("recording: no such recording")

// List returns up to limit recordings matching f, newest first.
func (d *DirSink) List(f Filter, limit int) ([]Entry, error) {
	ents, err := os.ReadDir(d.Dir)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, de := range ents {
		name := de.Name()
		if de.IsDir() || !(strings.HasSuffix(name, ".cast") || strings.HasSuffix(name, ".portforward.jsonl")) {
			continue
		}
		e, ok := d.entry(name)
		if ok && f.match(e.Meta) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return b.Meta.Start.Compare(a.Meta.Start) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (d *DirSink) entry(name string) (Entry, bool) {
	f, err := os.Open(filepath.Join(d.Dir, name))
	if err != nil {
		return Entry{}, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Entry{}, false
	}
	line, err := bufio.NewReaderSize(io.LimitReader(f, maxHeaderLine), maxHeaderLine).ReadSlice('\n')
	if err != nil {
		return Entry{}, false // no header yet, or not one of ours
	}
	var h struct {
		Width  int   `json:"width"`
		Height int   `json:"height"`
		Wsmux  *Meta `json:"wsmux"`
	}
	if json.Unmarshal(line, &h) != nil || h.Wsmux == nil {
		return Entry{}, false
	}
	return Entry{Name: name, Meta: *h.Wsmux, Width: h.Width, Height: h.Height, Size: st.Size()}, true
}

// OpenRecording opens the recording name (as List returned it).
func (d *DirSink) OpenRecording(name string) (io.ReadCloser, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") ||
		!(strings.HasSuffix(name, ".cast") || strings.HasSuffix(name, ".portforward.jsonl")) {
		return nil, ErrNotFound
	}
	f, err := os.Open(filepath.Join(d.Dir, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	return f, err
}

// MaxList bounds the entries one list request returns.
const MaxList = 1000

// Handler serves a Library for replay under its prefix (StripPrefix'd):
//
//	GET list?caller=&pod=&since=RFC3339&until=RFC3339&limit=N
//	    the recordings, newest first, as JSON ({"recordings": [Entry...]})
//	GET cast/NAME
//	    one recording as it is stored
//
// Authorize decides each request: it answers the refusal itself and
// returns false.
func Handler(lib Library, authorize func(w http.ResponseWriter, r *http.Request) bool) http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET /list", func(w http.ResponseWriter, r *http.Request) {
		if !authorize(w, r) {
			return
		}
		q := r.URL.Query()
		f := Filter{Caller: q.Get("caller"), Pod: q.Get("pod")}
		for k, t := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
			if v := q.Get(k); v != "" {
				var err error
				if *t, err = time.Parse(time.RFC3339, v); err != nil {
					http.Error(w, k+": want an RFC 3339 time (2006-01-02T15:04:05Z)", http.StatusBadRequest)
					return
				}
			}
		}
		list, err := lib.List(f, MaxList)
		if err != nil {
			http.Error(w, "recordings: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if list == nil {
			list = []Entry{}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(map[string]any{"recordings": list})
	})
	m.HandleFunc("GET /cast/{name}", func(w http.ResponseWriter, r *http.Request) {
		if !authorize(w, r) {
			return
		}
		rc, err := lib.OpenRecording(r.PathValue("name"))
		if errors.Is(err, ErrNotFound) {
			http.Error(w, "no such recording", http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, "recordings: "+err.Error(), http.StatusInternalServerError)
			return
		}
		defer rc.Close()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = io.Copy(w, rc)
	})
	return m
}
