// Opening a WSMUX/1 session: the WebSocket handshake of spec 2.1.

import { ErrorCode, SessionError } from "./errors.js";
import { SUBPROTOCOL, SessionOptions, WebSocketLike } from "./options.js";
import { Session } from "./session.js";

/** A WebSocket constructor: the browser's, or the ws package's (which takes options third). */
export type WebSocketConstructor = new (url: string, protocols: string[], options?: unknown) => WebSocketLike;

/** Options of connect(). */
export interface ConnectOptions extends SessionOptions {
  /** WebSocket implementation (default: globalThis.WebSocket). */
  WebSocket?: WebSocketConstructor;
  /** Third constructor argument (the ws package: { headers, maxPayload, ... }). */
  wsOptions?: Record<string, unknown>;
  /**
   * A bearer token sent the only way a browser can: as the subprotocol
   * base64url.bearer.authorization.k8s.io.TOKEN (as Kubernetes' apiserver accepts it).
   */
  token?: string;
  /** More subprotocols offered after wsmux.v1 (for example the stream protocol versions, see k8s.ts). */
  protocols?: string[];
  /** Gives up the handshake (default: no limit but the browser's). */
  signal?: AbortSignal;
}

/** The error of a failed handshake. A browser tells no HTTP status: status is 0 there. */
export class ConnectError extends SessionError {
  readonly httpStatus: number;
  constructor(message: string, httpStatus = 0, closeStatus = 0) {
    super(ErrorCode.CONNECT_ERROR, message, true, closeStatus);
    this.httpStatus = httpStatus;
  }
}

/** base64url without padding of the UTF-8 bytes of s. */
export function base64url(s: string): string {
  const b = new TextEncoder().encode(s);
  let bin = "";
  for (const c of b) bin += String.fromCharCode(c);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The subprotocol that carries a bearer token from a browser. */
export function bearerProtocol(token: string): string {
  return "base64url.bearer.authorization.k8s.io." + base64url(token);
}

/**
 * Opens a WebSocket to url offering wsmux.v1 and starts a client Session on
 * it. Rejects with ConnectError if the handshake fails or the server selects
 * another subprotocol (spec 2.1).
 */
export function connect(url: string, opts: ConnectOptions = {}): Promise<Session> {
  const WS = opts.WebSocket ?? (globalThis as unknown as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!WS) return Promise.reject(new ConnectError("no WebSocket implementation: pass opts.WebSocket (in Node, the ws package's)"));
  const protocols = [SUBPROTOCOL, ...(opts.protocols ?? [])];
  if (opts.token) protocols.push(bearerProtocol(opts.token));
  return new Promise<Session>((resolve, reject) => {
    let ws: WebSocketLike;
    try {
      ws = opts.wsOptions ? new WS(url, protocols, opts.wsOptions) : new WS(url, protocols);
    } catch (e) {
      reject(new ConnectError(`WebSocket ${url}: ${(e as Error).message}`));
      return;
    }
    ws.binaryType = "arraybuffer";
    let settled = false;
    let detail = "";
    let httpStatus = 0;
    const onAbort = () => {
      if (settled) return;
      settled = true;
      try {
        ws.close(1000);
      } catch {
        // closing already
      }
      reject(new ConnectError(`WebSocket ${url}: aborted`));
    };
    opts.signal?.addEventListener("abort", onAbort);
    // The ws package reports the HTTP status of a refused upgrade in its error message.
    ws.addEventListener("error", (ev) => {
      const m = (ev as { message?: string; error?: Error }).message ?? (ev as { error?: Error }).error?.message;
      if (m) {
        detail = m;
        const st = /Unexpected server response: (\d+)/.exec(m);
        if (st) httpStatus = Number(st[1]);
      }
    });
    ws.addEventListener("close", (ev) => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener("abort", onAbort);
      reject(new ConnectError(`WebSocket ${url}: handshake failed${detail ? ": " + detail : ""} (close ${ev.code})`, httpStatus, ev.code));
    });
    (ws as unknown as { addEventListener(t: "open", l: () => void): void }).addEventListener("open", () => {
      if (settled) return;
      settled = true;
      opts.signal?.removeEventListener("abort", onAbort);
      if (ws.protocol !== SUBPROTOCOL) {
        try {
          ws.close(1002);
        } catch {
          ws.close(1000);
        }
        reject(new ConnectError(`WebSocket ${url}: the server selected subprotocol ${JSON.stringify(ws.protocol)}, not ${SUBPROTOCOL}`));
        return;
      }
      resolve(new Session(ws, true, opts));
    });
  });
}
