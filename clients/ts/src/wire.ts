// Helpers of the session's WebSocket messages: the queued-part type, whole
// frames as bytes, UTF-8 text cut to a field's limit, the WebSocket close
// status of an error code (spec 10.2), and the bytes of a message received
// (2.3). Internal: index.ts exports none of it.

import { ErrorCode } from "./errors.js";
import { HEADER_LEN, putHeader } from "./frame.js";

/** A frame queued for sending: encoded bytes, or a DATA header and a view of the application's bytes. */
export type Part = Uint8Array | { h: Uint8Array; p: Uint8Array; length: number };

export const closeStatus = (code: number): number => {
  switch (code) {
    case ErrorCode.NO_ERROR:
    case ErrorCode.IDLE_TIMEOUT:
      return 1000;
    case ErrorCode.KEEPALIVE_TIMEOUT:
    case ErrorCode.SETTINGS_TIMEOUT:
    case ErrorCode.STALL_TIMEOUT:
      return 1001;
    case ErrorCode.ENHANCE_YOUR_CALM:
    case ErrorCode.STREAM_LIMIT_ERROR:
    case ErrorCode.HEADER_TOO_LARGE:
    case ErrorCode.MEMORY_LIMIT:
      return 1008;
    case ErrorCode.INTERNAL_ERROR:
      return 1011;
    default:
      return 1002;
  }
};

export const enc = new TextEncoder();

/** UTF-8 bytes of s cut to at most max bytes on a character boundary. */
export function utf8Prefix(s: string, max: number): Uint8Array {
  let b = enc.encode(s);
  if (b.length <= max) return b;
  let n = max;
  while (n > 0 && (b[n] & 0xc0) === 0x80) n--;
  return b.subarray(0, n);
}

export function frameBytes(type: number, flags: number, id: number, arg: number, payload?: Uint8Array): Uint8Array {
  const len = payload ? payload.length : 0;
  const b = new Uint8Array(HEADER_LEN + len);
  putHeader(b, 0, type, flags, id, arg >>> 0, len);
  if (payload) b.set(payload, HEADER_LEN);
  return b;
}

/** The bytes of a binary message as the WebSocket delivers it (2.3), or null for another type. */
export function messageBytes(data: unknown): Uint8Array | null {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (!Array.isArray(data)) return null;
  // ws's "fragments" binary type: join.
  const msg = new Uint8Array(data.reduce((n: number, b: Uint8Array) => n + b.length, 0));
  let off = 0;
  for (const b of data as Uint8Array[]) {
    msg.set(b, off);
    off += b.length;
  }
  return msg;
}
