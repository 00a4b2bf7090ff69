// What a Session runs over and how it is set up: the subprotocol, the part of
// the WebSocket API it uses, and its options.

import { DEFAULT_SETTINGS, Settings } from "./frame.js";
import type { Stream } from "./stream.js";

/** The subprotocol of WSMUX/1 (spec 2.1). */
export const SUBPROTOCOL = "wsmux.v1";

/** The part of the WebSocket API a Session uses (browsers' WebSocket and the ws package both fit). */
export interface WebSocketLike {
  binaryType: string;
  readonly protocol: string;
  readonly readyState: number;
  /** Bytes queued by send() and not yet handed to the network (browsers and ws have it; optional). */
  readonly bufferedAmount?: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "message", l: (ev: { data: unknown }) => void): void;
  addEventListener(type: "close", l: (ev: { code: number; reason: string }) => void): void;
  addEventListener(type: "error", l: (ev: unknown) => void): void;
}

/** Options of a Session: its own settings (spec 6.2), timers and budgets. */
export interface SessionOptions extends Partial<Omit<Settings, "features">> {
  /** Peer's SETTINGS must arrive within this (spec 6.1; default 5000 ms). */
  settingsTimeoutMs?: number;
  /** PING after this much silence on the send side (9.2; default 15000 ms; 0: never). */
  keepaliveMs?: number;
  /** End the session when nothing at all arrived for this long (9.2; default 45000 ms; 0: never). */
  keepaliveTimeoutMs?: number;
  /**
   * End the session with STALL_TIMEOUT when a write has waited this long for
   * session credit without a session WINDOW_UPDATE from the peer (9.6: a
   * peer that never reads; default 120000 ms; 0: never).
   */
  stallTimeoutMs?: number;
  /**
   * End the session with STALL_TIMEOUT when the WebSocket's send buffer
   * (bufferedAmount) has let no byte out for this long (9.6: a write to the
   * connection made no progress; default 30000 ms; 0: never).
   */
  writeTimeoutMs?: number;
  /** A graceful close() waits this long for streams to end (9.4; default 30000 ms). */
  drainTimeoutMs?: number;
  /** Streams the peer opened wait here for accept(); more are refused (7.2; default 64). */
  acceptBacklog?: number;
  /**
   * A stream's receive window grows from initialStreamWindow up to this while
   * the application keeps up with the data (doubling when a window's worth is
   * read in about an RTT, the Go library's rule); default 16 MiB, and
   * initialStreamWindow or less turns growth off.
   */
  maxStreamWindow?: number;
  /** The same for the session's window (from initialSessionWindow; default 64 MiB). It grows to at least twice the largest stream window. */
  maxSessionWindow?: number;
  /** Called with every stream the peer opens, instead of queueing it for accept(). */
  onStream?: (s: Stream) => void;
  /** Clock in ms (tests). */
  now?: () => number;
}

/** @internal This endpoint's settings (spec 6.2): the defaults, with those opts sets. */
export function ownSettings(opts: SessionOptions): Settings {
  const s: Settings = { ...DEFAULT_SETTINGS };
  for (const k of Object.keys(DEFAULT_SETTINGS) as Array<keyof Settings>) {
    const v = (opts as Record<string, unknown>)[k];
    if (typeof v === "number") (s as unknown as Record<string, number>)[k] = v;
  }
  if (opts.keepaliveHintMs !== undefined) s.keepaliveHintMs = opts.keepaliveHintMs;
  return s;
}
