// The WSMUX/1 codec: frame headers (spec section 3), frame types (4), header
// blocks (5) and SETTINGS payloads (6). Stateless: every rule here is checked
// from one frame alone; the session (session.ts) adds the rules that need state.

import { ErrorCode, EncodeError, ProtocolViolation } from "./errors.js";

/** Frame types (spec section 4). */
export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  WINDOW_UPDATE: 0x2,
  RST_STREAM: 0x3,
  STOP_SENDING: 0x4,
  PING: 0x5,
  GOAWAY: 0x6,
  SETTINGS: 0x7,
  MAX_STREAMS: 0x8,
} as const;
export type FrameTypeName = keyof typeof FrameType;

/** Flag bits (spec 3.1). */
export const Flag = { FIN: 0x1, SYN: 0x2, ACK: 0x4 } as const;

/** Setting ids (spec 6.2). */
export const SettingId = {
  MAX_DATA_PAYLOAD: 0x1,
  MAX_HEADER_BYTES: 0x2,
  INITIAL_STREAM_WINDOW: 0x3,
  INITIAL_SESSION_WINDOW: 0x4,
  INITIAL_MAX_STREAMS: 0x5,
  MAX_MESSAGE_SIZE: 0x6,
  KEEPALIVE_HINT_MS: 0x7,
  FEATURES: 0x8,
} as const;

export const HEADER_LEN = 12;
export const MAX_U31 = 0x7fffffff;
/** Fixed limits of spec sections 3-5. */
export const MAX_RST_REASON = 128;
export const MAX_GOAWAY_DEBUG = 256;
export const MAX_SETTINGS_ENTRIES = 16;
export const MAX_HEADER_FIELDS = 64;
export const MAX_HEADER_NAME = 64;
export const MAX_HEADER_VALUE = 4096;

/** A header block: its fields in order (names repeat for multiple values). */
export type HeaderFields = Array<[string, string]>;

/** One decoded frame. payload is a view into the message (copy it to keep it). */
export interface Frame {
  type: number;
  flags: number;
  streamId: number;
  arg: number;
  payload: Uint8Array;
}

/** The receiver limits a decoder enforces (its own SETTINGS). */
export interface DecodeLimits {
  maxDataPayload: number;
  maxHeaderBytes: number;
}

export const DEFAULT_LIMITS: DecodeLimits = { maxDataPayload: 16384, maxHeaderBytes: 8192 };

const allowedFlags = [Flag.FIN, Flag.FIN | Flag.SYN | Flag.ACK, 0, 0, 0, Flag.ACK, 0, 0, 0];
// Maximum Length from the header alone (rule 6); DATA and HEADERS are bounded by settings.
const maxLength = [0xffff, 0xffff, 0, MAX_RST_REASON, 0, 0, MAX_GOAWAY_DEBUG, MAX_SETTINGS_ENTRIES * 6, 0];
const sessionOnly = (t: number) => t === FrameType.PING || t === FrameType.SETTINGS || t === FrameType.MAX_STREAMS;
const streamOnly = (t: number) =>
  t === FrameType.DATA || t === FrameType.HEADERS || t === FrameType.RST_STREAM || t === FrameType.STOP_SENDING;

function violation(code: number, msg: string): ProtocolViolation {
  return new ProtocolViolation(code, msg);
}

/**
 * Checks the rules of spec 3.2 that the 12-byte header alone decides, in the
 * spec's order; returns null or the violation.
 */
export function checkHeader(type: number, flags: number, rawId: number, arg: number, length: number): ProtocolViolation | null {
  if (type > FrameType.MAX_STREAMS) return violation(ErrorCode.PROTOCOL_ERROR, `unknown frame type 0x${type.toString(16)}`);
  if ((flags & ~allowedFlags[type]) !== 0)
    return violation(ErrorCode.PROTOCOL_ERROR, `flags 0x${flags.toString(16)} not defined for frame type ${type}`);
  if (rawId > MAX_U31) return violation(ErrorCode.PROTOCOL_ERROR, "reserved stream id bit set");
  if (sessionOnly(type) && rawId !== 0) return violation(ErrorCode.PROTOCOL_ERROR, `session frame type ${type} on stream ${rawId}`);
  if (streamOnly(type) && rawId === 0) return violation(ErrorCode.PROTOCOL_ERROR, `stream frame type ${type} on stream 0`);
  if ((type === FrameType.DATA || type === FrameType.HEADERS || type === FrameType.SETTINGS) && arg !== 0)
    return violation(ErrorCode.PROTOCOL_ERROR, `reserved Arg not zero on frame type ${type}`);
  if (length > maxLength[type]) return violation(ErrorCode.FRAME_SIZE_ERROR, `Length ${length} over the maximum of frame type ${type}`);
  switch (type) {
    case FrameType.DATA:
      if (length === 0 && (flags & Flag.FIN) === 0) return violation(ErrorCode.PROTOCOL_ERROR, "empty DATA without FIN");
      break;
    case FrameType.HEADERS:
      if ((flags & (Flag.SYN | Flag.ACK)) === (Flag.SYN | Flag.ACK)) return violation(ErrorCode.PROTOCOL_ERROR, "HEADERS with SYN and ACK");
      break;
    case FrameType.WINDOW_UPDATE:
      if (arg === 0) return violation(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE delta 0");
      if (arg > MAX_U31) return violation(ErrorCode.FLOW_CONTROL_ERROR, "WINDOW_UPDATE delta over 2^31-1");
      break;
    case FrameType.SETTINGS:
      if (length % 6 !== 0) return violation(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6");
      break;
    case FrameType.MAX_STREAMS:
      if (arg > MAX_U31) return violation(ErrorCode.PROTOCOL_ERROR, "MAX_STREAMS credit over 2^31-1");
      break;
  }
  return null;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });
const lenient = new TextDecoder("utf-8");
// Header values are UTF-8 text kept exactly: a leading U+FEFF is part of the value.
const utf8Value = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const enc = new TextEncoder();

function validUTF8(b: Uint8Array): boolean {
  try {
    utf8.decode(b);
    return true;
  } catch {
    return false;
  }
}

/** Checks a frame's payload (spec 3.2, after the header rules). */
export function checkPayload(f: Frame, limits: DecodeLimits): ProtocolViolation | null {
  switch (f.type) {
    case FrameType.DATA:
      if (f.payload.length > limits.maxDataPayload)
        return violation(ErrorCode.FRAME_SIZE_ERROR, `DATA payload ${f.payload.length} over MAX_DATA_PAYLOAD ${limits.maxDataPayload}`);
      break;
    case FrameType.HEADERS:
      try {
        decodeHeaderBlock(f.payload, limits.maxHeaderBytes);
      } catch (e) {
        return e as ProtocolViolation;
      }
      break;
    case FrameType.RST_STREAM:
      if (!validUTF8(f.payload)) return violation(ErrorCode.PROTOCOL_ERROR, "RST_STREAM reason not UTF-8");
      break;
    case FrameType.GOAWAY:
      if (!validUTF8(f.payload)) return violation(ErrorCode.PROTOCOL_ERROR, "GOAWAY debug text not UTF-8");
      break;
    case FrameType.SETTINGS:
      try {
        parseSettings(f.payload);
      } catch (e) {
        return e as ProtocolViolation;
      }
      break;
  }
  return null;
}

/**
 * Walks one WebSocket message (spec 3.3), calling onFrame for every valid
 * frame in order. Throws the first ProtocolViolation; frames before it have
 * been handed over, none after it.
 */
export function walkMessage(msg: Uint8Array, limits: DecodeLimits, onFrame: (f: Frame) => void): void {
  if (msg.length === 0) throw violation(ErrorCode.PROTOCOL_ERROR, "empty message");
  const dv = new DataView(msg.buffer, msg.byteOffset, msg.byteLength);
  let off = 0;
  while (off < msg.length) {
    if (msg.length - off < HEADER_LEN) throw violation(ErrorCode.FRAME_SIZE_ERROR, "short frame header");
    const type = msg[off];
    const flags = msg[off + 1];
    const length = dv.getUint16(off + 2);
    const rawId = dv.getUint32(off + 4);
    const arg = dv.getUint32(off + 8);
    const bad = checkHeader(type, flags, rawId, arg, length);
    if (bad) throw bad;
    const start = off + HEADER_LEN;
    if (start + length > msg.length) throw violation(ErrorCode.FRAME_SIZE_ERROR, "frame Length runs past the end of the message");
    const f: Frame = { type, flags, streamId: rawId, arg, payload: msg.subarray(start, start + length) };
    const badPayload = checkPayload(f, limits);
    if (badPayload) throw badPayload;
    onFrame(f);
    off = start + length;
  }
}

/** Decodes a single frame that must fill buf exactly (tests, tools). */
export function decodeFrame(buf: Uint8Array, limits: DecodeLimits = DEFAULT_LIMITS): Frame {
  const out: Frame[] = [];
  walkMessage(buf, limits, (f) => out.push(f));
  if (out.length !== 1) throw violation(ErrorCode.PROTOCOL_ERROR, `${out.length} frames, want 1`);
  return out[0];
}

/** Writes a frame header at off. */
export function putHeader(buf: Uint8Array, off: number, type: number, flags: number, streamId: number, arg: number, length: number): void {
  buf[off] = type;
  buf[off + 1] = flags;
  buf[off + 2] = length >>> 8;
  buf[off + 3] = length & 0xff;
  buf[off + 4] = streamId >>> 24;
  buf[off + 5] = (streamId >>> 16) & 0xff;
  buf[off + 6] = (streamId >>> 8) & 0xff;
  buf[off + 7] = streamId & 0xff;
  buf[off + 8] = arg >>> 24;
  buf[off + 9] = (arg >>> 16) & 0xff;
  buf[off + 10] = (arg >>> 8) & 0xff;
  buf[off + 11] = arg & 0xff;
}

/**
 * Encodes one frame after checking it against the same rules a receiver
 * with the given limits applies (so this package never sends what it would
 * reject). Throws EncodeError.
 */
export function encodeFrame(f: Frame, limits: DecodeLimits = DEFAULT_LIMITS): Uint8Array {
  const bad = checkHeader(f.type, f.flags, f.streamId, f.arg >>> 0, f.payload.length) ?? checkPayload(f, limits);
  if (f.payload.length > 0xffff) throw new EncodeError(ErrorCode.FRAME_SIZE_ERROR, "payload over 65535 bytes");
  if (bad) throw new EncodeError(bad.code, bad.message);
  const out = new Uint8Array(HEADER_LEN + f.payload.length);
  putHeader(out, 0, f.type, f.flags, f.streamId, f.arg >>> 0, f.payload.length);
  out.set(f.payload, HEADER_LEN);
  return out;
}

// RFC 9110 token characters, letters lower case (spec 5).
const tokenChar = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz") tokenChar[c.charCodeAt(0)] = 1;

/**
 * Decodes a header block (spec 5), checking its limits in the order of the
 * bytes: the field count at a field's first byte, then the name length, the
 * name, the value length, the value (no CR, LF, NUL; UTF-8). Throws
 * ProtocolViolation with HEADER_TOO_LARGE or PROTOCOL_ERROR.
 */
export function decodeHeaderBlock(b: Uint8Array, maxHeaderBytes = DEFAULT_LIMITS.maxHeaderBytes): HeaderFields {
  if (b.length > maxHeaderBytes) throw violation(ErrorCode.HEADER_TOO_LARGE, `header block of ${b.length} bytes over MAX_HEADER_BYTES ${maxHeaderBytes}`);
  const out: HeaderFields = [];
  let off = 0;
  while (off < b.length) {
    if (out.length === MAX_HEADER_FIELDS) throw violation(ErrorCode.HEADER_TOO_LARGE, `more than ${MAX_HEADER_FIELDS} header fields`);
    const nl = b[off++];
    if (nl === 0 || nl > MAX_HEADER_NAME) throw violation(ErrorCode.HEADER_TOO_LARGE, `header name of ${nl} bytes (1..${MAX_HEADER_NAME})`);
    if (off + nl > b.length) throw violation(ErrorCode.PROTOCOL_ERROR, "header block ends inside a name");
    for (let i = off; i < off + nl; i++)
      if (!tokenChar[b[i]]) throw violation(ErrorCode.PROTOCOL_ERROR, "header name not a lower-case token");
    const name = lenient.decode(b.subarray(off, off + nl));
    off += nl;
    if (off + 2 > b.length) throw violation(ErrorCode.PROTOCOL_ERROR, "header block ends inside a value length");
    const vl = (b[off] << 8) | b[off + 1];
    off += 2;
    if (vl > MAX_HEADER_VALUE) throw violation(ErrorCode.HEADER_TOO_LARGE, `header value of ${vl} bytes over ${MAX_HEADER_VALUE}`);
    if (off + vl > b.length) throw violation(ErrorCode.PROTOCOL_ERROR, "header block ends inside a value");
    for (let i = off; i < off + vl; i++) {
      const c = b[i];
      if (c === 0x0d || c === 0x0a || c === 0) throw violation(ErrorCode.PROTOCOL_ERROR, "header value holds CR, LF or NUL");
    }
    let value: string;
    try {
      value = utf8Value.decode(b.subarray(off, off + vl));
    } catch {
      throw violation(ErrorCode.PROTOCOL_ERROR, "header value is not UTF-8");
    }
    out.push([name, value]);
    off += vl;
  }
  return out;
}

/** Headers as an application passes them: fields in order, or a record (names sorted). */
export type HeadersInit = HeaderFields | Record<string, string | string[]>;

/** Normalizes headers to fields: names lower-cased; a record's names sorted (spec 5's canonical encoding). */
export function toFields(h: HeadersInit | undefined): HeaderFields {
  if (!h) return [];
  if (Array.isArray(h)) return h.map(([n, v]) => [n.toLowerCase(), v]);
  const out: HeaderFields = [];
  for (const n of Object.keys(h).sort((a, b) => (a.toLowerCase() < b.toLowerCase() ? -1 : 1))) {
    const v = h[n];
    for (const x of Array.isArray(v) ? v : [v]) out.push([n.toLowerCase(), x]);
  }
  return out;
}

/** Encodes a header block after checking every rule of spec 5. Throws EncodeError. */
export function encodeHeaderBlock(fields: HeaderFields, maxHeaderBytes = DEFAULT_LIMITS.maxHeaderBytes): Uint8Array {
  if (fields.length > MAX_HEADER_FIELDS) throw new EncodeError(ErrorCode.HEADER_TOO_LARGE, `more than ${MAX_HEADER_FIELDS} header fields`);
  const parts: Uint8Array[] = [];
  let size = 0;
  for (const [n, v] of fields) {
    const nb = enc.encode(n);
    const vb = enc.encode(v);
    if (nb.length === 0 || nb.length > MAX_HEADER_NAME) throw new EncodeError(ErrorCode.HEADER_TOO_LARGE, `header name ${JSON.stringify(n)}: 1..${MAX_HEADER_NAME} bytes`);
    for (const c of nb) if (!tokenChar[c]) throw new EncodeError(ErrorCode.PROTOCOL_ERROR, `header name ${JSON.stringify(n)} is not a lower-case token`);
    if (vb.length > MAX_HEADER_VALUE) throw new EncodeError(ErrorCode.HEADER_TOO_LARGE, `header ${n}: value over ${MAX_HEADER_VALUE} bytes`);
    for (const c of vb) if (c === 0x0d || c === 0x0a || c === 0) throw new EncodeError(ErrorCode.PROTOCOL_ERROR, `header ${n}: value holds CR, LF or NUL`);
    parts.push(nb, vb);
    size += 3 + nb.length + vb.length;
  }
  if (size > maxHeaderBytes) throw new EncodeError(ErrorCode.HEADER_TOO_LARGE, `header block of ${size} bytes over the peer's MAX_HEADER_BYTES ${maxHeaderBytes}`);
  const out = new Uint8Array(size);
  let off = 0;
  for (let i = 0; i < parts.length; i += 2) {
    const nb = parts[i], vb = parts[i + 1];
    out[off++] = nb.length;
    out.set(nb, off);
    off += nb.length;
    out[off++] = vb.length >>> 8;
    out[off++] = vb.length & 0xff;
    out.set(vb, off);
    off += vb.length;
  }
  return out;
}

/** Settings of one endpoint (spec 6.2), with the defaults filled in. */
export interface Settings {
  maxDataPayload: number;
  maxHeaderBytes: number;
  initialStreamWindow: number;
  initialSessionWindow: number;
  initialMaxStreams: number;
  maxMessageSize: number;
  keepaliveHintMs?: number;
  features: number;
}

export const DEFAULT_SETTINGS: Readonly<Settings> = Object.freeze({
  maxDataPayload: 16384,
  maxHeaderBytes: 8192,
  initialStreamWindow: 262144,
  initialSessionWindow: 1048576,
  initialMaxStreams: 100,
  maxMessageSize: 1048576,
  features: 0,
});

const ranges: Record<number, [keyof Settings, number, number]> = {
  [SettingId.MAX_DATA_PAYLOAD]: ["maxDataPayload", 4096, 65535],
  [SettingId.MAX_HEADER_BYTES]: ["maxHeaderBytes", 1024, 65535],
  [SettingId.INITIAL_STREAM_WINDOW]: ["initialStreamWindow", 0, MAX_U31],
  [SettingId.INITIAL_SESSION_WINDOW]: ["initialSessionWindow", 0, MAX_U31],
  [SettingId.INITIAL_MAX_STREAMS]: ["initialMaxStreams", 0, MAX_U31],
  [SettingId.MAX_MESSAGE_SIZE]: ["maxMessageSize", 65536, MAX_U31],
  [SettingId.KEEPALIVE_HINT_MS]: ["keepaliveHintMs", 0, 0xffffffff],
  [SettingId.FEATURES]: ["features", 0, 0xffffffff],
};

/** The entries of a SETTINGS payload in order, unknown ids included (no range checks). */
export function settingsEntries(p: Uint8Array): Array<[number, number]> {
  if (p.length % 6 !== 0) throw violation(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS length not a multiple of 6");
  if (p.length > MAX_SETTINGS_ENTRIES * 6) throw violation(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS over 16 entries");
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const out: Array<[number, number]> = [];
  for (let o = 0; o < p.length; o += 6) out.push([dv.getUint16(o), dv.getUint32(o + 2)]);
  return out;
}

/**
 * Parses a SETTINGS payload into Settings (defaults for absent ids), checking
 * ranges and duplicates (spec 6.2) and ignoring unknown ids (6.3).
 */
export function parseSettings(p: Uint8Array): Settings {
  const s: Settings = { ...DEFAULT_SETTINGS };
  const seen = new Set<number>();
  for (const [id, v] of settingsEntries(p)) {
    if (seen.has(id)) throw violation(ErrorCode.PROTOCOL_ERROR, `setting 0x${id.toString(16)} twice`);
    seen.add(id);
    const r = ranges[id];
    if (!r) continue;
    if (v < r[1] || v > r[2]) throw violation(ErrorCode.PROTOCOL_ERROR, `setting ${r[0]} = ${v} out of range ${r[1]}..${r[2]}`);
    (s as unknown as Record<string, number>)[r[0]] = v;
  }
  return s;
}

/** Encodes Settings as a SETTINGS payload: every value that differs from the default, plus the keepalive hint. */
export function encodeSettings(s: Settings): Uint8Array {
  const entries: Array<[number, number]> = [];
  for (const [id, [key, lo, hi]] of Object.entries(ranges)) {
    const v = s[key];
    if (v === undefined) continue;
    if (v < lo || v > hi || !Number.isInteger(v)) throw new EncodeError(ErrorCode.PROTOCOL_ERROR, `setting ${key} = ${v} out of range ${lo}..${hi}`);
    if (key !== "keepaliveHintMs" && v === DEFAULT_SETTINGS[key]) continue;
    entries.push([Number(id), v]);
  }
  const out = new Uint8Array(entries.length * 6);
  const dv = new DataView(out.buffer);
  entries.forEach(([id, v], i) => {
    dv.setUint16(i * 6, id);
    dv.setUint32(i * 6 + 2, v);
  });
  return out;
}

/** Encodes raw settings entries in order (tests and tools). */
export function encodeSettingsEntries(entries: Array<[number, number]>): Uint8Array {
  const out = new Uint8Array(entries.length * 6);
  const dv = new DataView(out.buffer);
  entries.forEach(([id, v], i) => {
    dv.setUint16(i * 6, id);
    dv.setUint32(i * 6 + 2, v);
  });
  return out;
}
