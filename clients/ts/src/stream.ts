// One WSMUX/1 stream (spec section 7) as a pair of WHATWG streams whose
// backpressure is the protocol's flow control (section 8): credit goes back
// to the peer only as the application reads, and a write waits for credit.

import { ErrorCode, StopSendingError, StreamResetError, WsmuxError, codeName } from "./errors.js";
import type { HeaderFields } from "./frame.js";
import { RecvWindow } from "./window.js";

/** What a Stream needs from its session (implemented by Session). */
export interface StreamHost {
  readonly maxSendPayload: number;
  sessionSendCredit(): number;
  waitSessionCredit(): Promise<void>;
  sendData(st: Stream, chunk: Uint8Array, fin: boolean): void;
  flush(): void;
  sendReset(st: Stream, code: number, reason: string): void;
  sendStopSending(st: Stream, code: number): void;
  /** n bytes of st left its buffer: read by the application (read) or discarded. */
  consumed(st: Stream, n: number, read: boolean): void;
  streamEnded(st: Stream): void;
}

const enc = new TextEncoder();

function noop() {}

/**
 * A bidirectional byte stream of a Session. readable yields the peer's bytes
 * and ends at its FIN; writable sends DATA and its close() sends FIN.
 */
export class Stream {
  /** Stream id (odd: opened by the client, even: by the server). */
  readonly id: number;
  /** True when this endpoint opened the stream. */
  readonly local: boolean;
  /** Headers of the SYN (the opener's stream headers). */
  readonly headers: HeaderFields;
  /** The peer's bytes; cancel() sends STOP_SENDING(CANCEL) (spec 7.7). */
  readonly readable: ReadableStream<Uint8Array>;
  /** Bytes to the peer; close() half-closes (FIN), abort() resets with CANCEL. */
  readonly writable: WritableStream<Uint8Array | ArrayBufferView | ArrayBuffer | string>;
  /** Resolves with the peer's reply headers when it accepted (ACK, or its DATA); rejects if refused or reset first. */
  readonly accepted: Promise<HeaderFields>;
  /** Resolves when both directions ended without a reset; rejects with the reset or session error. */
  readonly closed: Promise<void>;

  // Send side.
  /** @internal */ sendCredit: number;
  /** @internal */ sendDone = false;
  /** @internal */ stopCode: number | null = null;
  private creditWaiters: Array<() => void> = [];
  private wctl!: WritableStreamDefaultController;
  // Receive side.
  /** @internal */ recvAvail: number;
  /** @internal */ rwin: RecvWindow;
  /** @internal */ recvDone = false;
  /** @internal */ stopSent = false;
  /** @internal */ openedAt: number;
  /** @internal */ exchanged = 0;
  /** @internal */ ackReceived = false;
  /** @internal */ taken = false;
  private queue: Uint8Array[] = [];
  private queued = 0;
  private pullWaiter: (() => void) | null = null;
  private rctl!: ReadableStreamDefaultController<Uint8Array>;
  // End.
  /** @internal */ error: WsmuxError | null = null;
  /** @internal */ ended = false;
  private acceptedState: "pending" | "yes" | "no" = "pending";
  private resolveAccepted!: (h: HeaderFields) => void;
  private rejectAccepted!: (e: Error) => void;
  private resolveClosed!: () => void;
  private rejectClosed!: (e: Error) => void;

  /** @internal */
  constructor(
    private readonly host: StreamHost,
    id: number,
    local: boolean,
    headers: HeaderFields,
    sendCredit: number,
    recvWindow: number,
    maxRecvWindow: number,
    now: number,
  ) {
    this.id = id;
    this.local = local;
    this.headers = headers;
    this.sendCredit = sendCredit;
    this.recvAvail = recvWindow;
    this.rwin = new RecvWindow(recvWindow, maxRecvWindow);
    this.openedAt = now;
    this.accepted = new Promise<HeaderFields>((res, rej) => {
      this.resolveAccepted = res;
      this.rejectAccepted = rej;
    });
    this.accepted.catch(noop);
    this.closed = new Promise<void>((res, rej) => {
      this.resolveClosed = res;
      this.rejectClosed = rej;
    });
    this.closed.catch(noop);
    if (!local) this.acceptedState = "yes";
    this.readable = new ReadableStream<Uint8Array>(
      {
        start: (c) => {
          this.rctl = c;
        },
        pull: (c) => this.pull(c),
        cancel: () => this.cancelRead(ErrorCode.CANCEL),
      },
      { highWaterMark: 0 },
    );
    this.writable = new WritableStream<Uint8Array | ArrayBufferView | ArrayBuffer | string>({
      start: (c) => {
        this.wctl = c;
      },
      write: (chunk) => this.write(chunk),
      close: () => this.closeWrite(),
      abort: () => this.reset(ErrorCode.CANCEL),
    });
  }

  /** The first value of header name (lower case), or undefined. */
  header(name: string): string | undefined {
    name = name.toLowerCase();
    return this.headers.find(([n]) => n === name)?.[1];
  }

  /** Bytes received and not yet read by the application. */
  get buffered(): number {
    return this.queued;
  }

  /**
   * Resets both directions with code (default CANCEL) and an optional reason
   * (spec 7.6); bytes already written are sent first. Unread bytes are dropped.
   */
  reset(code: number = ErrorCode.CANCEL, reason = ""): void {
    if (this.ended) return;
    const err = new StreamResetError(this.id, code, `stream ${this.id} reset locally (${codeName(code)})${reason ? ": " + reason : ""}`, false);
    this.host.sendReset(this, code, reason);
    this.terminate(err, true);
  }

  /** Stops reading (STOP_SENDING, spec 7.7): the peer's writes fail, it sends FIN. Same as readable.cancel(). */
  stopReading(code: number = ErrorCode.CANCEL): void {
    this.cancelRead(code);
  }

  // --- receive side -------------------------------------------------------

  /** @internal A DATA payload (already counted against the windows). */
  push(b: Uint8Array): void {
    this.exchanged += b.length;
    if (this.stopSent || this.error) {
      this.host.consumed(this, b.length, false);
      return;
    }
    this.queue.push(b);
    this.queued += b.length;
    this.wakeReader();
  }

  /** @internal The peer's FIN. */
  fin(): void {
    this.recvDone = true;
    this.wakeReader();
    this.maybeEnd();
  }

  private wakeReader(): void {
    const w = this.pullWaiter;
    this.pullWaiter = null;
    w?.();
  }

  private pull(c: ReadableStreamDefaultController<Uint8Array>): Promise<void> | void {
    const b = this.queue.shift();
    if (b) {
      this.queued -= b.length;
      c.enqueue(b);
      this.host.consumed(this, b.length, true);
      return;
    }
    if (this.error) {
      c.error(this.error);
      return;
    }
    if (this.recvDone || this.stopSent) {
      c.close();
      return;
    }
    return new Promise<void>((res) => {
      this.pullWaiter = res;
    }).then(() => this.pull(c));
  }

  private cancelRead(code: number): void {
    if (this.stopSent || this.ended) return;
    this.stopSent = true;
    const n = this.queued;
    this.queue = [];
    this.queued = 0;
    if (n > 0) this.host.consumed(this, n, false);
    if (!this.recvDone) this.host.sendStopSending(this, code);
    this.wakeReader();
    this.maybeEnd();
  }

  // --- send side ----------------------------------------------------------

  /** @internal More stream credit (WINDOW_UPDATE). */
  addCredit(n: number): void {
    this.sendCredit += n;
    this.wakeWriters();
  }

  /** @internal Wakes writers waiting for stream or session credit. */
  wakeWriters(): void {
    const ws = this.creditWaiters;
    this.creditWaiters = [];
    for (const w of ws) w();
  }

  private async write(chunk: Uint8Array | ArrayBufferView | ArrayBuffer | string): Promise<void> {
    let b: Uint8Array;
    if (typeof chunk === "string") b = enc.encode(chunk);
    else if (chunk instanceof Uint8Array) b = chunk;
    else if (ArrayBuffer.isView(chunk)) b = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    else b = new Uint8Array(chunk);
    let off = 0;
    while (off < b.length) {
      this.checkWritable();
      const credit = Math.min(this.sendCredit, this.host.sessionSendCredit());
      if (credit <= 0) {
        this.host.flush();
        if (this.sendCredit <= 0) await new Promise<void>((res) => this.creditWaiters.push(res));
        else await this.host.waitSessionCredit();
        continue;
      }
      const n = Math.min(credit, this.host.maxSendPayload, b.length - off);
      this.sendCredit -= n;
      this.exchanged += n;
      this.host.sendData(this, b.subarray(off, off + n), false);
      off += n;
    }
    this.host.flush(); // the queued frames hold views of chunk: copy them out before the write resolves
  }

  private checkWritable(): void {
    if (this.error) throw this.error;
    if (this.stopCode !== null) throw new StopSendingError(this.id, this.stopCode);
    if (this.sendDone) throw new WsmuxError(ErrorCode.STREAM_CLOSED, `stream ${this.id}: write after close`);
  }

  private closeWrite(): void {
    if (this.error) throw this.error;
    if (this.sendDone) {
      this.maybeEnd();
      return;
    }
    this.sendDone = true;
    this.host.sendData(this, new Uint8Array(0), true);
    this.maybeEnd();
  }

  /** @internal The peer's STOP_SENDING: answered with FIN (spec 7.7). */
  stopSending(code: number): void {
    this.stopCode = code;
    this.sendDone = true;
    this.host.sendData(this, new Uint8Array(0), true);
    try {
      this.wctl.error(new StopSendingError(this.id, code));
    } catch {
      // already errored or closed
    }
    this.wakeWriters();
    this.maybeEnd();
  }

  // --- lifecycle ----------------------------------------------------------

  /** @internal The peer accepted (ACK, or DATA before it). */
  markAccepted(h: HeaderFields): void {
    if (this.acceptedState !== "pending") return;
    this.acceptedState = "yes";
    this.resolveAccepted(h);
  }

  /**
   * @internal Ends the stream with err: a reset either way or the session's
   * end. Data already received stays readable unless dropQueued (a local reset).
   */
  terminate(err: WsmuxError, dropQueued: boolean): void {
    if (this.ended) return;
    this.error = err;
    if (dropQueued && this.queued > 0) {
      const n = this.queued;
      this.queue = [];
      this.queued = 0;
      this.host.consumed(this, n, false);
    }
    if (this.acceptedState === "pending") {
      this.acceptedState = "no";
      this.rejectAccepted(err);
    }
    try {
      this.wctl.error(err);
    } catch {
      // already errored or closed
    }
    if (this.queued === 0) {
      try {
        this.rctl.error(err);
      } catch {
        // already closed
      }
    }
    this.wakeReader();
    this.wakeWriters();
    this.ended = true;
    this.rejectClosed(err);
    this.host.streamEnded(this);
  }

  private maybeEnd(): void {
    if (this.ended || !this.sendDone || !(this.recvDone || this.stopSent)) return;
    if (!this.recvDone) return; // STOP_SENDING sent: the peer's FIN still ends its direction
    this.ended = true;
    if (this.acceptedState === "pending") {
      this.acceptedState = "yes";
      this.resolveAccepted([]);
    }
    this.resolveClosed();
    this.host.streamEnded(this);
  }
}
