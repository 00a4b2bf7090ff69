// Package framefuzz holds the fuzz harnesses of the frame codec:
// DecodeFrame, DecodeMessage and HeaderBlock. It imports only frame and
// the standard library, so frame's own tests (frame/fuzz_test.go) run them
// without building mux; package fuzz re-exports them beside the session
// harnesses and their go-fuzz entries.
package framefuzz

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"runtime/debug"
	"slices"

	"github.com/wsmux/wsmux/frame"
)

// maxFrameInput bounds the inputs the frame harnesses look at: a WebSocket
// message is at most 1 MiB.
const maxFrameInput = 1 << 20

// frameErrors are the only errors package frame may return.
var frameErrors = []*frame.Error{
	frame.ErrEmptyMessage, frame.ErrShortHeader, frame.ErrShortPayload, frame.ErrUnknownType,
	frame.ErrUnknownFlags, frame.ErrReservedBit, frame.ErrNeedStreamID, frame.ErrNeedSession,
	frame.ErrNonZeroArg, frame.ErrPayloadNotAllowed, frame.ErrDataTooLarge, frame.ErrEmptyData,
	frame.ErrSynAndAck, frame.ErrHeadersTooLarge, frame.ErrZeroDelta, frame.ErrDeltaTooLarge,
	frame.ErrReasonTooLong, frame.ErrDebugTooLong, frame.ErrNotUTF8, frame.ErrSettingsLength,
	frame.ErrSettingsDuplicate, frame.ErrSettingsValue, frame.ErrCreditTooLarge,
	frame.ErrBlockTruncated, frame.ErrBlockTooLarge, frame.ErrBlockTooMany, frame.ErrBlockNameLength,
	frame.ErrBlockValueLength, frame.ErrBlockBadName, frame.ErrBlockBadValue,
}

// headerOnlyErrors are the errors ParseHeader can return: Parse must return
// none of them for a frame whose header ParseHeader accepted.
var headerOnlyErrors = []*frame.Error{
	frame.ErrShortHeader, frame.ErrUnknownType, frame.ErrUnknownFlags, frame.ErrReservedBit,
	frame.ErrNeedStreamID, frame.ErrNeedSession, frame.ErrNonZeroArg, frame.ErrPayloadNotAllowed,
	frame.ErrEmptyData, frame.ErrSynAndAck, frame.ErrZeroDelta, frame.ErrDeltaTooLarge,
	frame.ErrReasonTooLong, frame.ErrDebugTooLong, frame.ErrCreditTooLarge,
}

// looseLimits are the widest limits a decoder can be given: whatever decodes
// under the defaults decodes the same under these.
func looseLimits() frame.Limits {
	return frame.Limits{
		MaxDataPayload: frame.MaxPayload,
		Block:          frame.BlockLimits{MaxBytes: frame.MaxPayload, MaxFields: frame.MaxPayload, MaxName: 255, MaxValue: frame.MaxPayload},
	}
}

// DecodeFrame parses data as one frame (with trailing bytes allowed) under
// the default limits and checks the codec's invariants:
//
//   - Parse never panics and returns only the package's Err... values;
//     its error agrees with ParseHeader's for the 12-byte header;
//   - an accepted frame takes 12+Length bytes, its payload aliases data, and
//     it is accepted unchanged under wider limits;
//   - re-encoding it with the Append function of its type gives exactly the
//     bytes it was parsed from, which parse to the same frame;
//   - a HEADERS block decodes into an http.Header that AppendHeaders encodes
//     back to a frame carrying the same header (see HeaderBlock for the
//     block's own properties); a SETTINGS payload parses and re-encodes
//     exactly.
//
// It returns the first violation, or nil.
func DecodeFrame(data []byte) error {
	_, err := decodeFrame(data)
	return err
}

// DecodeMessage walks data as one WebSocket message with frame.Iterator
// under the default limits and checks: the walk agrees frame by frame with
// Parse at each offset (same frames, same error, same Count); every frame
// passes DecodeFrame's checks; the re-encoded frames concatenate to the
// message (or to the prefix before the error); a message that decodes whole
// re-walks identically from its re-encoding; an empty message is
// ErrEmptyMessage; Next stays false after the end. It returns the first
// violation, or nil.
func DecodeMessage(data []byte) error {
	_, err := decodeMessage(data)
	return err
}

// HeaderBlock decodes data as a header block under the default block limits
// and checks: CheckHeaderBlock, BlockIterator and DecodeHeaderBlock agree on
// the error; every field the iterator yields obeys the rules (lowercase token
// name, value without CR/LF/NUL, limits); DecodeHeaderBlock gives the same
// http.Header as http.Header.Add over the iterator's fields under
// textproto's canonical keys, both into an empty header and onto a non-empty
// one (differential against net/http), and leaves the header unchanged on
// error; AppendHeaderBlock re-encodes the result into a valid block of the
// same length that decodes to the same header, is sorted, is a fixed point
// of decode+encode, and equals the input when the input was already sorted.
// In the other direction, an http.Header holding the same fields under
// non-canonical keys (any case, as a map literal or a proxy may leave them)
// encodes without error and decodes to what http.Header.Add of those keys
// gives (values compared per canonical key, as multisets: Go's map order
// decides the order among keys that differ only in case).
// It returns the first violation, or nil.
func HeaderBlock(data []byte) error {
	_, err := headerBlock(data)
	return err
}

// DecodeFrameResult is DecodeFrame that also reports whether data held a
// valid frame (go-fuzz keeps such inputs in its corpus).
func DecodeFrameResult(data []byte) (decoded bool, err error) { return decodeFrame(data) }

// DecodeMessageResult is DecodeMessage that also reports whether data
// decoded as a whole message.
func DecodeMessageResult(data []byte) (decoded bool, err error) { return decodeMessage(data) }

// HeaderBlockResult is HeaderBlock that also reports whether data decoded
// as a valid header block.
func HeaderBlockResult(data []byte) (decoded bool, err error) { return headerBlock(data) }

// LooseLimits are the widest limits a decoder can be given: whatever
// decodes under the defaults decodes the same under these.
func LooseLimits() frame.Limits { return looseLimits() }

// HeaderDiff describes how got differs from want, or returns nil.
func HeaderDiff(got, want http.Header) error { return headerDiff(got, want) }

// guard turns a panic of the code under test into a violation.
func guard(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
	}
}

// clampInput hides spare capacity (so over-reads panic) and bounds the size.
func clampInput(data []byte) ([]byte, bool) {
	if len(data) > maxFrameInput {
		return nil, false
	}
	return data[:len(data):len(data)], true
}

// checkFrameError reports whether err is one of the package's errors.
func checkFrameError(err error) error {
	var fe *frame.Error
	if !errors.As(err, &fe) {
		return fmt.Errorf("error %v (%T) is not a *frame.Error", err, err)
	}
	if !slices.Contains(frameErrors, fe) || error(fe) != err {
		return fmt.Errorf("error %v is not one of the package's Err values", err)
	}
	return nil
}

func decodeFrame(data []byte) (ok bool, err error) {
	defer guard(&err)
	data, fits := clampInput(data)
	if !fits {
		return false, nil
	}
	lim := frame.DefaultLimits()
	f, n, perr := frame.Parse(data, &lim)
	h, herr := frame.ParseHeader(data)
	if herr != nil {
		if err := checkFrameError(herr); err != nil {
			return false, fmt.Errorf("ParseHeader: %w", err)
		}
		if perr != herr {
			return false, fmt.Errorf("ParseHeader error %v but Parse error %v", herr, perr)
		}
		return false, nil
	}
	if perr != nil {
		if err := checkFrameError(perr); err != nil {
			return false, fmt.Errorf("Parse: %w", err)
		}
		for _, e := range headerOnlyErrors {
			if perr == e {
				return false, fmt.Errorf("ParseHeader accepted %+v but Parse returned header error %v", h, perr)
			}
		}
		if n != 0 || f.Payload != nil || f.Header != (frame.Header{}) {
			return false, fmt.Errorf("Parse error %v with a frame %+v and n=%d", perr, f.Header, n)
		}
		return false, nil
	}
	if f.Header != h {
		return false, fmt.Errorf("Parse header %+v != ParseHeader %+v", f.Header, h)
	}
	if err := checkFrame(f, n, data, &lim); err != nil {
		return false, err
	}
	return true, nil
}

// checkFrame checks a frame f that Parse accepted from data, taking n bytes.
func checkFrame(f frame.Frame, n int, data []byte, lim *frame.Limits) error {
	if n != frame.HeaderSize+int(f.Length) || n > len(data) || len(f.Payload) != int(f.Length) {
		return fmt.Errorf("frame %+v took %d of %d bytes with a payload of %d", f.Header, n, len(data), len(f.Payload))
	}
	if cap(f.Payload) != len(f.Payload) {
		return fmt.Errorf("payload capacity %d exceeds its length %d", cap(f.Payload), len(f.Payload))
	}
	if len(f.Payload) > 0 && &f.Payload[0] != &data[frame.HeaderSize] {
		return fmt.Errorf("payload does not alias the input")
	}
	if f.Code() != frame.ErrorCode(f.Arg) {
		return fmt.Errorf("Code() %v != Arg %d", f.Code(), f.Arg)
	}
	loose := looseLimits()
	g, m, err := frame.Parse(data, &loose)
	if err != nil || m != n || g.Header != f.Header {
		return fmt.Errorf("frame %+v accepted under default limits but not alike under wider ones: %+v n=%d err=%v", f.Header, g.Header, m, err)
	}
	raw := data[:n]
	enc, err := reencode(nil, f)
	if err != nil {
		return fmt.Errorf("re-encoding %+v: %w", f.Header, err)
	}
	if !bytes.Equal(enc, raw) {
		return fmt.Errorf("re-encoding %+v gave\n%x\nwant\n%x", f.Header, enc, raw)
	}
	prefix := []byte("prefix")
	enc2, err := reencode(prefix, f)
	if err != nil || !bytes.HasPrefix(enc2, prefix) || !bytes.Equal(enc2[len(prefix):], raw) {
		return fmt.Errorf("re-encoding %+v after a prefix gave %x (err %v)", f.Header, enc2, err)
	}
	g, m, err = frame.Parse(enc, lim)
	if err != nil || m != len(enc) || g.Header != f.Header || !bytes.Equal(g.Payload, f.Payload) {
		return fmt.Errorf("re-encoded %+v parses as %+v n=%d err=%v", f.Header, g.Header, m, err)
	}
	switch f.Type {
	case frame.TypeData:
		hdr, err := frame.AppendDataHeader(nil, f.StreamID, f.Flags.Has(frame.FlagFIN), len(f.Payload))
		if err != nil || !bytes.Equal(hdr, raw[:frame.HeaderSize]) {
			return fmt.Errorf("AppendDataHeader gave %x (err %v), want %x", hdr, err, raw[:frame.HeaderSize])
		}
	case frame.TypeHeaders:
		return checkHeadersFrame(f, lim)
	case frame.TypeSettings:
		var s frame.Settings
		if err := frame.ParseSettings(f.Payload, &s); err != nil {
			return fmt.Errorf("ParseSettings of an accepted SETTINGS frame: %w", err)
		}
		if s.Len()*6 != len(f.Payload) {
			return fmt.Errorf("SETTINGS of %d bytes parsed into %d entries", len(f.Payload), s.Len())
		}
		var t frame.Settings
		for i := range s.Len() {
			e := s.At(i)
			if v, ok := s.Get(e.ID); !ok || v != e.Value {
				return fmt.Errorf("Settings.Get(%d) = %d, %v; At(%d) = %+v", e.ID, v, ok, i, e)
			}
			if err := t.Set(e.ID, e.Value); err != nil {
				return fmt.Errorf("Settings.Set(%+v) of a parsed entry: %w", e, err)
			}
		}
		if !bytes.Equal(frame.AppendSettings(nil, &t), raw) {
			return fmt.Errorf("SETTINGS rebuilt with Set re-encodes differently")
		}
	}
	return nil
}

// reencode appends f with the Append function of its type.
func reencode(dst []byte, f frame.Frame) ([]byte, error) {
	switch f.Type {
	case frame.TypeData:
		return frame.AppendData(dst, f.StreamID, f.Flags.Has(frame.FlagFIN), f.Payload)
	case frame.TypeHeaders:
		return frame.AppendHeadersBlock(dst, f.StreamID, f.Flags, f.Payload)
	case frame.TypeWindowUpdate:
		return frame.AppendWindowUpdate(dst, f.StreamID, f.Arg)
	case frame.TypeRSTStream:
		return frame.AppendRSTStream(dst, f.StreamID, f.Code(), string(f.Payload))
	case frame.TypeStopSending:
		return frame.AppendStopSending(dst, f.StreamID, f.Code())
	case frame.TypePing:
		return frame.AppendPing(dst, f.Flags.Has(frame.FlagACK), f.Arg), nil
	case frame.TypeGoAway:
		return frame.AppendGoAway(dst, f.StreamID, f.Code(), string(f.Payload))
	case frame.TypeSettings:
		var s frame.Settings
		if err := frame.ParseSettings(f.Payload, &s); err != nil {
			return dst, err
		}
		return frame.AppendSettings(dst, &s), nil
	case frame.TypeMaxStreams:
		return frame.AppendMaxStreams(dst, f.Arg)
	}
	return dst, fmt.Errorf("Parse accepted unknown type %d", f.Type)
}

// checkHeadersFrame checks that an accepted HEADERS frame's block decodes and
// that AppendHeaders carries the decoded header into an equal frame.
func checkHeadersFrame(f frame.Frame, lim *frame.Limits) error {
	h := http.Header{}
	if err := frame.DecodeHeaderBlock(f.Payload, &lim.Block, h); err != nil {
		return fmt.Errorf("DecodeHeaderBlock of an accepted HEADERS frame: %w", err)
	}
	enc, err := frame.AppendHeaders(nil, f.StreamID, f.Flags, h, &lim.Block)
	if err != nil {
		return fmt.Errorf("AppendHeaders of a decoded HEADERS frame: %w", err)
	}
	g, n, err := frame.Parse(enc, lim)
	if err != nil || n != len(enc) {
		return fmt.Errorf("AppendHeaders output does not parse: n=%d err=%v", n, err)
	}
	if g.Type != frame.TypeHeaders || g.Flags != f.Flags || g.StreamID != f.StreamID || g.Arg != 0 || g.Length != f.Length {
		return fmt.Errorf("AppendHeaders gave header %+v for %+v", g.Header, f.Header)
	}
	h2 := http.Header{}
	if err := frame.DecodeHeaderBlock(g.Payload, &lim.Block, h2); err != nil {
		return fmt.Errorf("DecodeHeaderBlock of AppendHeaders output: %w", err)
	}
	if err := headerDiff(h2, h); err != nil {
		return fmt.Errorf("HEADERS round trip: %w", err)
	}
	return nil
}

func decodeMessage(data []byte) (ok bool, err error) {
	defer guard(&err)
	data, fits := clampInput(data)
	if !fits {
		return false, nil
	}
	lim := frame.DefaultLimits()
	var it frame.Iterator
	it.Reset(data, lim)
	var out []byte
	off, count := 0, 0
	for it.Next() {
		f := it.Frame()
		g, n, perr := frame.Parse(data[off:], &lim)
		if perr != nil || g.Header != f.Header || len(g.Payload) != len(f.Payload) ||
			(len(f.Payload) > 0 && &g.Payload[0] != &f.Payload[0]) {
			return false, fmt.Errorf("frame %d at %d: Iterator gave %+v, Parse %+v (err %v)", count, off, f.Header, g.Header, perr)
		}
		if err := checkFrame(f, n, data[off:], &lim); err != nil {
			return false, fmt.Errorf("frame %d at %d: %w", count, off, err)
		}
		if out, err = reencode(out, f); err != nil {
			return false, fmt.Errorf("frame %d at %d: re-encoding: %w", count, off, err)
		}
		off += n
		count++
		if it.Count() != count {
			return false, fmt.Errorf("Count() = %d after %d frames", it.Count(), count)
		}
	}
	werr := it.Err()
	if it.Next() || it.Err() != werr || it.Count() != count {
		return false, fmt.Errorf("Next after the end: err %v -> %v, count %d -> %d", werr, it.Err(), count, it.Count())
	}
	if !bytes.Equal(out, data[:off]) {
		return false, fmt.Errorf("frames before offset %d re-encode to\n%x\nwant\n%x", off, out, data[:off])
	}
	switch {
	case len(data) == 0:
		if werr != frame.ErrEmptyMessage || count != 0 {
			return false, fmt.Errorf("empty message: err %v, count %d", werr, count)
		}
		return false, nil
	case werr != nil:
		if err := checkFrameError(werr); err != nil {
			return false, fmt.Errorf("Iterator: %w", err)
		}
		if _, _, perr := frame.Parse(data[off:], &lim); perr != werr {
			return false, fmt.Errorf("Iterator stopped at %d with %v, Parse there says %v", off, werr, perr)
		}
		return false, nil
	}
	if off != len(data) {
		return false, fmt.Errorf("walk ended at %d of %d without an error", off, len(data))
	}
	var again frame.Iterator
	again.Reset(out, lim)
	for again.Next() {
	}
	if again.Err() != nil || again.Count() != count {
		return false, fmt.Errorf("re-encoded message walks to %d frames, err %v; want %d", again.Count(), again.Err(), count)
	}
	it.Reset(data, lim) // Reset must clear the earlier walk
	for it.Next() {
	}
	if it.Err() != nil || it.Count() != count {
		return false, fmt.Errorf("second walk after Reset: %d frames, err %v; want %d", it.Count(), it.Err(), count)
	}
	return true, nil
}

// field is one decoded header field.
type field struct{ name, value string }

// isWireName reports whether name follows the block rules under lim.
func isWireName(name []byte, lim *frame.BlockLimits) bool {
	if len(name) == 0 || len(name) > lim.MaxName {
		return false
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0) {
			return false
		}
	}
	return true
}

func headerBlock(data []byte) (ok bool, err error) {
	defer guard(&err)
	data, fits := clampInput(data)
	if !fits {
		return false, nil
	}
	lim := frame.DefaultBlockLimits()
	cerr := frame.CheckHeaderBlock(data, &lim)
	if cerr != nil {
		if err := checkFrameError(cerr); err != nil {
			return false, fmt.Errorf("CheckHeaderBlock: %w", err)
		}
	}

	var fields []field
	var it frame.BlockIterator
	it.Reset(data, &lim)
	size := 0
	for it.Next() {
		name, value := it.Field()
		if !isWireName(name, &lim) {
			return false, fmt.Errorf("field %d: name %q breaks the rules", len(fields), name)
		}
		if len(value) > lim.MaxValue || bytes.ContainsAny(value, "\r\n\x00") {
			return false, fmt.Errorf("field %d: value %q breaks the rules", len(fields), value)
		}
		size += 1 + len(name) + 2 + len(value)
		fields = append(fields, field{string(name), string(value)})
	}
	if it.Err() != cerr {
		return false, fmt.Errorf("BlockIterator error %v, CheckHeaderBlock error %v", it.Err(), cerr)
	}
	if len(fields) > lim.MaxFields || size > lim.MaxBytes {
		return false, fmt.Errorf("%d fields of %d bytes passed the limits %+v", len(fields), size, lim)
	}
	if cerr == nil && size != len(data) {
		return false, fmt.Errorf("fields cover %d of %d bytes", size, len(data))
	}

	// DecodeHeaderBlock into an empty header and onto a non-empty one.
	pre := func() http.Header {
		return http.Header{"Streamtype": {"pre"}, "X-Pre": {"1", "2"}, "Port": {"80"}}
	}
	h := http.Header{}
	derr := frame.DecodeHeaderBlock(data, &lim, h)
	onto := pre()
	oerr := frame.DecodeHeaderBlock(data, &lim, onto)
	if derr != cerr || oerr != cerr {
		return false, fmt.Errorf("DecodeHeaderBlock errors %v and %v, CheckHeaderBlock %v", derr, oerr, cerr)
	}
	if cerr != nil {
		if len(h) != 0 {
			return false, fmt.Errorf("DecodeHeaderBlock changed the header on error: %v", h)
		}
		if err := headerDiff(onto, pre()); err != nil {
			return false, fmt.Errorf("DecodeHeaderBlock changed a non-empty header on error: %w", err)
		}
		return false, nil
	}

	// Differential against net/http: Add under textproto's canonical keys.
	ref, refOnto := http.Header{}, pre()
	for _, f := range fields {
		key := textproto.CanonicalMIMEHeaderKey(f.name)
		if key != http.CanonicalHeaderKey(f.name) {
			return false, fmt.Errorf("textproto and net/http disagree on %q", f.name)
		}
		ref.Add(key, f.value)
		refOnto.Add(key, f.value)
	}
	if err := headerDiff(h, ref); err != nil {
		return false, fmt.Errorf("DecodeHeaderBlock vs http.Header.Add: %w", err)
	}
	if err := headerDiff(onto, refOnto); err != nil {
		return false, fmt.Errorf("DecodeHeaderBlock onto a non-empty header vs http.Header.Add: %w", err)
	}
	// The decoded slices must not share spare capacity: adding to one name
	// must leave every other name as it was.
	for k := range h {
		want := http.Header{}
		for k2, vs := range h {
			want[k2] = slices.Clone(vs)
		}
		h.Add(k, "added")
		want.Add(k, "added")
		if err := headerDiff(h, want); err != nil {
			return false, fmt.Errorf("adding to %q after decoding: %w", k, err)
		}
		h[k] = h[k][:len(h[k])-1]
	}

	// Re-encode.
	enc, eerr := frame.AppendHeaderBlock(nil, h, &lim)
	if eerr != nil {
		return false, fmt.Errorf("AppendHeaderBlock of a decoded header: %w", eerr)
	}
	if len(enc) != len(data) {
		return false, fmt.Errorf("re-encoded block has %d bytes, input %d", len(enc), len(data))
	}
	if err := frame.CheckHeaderBlock(enc, &lim); err != nil {
		return false, fmt.Errorf("re-encoded block fails CheckHeaderBlock: %w", err)
	}
	var names []string
	for it.Reset(enc, &lim); it.Next(); {
		name, _ := it.Field()
		names = append(names, string(name))
	}
	if !slices.IsSorted(names) {
		return false, fmt.Errorf("AppendHeaderBlock output is not sorted: %q", names)
	}
	h2 := http.Header{}
	if err := frame.DecodeHeaderBlock(enc, &lim, h2); err != nil {
		return false, fmt.Errorf("DecodeHeaderBlock of the re-encoded block: %w", err)
	}
	if err := headerDiff(h2, h); err != nil {
		return false, fmt.Errorf("decode(encode(decode(block))) != decode(block): %w", err)
	}
	enc2, err := frame.AppendHeaderBlock(nil, h2, &lim)
	if err != nil || !bytes.Equal(enc2, enc) {
		return false, fmt.Errorf("encode(decode(encode(h))) differs: %x vs %x (err %v)", enc2, enc, err)
	}
	inputNames := make([]string, len(fields))
	for i, f := range fields {
		inputNames[i] = f.name
	}
	if slices.IsSorted(inputNames) && !bytes.Equal(enc, data) {
		return false, fmt.Errorf("sorted input block re-encodes differently:\n%x\n%x", enc, data)
	}
	if err := encodeRawKeys(fields, &lim); err != nil {
		return false, err
	}
	return true, nil
}

// encodeRawKeys puts fields into an http.Header under non-canonical keys
// (some letters of field i's name upper-cased, chosen from i and the value's
// length) and checks AppendHeaderBlock against
// http.Header.Add semantics.
func encodeRawKeys(fields []field, lim *frame.BlockLimits) error {
	raw := http.Header{}
	for i, f := range fields {
		key := []byte(f.name)
		for j := range key {
			if (len(f.value)+i+j)%3 == 0 && 'a' <= key[j] && key[j] <= 'z' {
				key[j] -= 'a' - 'A'
			}
		}
		raw[string(key)] = append(raw[string(key)], f.value)
	}
	ref := http.Header{}
	for k, vs := range raw {
		for _, v := range vs {
			ref.Add(k, v)
		}
	}
	enc, err := frame.AppendHeaderBlock(nil, raw, lim)
	if err != nil {
		return fmt.Errorf("AppendHeaderBlock of the fields under non-canonical keys: %w", err)
	}
	got := http.Header{}
	if err := frame.DecodeHeaderBlock(enc, lim, got); err != nil {
		return fmt.Errorf("DecodeHeaderBlock of an encoded http.Header: %w", err)
	}
	for _, h := range []http.Header{got, ref} {
		for _, vs := range h {
			slices.Sort(vs)
		}
	}
	if err := headerDiff(got, ref); err != nil {
		return fmt.Errorf("encode(http.Header with non-canonical keys) vs http.Header.Add: %w", err)
	}
	return nil
}

// headerDiff describes how got differs from want, or returns nil.
func headerDiff(got, want http.Header) error {
	for k, vs := range want {
		if !slices.Equal(got[k], vs) {
			return fmt.Errorf("%q: got %q, want %q", k, got[k], vs)
		}
	}
	for k, vs := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("%q: got %q, want nothing", k, vs)
		}
	}
	return nil
}
