// Error codes of WSMUX/1 (docs/spec/wsmux-v1.md section 10) and the typed
// errors this package raises.

/** Error codes of spec section 10.1; values match HTTP/2 where the meaning is the same. */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  STREAM_LIMIT_ERROR: 0x10,
  HEADER_TOO_LARGE: 0x11,
  IDLE_TIMEOUT: 0x12,
  KEEPALIVE_TIMEOUT: 0x13,
  STALL_TIMEOUT: 0x14,
  MEMORY_LIMIT: 0x15,
} as const;

export type ErrorCodeName = keyof typeof ErrorCode;

/** The spec's name of a code, or "APPLICATION_0x1000" / "UNKNOWN_0x.." for others. */
export function codeName(code: number): string {
  for (const [k, v] of Object.entries(ErrorCode)) if (v === code) return k;
  if (code >= 0x1000 && code <= 0xffff) return `APPLICATION_0x${code.toString(16)}`;
  return `UNKNOWN_0x${code.toString(16)}`;
}

/** Base class of every error this package raises: code is a spec code (10.1). */
export class WsmuxError extends Error {
  /** The spec's error code. */
  readonly code: number;
  /** The code's spec name (PROTOCOL_ERROR...). */
  readonly codeName: string;
  /** True when the peer sent the code, false when this endpoint detected it. */
  readonly remote: boolean;
  constructor(code: number, message: string, remote = false) {
    super(message);
    this.code = code;
    this.codeName = codeName(code);
    this.remote = remote;
    this.name = new.target.name;
  }
}

/**
 * A frame or message broke a rule of spec sections 2-6 (decoding) or of the
 * session state (7-11): the session ends with GOAWAY(code).
 */
export class ProtocolViolation extends WsmuxError {}

/** The session ended: by GOAWAY with an error code, a WebSocket close, or locally. */
export class SessionError extends WsmuxError {
  /** WebSocket close status when the session ended with a close (0 if unknown). */
  readonly closeStatus: number;
  constructor(code: number, message: string, remote = false, closeStatus = 0) {
    super(code, message, remote);
    this.closeStatus = closeStatus;
  }
}

/** A stream was reset (RST_STREAM) by either side, or refused (REFUSED_STREAM). */
export class StreamResetError extends WsmuxError {
  readonly streamId: number;
  constructor(streamId: number, code: number, message: string, remote: boolean) {
    super(code, message, remote);
    this.streamId = streamId;
  }
}

/** The peer sent STOP_SENDING: writes fail with its code (spec 7.7). */
export class StopSendingError extends WsmuxError {
  readonly streamId: number;
  constructor(streamId: number, code: number) {
    super(code, `stream ${streamId}: the peer stopped reading (STOP_SENDING ${codeName(code)})`, true);
    this.streamId = streamId;
  }
}

/** An argument the application passed breaks a rule the encoder enforces. */
export class EncodeError extends WsmuxError {}
