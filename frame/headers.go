package frame

import (
	"encoding/binary"
	"strings"
	"unicode/utf8"
)

// BlockLimits bound a header block. Decoders get them from the negotiated
// SETTINGS; encoders use the peer's.
type BlockLimits struct {
	MaxBytes  int // whole block (8 KiB default, at most 65535)
	MaxFields int // name/value pairs (64 default)
	MaxName   int // bytes of one name (64 default, at most 255)
	MaxValue  int // bytes of one value (4 KiB default, at most 65535)
}

// DefaultBlockLimits returns the protocol defaults.
func DefaultBlockLimits() BlockLimits {
	return BlockLimits{MaxBytes: 8 << 10, MaxFields: 64, MaxName: 64, MaxValue: 4 << 10}
}

// tchar marks the bytes allowed in a field name on the wire: RFC 9110 token
// characters with letters lowercase.
var tchar = func() (t [256]bool) {
	for _, c := range "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz" {
		t[c] = true
	}
	return t
}()

// validValue reports whether v is UTF-8 without CR, LF or NUL (spec 5: a
// value is text; every other code point, tabs and controls included, may
// appear).
func validValue(v []byte) bool {
	for _, c := range v {
		if c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return utf8.Valid(v)
}

// validValueString is validValue for a string.
func validValueString(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return utf8.ValidString(v)
}

// BlockIterator walks the fields of a header block without allocating:
//
//	var it frame.BlockIterator
//	it.Reset(block, &lim)
//	for it.Next() { name, value := it.Field(); ... }
//	err := it.Err()
//
// Names come out lowercase as on the wire; both slices alias the block.
type BlockIterator struct {
	rest        []byte
	lim         BlockLimits
	name, value []byte
	fields      int
	err         error
}

// Reset starts a walk over block under lim.
func (it *BlockIterator) Reset(block []byte, lim *BlockLimits) {
	*it = BlockIterator{rest: block, lim: *lim}
	if len(block) > lim.MaxBytes {
		it.err = ErrBlockTooLarge
	}
}

// Next decodes and checks the next field; false at the end or on error.
// The checks follow the order of the bytes (spec 5): the field count at
// the field's first byte (a 65th field is HEADER_TOO_LARGE whatever it
// holds, truncated or not), then the name length, the name, the value
// length, the value.
func (it *BlockIterator) Next() bool {
	if it.err != nil || len(it.rest) == 0 {
		return false
	}
	if it.fields >= it.lim.MaxFields {
		return it.fail(ErrBlockTooMany)
	}
	b := it.rest
	nl := int(b[0])
	if nl == 0 || nl > it.lim.MaxName {
		return it.fail(ErrBlockNameLength)
	}
	if len(b) < 1+nl {
		return it.fail(ErrBlockTruncated)
	}
	name := b[1 : 1+nl]
	for _, c := range name {
		if !tchar[c] {
			return it.fail(ErrBlockBadName)
		}
	}
	if len(b) < 1+nl+2 {
		return it.fail(ErrBlockTruncated)
	}
	vl := int(binary.BigEndian.Uint16(b[1+nl:]))
	if vl > it.lim.MaxValue {
		return it.fail(ErrBlockValueLength)
	}
	end := 1 + nl + 2 + vl
	if len(b) < end {
		return it.fail(ErrBlockTruncated)
	}
	value := b[end-vl : end]
	if !validValue(value) {
		return it.fail(ErrBlockBadValue)
	}
	it.fields++
	it.name, it.value, it.rest = name, value, b[end:]
	return true
}

func (it *BlockIterator) fail(err *Error) bool {
	it.err, it.rest = err, nil
	return false
}

// Field returns the field decoded by the last successful Next.
func (it *BlockIterator) Field() (name, value []byte) { return it.name, it.value }

// Err returns the error that stopped the walk, or nil.
func (it *BlockIterator) Err() error { return it.err }

// CheckHeaderBlock validates block under lim without allocating.
func CheckHeaderBlock(block []byte, lim *BlockLimits) error {
	var it BlockIterator
	it.Reset(block, lim)
	for it.Next() {
	}
	return it.Err()
}

// AppendHeaderBlock appends h in block format: names lowercase, sorted, each
// value its own field. It fails, leaving dst as it was, if a name is not a
// token, a value holds CR, LF or NUL or is not UTF-8, or a limit of lim is crossed (and with
// ErrBlockTooMany when h holds more than 256 distinct names, whatever
// lim.MaxFields says). It does not allocate unless dst must grow.
func AppendHeaderBlock(dst []byte, h map[string][]string, lim *BlockLimits) ([]byte, error) {
	var keys [256]string // names sorted on the stack; more distinct names fail with ErrBlockTooMany whatever lim says
	n, fields := 0, 0
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		if n == len(keys) {
			return dst, ErrBlockTooMany
		}
		keys[n] = k
		n++
		fields += len(vs)
	}
	if fields > lim.MaxFields {
		return dst, ErrBlockTooMany
	}
	sorted := keys[:n]
	for i := 1; i < len(sorted); i++ { // insertion sort: n is small and nothing escapes
		for j := i; j > 0 && lessFold(sorted[j], sorted[j-1]); j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	start := len(dst)
	for _, k := range sorted {
		if len(k) == 0 || len(k) > lim.MaxName || len(k) > 255 {
			return dst[:start], ErrBlockNameLength
		}
		for _, v := range h[k] {
			if len(v) > lim.MaxValue || len(v) > MaxPayload {
				return dst[:start], ErrBlockValueLength
			}
			if !validValueString(v) {
				return dst[:start], ErrBlockBadValue
			}
			dst = append(dst, byte(len(k)))
			for i := 0; i < len(k); i++ {
				c := lower(k[i])
				if !tchar[c] {
					return dst[:start], ErrBlockBadName
				}
				dst = append(dst, c)
			}
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(v)))
			dst = append(dst, v...)
			if len(dst)-start > lim.MaxBytes {
				return dst[:start], ErrBlockTooLarge
			}
		}
	}
	return dst, nil
}

// AppendHeaders appends a HEADERS frame carrying h (see AppendHeaderBlock).
// flags may hold SYN or ACK (not both) and FIN.
func AppendHeaders(dst []byte, streamID uint32, flags Flags, h map[string][]string, lim *BlockLimits) ([]byte, error) {
	start := len(dst)
	hdr := Header{Type: TypeHeaders, Flags: flags, StreamID: streamID}
	if err := hdr.check(); err != nil {
		return dst, err
	}
	dst = AppendHeader(dst, hdr)
	dst, err := AppendHeaderBlock(dst, h, lim)
	if err != nil {
		return dst[:start], err
	}
	n := len(dst) - start - HeaderSize
	if n > MaxPayload {
		return dst[:start], ErrHeadersTooLarge
	}
	binary.BigEndian.PutUint16(dst[start+2:], uint16(n))
	return dst, nil
}

// lessFold orders names as their lowercase wire forms, without allocating.
// Names equal but for case (two keys of one header that only differ in case,
// set without Add) are ordered by their bytes, so that the output never
// depends on map iteration order.
func lessFold(a, b string) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := lower(a[i]), lower(b[i])
		if ca != cb {
			return ca < cb
		}
	}
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// canonical writes the canonical form of the lowercase wire name into buf
// (the http.CanonicalHeaderKey form: upper case at the start and after '-').
func canonical(buf *[255]byte, name []byte) []byte {
	up := true
	for i, c := range name {
		if up && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		buf[i] = c
		up = c == '-'
	}
	return buf[:len(name)]
}

// knownName returns a constant string for names Kubernetes streams carry, so
// decoding them allocates no key.
func knownName(b []byte) (string, bool) {
	switch string(b) {
	case "Streamtype":
		return "Streamtype", true
	case "Port":
		return "Port", true
	case "Requestid":
		return "Requestid", true
	case "X-Stream-Protocol-Version":
		return "X-Stream-Protocol-Version", true
	case "Content-Type":
		return "Content-Type", true
	case "Content-Length":
		return "Content-Length", true
	case "Authorization":
		return "Authorization", true
	case "User-Agent":
		return "User-Agent", true
	}
	return "", false
}

// DecodeHeaderBlock checks block under lim and adds its fields to h under
// canonical names (http.Header.Add semantics). On error h is unchanged. h
// must not be nil unless block holds no field.
//
// Allocation floor: http.Header holds strings in a map, so decoding cannot be
// free. A block costs two allocations (one string holding every value, one
// []string backing every value slice; one when every value is empty, none
// when the block holds no field), plus one key string per run of a name that
// is not a known Kubernetes name (Streamtype, Port, Requestid,
// X-Stream-Protocol-Version, Content-Type, Content-Length, Authorization,
// User-Agent), plus the growth of h's map. Repeats of a name next to each
// other, as AppendHeaderBlock writes them, cost nothing more. A value added to
// a name that h already holds, or to a name seen earlier in the block but not
// just before, costs what http.Header.Add costs: the growth of that name's
// value slice. Use BlockIterator for an allocation-free walk.
func DecodeHeaderBlock(block []byte, lim *BlockLimits, h map[string][]string) error {
	var it BlockIterator
	it.Reset(block, lim)
	fields, size := 0, 0
	for it.Next() {
		_, v := it.Field()
		fields++
		size += len(v)
	}
	if err := it.Err(); err != nil {
		return err
	}
	if fields == 0 {
		return nil
	}
	var sb strings.Builder
	sb.Grow(size)
	for it.Reset(block, lim); it.Next(); {
		_, v := it.Field()
		sb.Write(v)
	}
	all := sb.String()
	backing := make([]string, fields)
	var (
		buf     [255]byte
		prev    []byte // wire name of the previous field
		prevKey string // its key in h
		run     = -1   // start in backing of prevKey's values when this call created its entry, else -1
	)
	off, i := 0, 0
	for it.Reset(block, lim); it.Next(); i++ {
		name, v := it.Field()
		val := all[off : off+len(v)]
		off += len(v)
		backing[i] = val
		if i > 0 && string(name) == string(prev) {
			if run >= 0 {
				h[prevKey] = backing[run : i+1 : i+1]
			} else {
				h[prevKey] = append(h[prevKey], val)
			}
			continue
		}
		cn := canonical(&buf, name)
		key, known := knownName(cn)
		vs, exists := h[string(cn)]
		if !known {
			key = string(cn)
		}
		if exists {
			h[key] = append(vs, val)
			run = -1
		} else {
			h[key] = backing[i : i+1 : i+1]
			run = i
		}
		prev, prevKey = name, key
	}
	return nil
}
