// A WSMUX/1 session (spec sections 2, 6-11) over anything shaped like the
// standard WebSocket API: the browser's, or the ws package's in Node.

import { Budgets } from "./budget.js";
import { ErrorCode, ProtocolViolation, SessionError, StreamResetError, WsmuxError, codeName } from "./errors.js";
import { SessionFlow } from "./flow.js";
import {
  DEFAULT_SETTINGS,
  Flag,
  Frame,
  FrameType,
  HEADER_LEN,
  HeadersInit,
  HeaderFields,
  MAX_GOAWAY_DEBUG,
  MAX_RST_REASON,
  MAX_U31,
  Settings,
  decodeHeaderBlock,
  encodeHeaderBlock,
  encodeSettings,
  parseSettings,
  putHeader,
  toFields,
  walkMessage,
} from "./frame.js";
import { Liveness } from "./liveness.js";
import { SessionOptions, WebSocketLike, ownSettings } from "./options.js";
import { SendQueue } from "./sendqueue.js";
import { SettingsWait } from "./settingswait.js";
import { Slots } from "./slots.js";
import { Stream, StreamHost } from "./stream.js";
import { Part, closeStatus, enc, frameBytes, messageBytes, utf8Prefix } from "./wire.js";

/**
 * One WSMUX/1 session. Construct it with a WebSocket that has just opened
 * with subprotocol wsmux.v1 (connect() does that), as client or server.
 */
export class Session implements StreamHost {
  readonly isClient: boolean;
  /** This endpoint's settings as announced. */
  readonly settings: Settings;
  /** The peer's settings once its SETTINGS arrived. */
  peerSettings: Settings | null = null;
  /** Resolves when the session ended (rejects never): null for a graceful end, else the error. */
  readonly done: Promise<WsmuxError | null>;

  private readonly ws: WebSocketLike;
  private readonly opts: SessionOptions;
  private readonly now: () => number;
  private readonly slots: Slots;
  private readonly flow: SessionFlow;
  private readonly maxStreamWindow: number;
  private readonly out: SendQueue;
  private flushScheduled = false;
  private state: "open" | "draining" | "ended" = "open";
  private goAwaySent = false;
  private goAwayRecv = MAX_U31;
  private goAwayRecvSeen = false;
  private readonly settingsWait = new SettingsWait();
  private readonly liveness: Liveness;
  private resolveDone!: (e: WsmuxError | null) => void;
  private endError: WsmuxError | null = null;
  private readonly budgets: Budgets;
  /** Smoothed RTT of the session's PINGs in ms (0 before the first answer). */
  rttMs = 0;

  constructor(ws: WebSocketLike, isClient: boolean, opts: SessionOptions = {}) {
    this.ws = ws;
    this.isClient = isClient;
    this.opts = opts;
    this.now = opts.now ?? (() => Date.now());
    const s = (this.settings = ownSettings(opts));
    this.slots = new Slots(
      isClient,
      s.initialMaxStreams,
      () => !this.goAwaySent && this.state !== "ended",
      () => this.scheduleFlush(),
    );
    const maxWindow = (v: number | undefined, def: number, initial: number) => Math.min(Math.max(v ?? def, initial), MAX_U31);
    this.maxStreamWindow = maxWindow(opts.maxStreamWindow, 16 << 20, s.initialStreamWindow);
    this.flow = new SessionFlow(s.initialSessionWindow, maxWindow(opts.maxSessionWindow, 64 << 20, s.initialSessionWindow), this.now);
    const began = this.now();
    this.out = new SendQueue(ws, began);
    this.liveness = new Liveness(began, {
      now: this.now,
      sendPing: (arg) => this.queueCtrl(frameBytes(FrameType.PING, 0, 0, arg)),
      hasPeerSettings: () => this.peerSettings !== null,
      stuck: (t, ms) => this.out.stuck(t, ms),
      creditStalledSince: () => this.flow.stalledSince(),
      measured: (rtt) => (this.rttMs = this.rttMs === 0 ? rtt : (this.rttMs * 7 + rtt) / 8),
      fail: (e) => this.fail(e),
    });
    this.budgets = new Budgets(this.now);
    this.done = new Promise((res) => (this.resolveDone = res));
    const settingsPayload = encodeSettings(s); // throws EncodeError on a bad option
    ws.binaryType = "arraybuffer";
    ws.addEventListener("message", (ev) => this.onMessage(ev.data));
    ws.addEventListener("close", (ev) => this.onClose(ev.code, ev.reason));
    ws.addEventListener("error", () => {});
    // SETTINGS goes out at once, alone (6.1): a frame of the peer's may arrive in this same task.
    ws.send(frameBytes(FrameType.SETTINGS, 0, 0, 0, settingsPayload));
    const st = opts.settingsTimeoutMs ?? 5000;
    this.settingsWait.start(st, () => {
      if (!this.peerSettings) this.fail(new ProtocolViolation(ErrorCode.SETTINGS_TIMEOUT, `no SETTINGS from the peer within ${st} ms`));
    });
    this.liveness.start(opts);
  }

  /** Maximum DATA payload this endpoint sends (the peer's MAX_DATA_PAYLOAD). */
  get maxSendPayload(): number {
    return (this.peerSettings ?? DEFAULT_SETTINGS).maxDataPayload;
  }

  /** Number of live streams. */
  get numStreams(): number {
    return this.slots.streams.size;
  }

  /** The error that ended the session, if it ended with one. */
  get error(): WsmuxError | null {
    return this.endError;
  }

  // --- public API ---------------------------------------------------------

  /**
   * Opens a stream with headers (spec 7.2), waiting for the peer's SETTINGS
   * and for stream credit (MAX_STREAMS). Returns at once after the SYN is
   * queued (optimistic open): stream.accepted tells the peer's answer.
   * fin: open half-closed (the stream carries no bytes from here).
   */
  async open(headers?: HeadersInit, opts: { fin?: boolean } = {}): Promise<Stream> {
    const fields = toFields(headers);
    await this.waitSettings();
    for (;;) {
      this.checkCanOpen();
      if (this.slots.hasCredit()) break;
      await this.slots.waitCredit();
    }
    const block = encodeHeaderBlock(fields, this.peerSettings!.maxHeaderBytes);
    const id = this.slots.takeId();
    const st = new Stream(this, id, true, fields, this.peerSettings!.initialStreamWindow, this.settings.initialStreamWindow, this.maxStreamWindow, this.now());
    this.slots.streams.set(id, st);
    this.queueOrdered(frameBytes(FrameType.HEADERS, Flag.SYN | (opts.fin ? Flag.FIN : 0), id, 0, block));
    if (opts.fin) {
      st.sendDone = true;
      await st.writable.close().catch(() => {});
    }
    return st;
  }

  /** The next stream the peer opened; rejects once the session ended. */
  accept(): Promise<Stream> {
    const st = this.slots.shift();
    if (st) return Promise.resolve(st);
    if (this.state === "ended") return Promise.reject(this.endError ?? new SessionError(ErrorCode.NO_ERROR, "session closed"));
    return this.slots.waitAccept();
  }

  /** Streams the peer opens, as an async iterator (ends with the session). */
  async *[Symbol.asyncIterator](): AsyncGenerator<Stream> {
    for (;;) {
      try {
        yield await this.accept();
      } catch {
        return;
      }
    }
  }

  /** Sends a PING and resolves with the round-trip time in ms (spec 4.6, 9.1). */
  ping(): Promise<number> {
    if (this.state === "ended") return Promise.reject(this.endError ?? new SessionError(ErrorCode.NO_ERROR, "session closed"));
    return this.liveness.ping();
  }

  /** Sends GOAWAY(code) (spec 9.4): the peer opens no more streams; those open go on. */
  goAway(code: number = ErrorCode.NO_ERROR, debug = ""): void {
    if (this.state === "ended") return;
    this.goAwaySent = true;
    this.queueCtrl(frameBytes(FrameType.GOAWAY, 0, this.slots.peerHighest, code, utf8Prefix(debug, MAX_GOAWAY_DEBUG)));
    if (this.state === "open") this.state = "draining";
    this.maybeFinishDrain();
  }

  /**
   * Graceful close (spec 9.4): GOAWAY(NO_ERROR), streams finish within the
   * drain timeout (then they are reset), then the WebSocket closes with 1000.
   */
  async close(): Promise<void> {
    if (this.state === "ended") return;
    this.goAway(ErrorCode.NO_ERROR);
    const ms = this.opts.drainTimeoutMs ?? 30000;
    const t = setTimeout(() => this.end(null, 1000, true), ms);
    await this.done;
    clearTimeout(t);
  }

  /** Ends the session at once with code (GOAWAY then WebSocket close, spec 9.5). */
  abort(code: number = ErrorCode.CANCEL, debug = "aborted by the application"): void {
    this.fail(new ProtocolViolation(code, debug));
  }

  // --- StreamHost ---------------------------------------------------------

  /** @internal */
  sessionSendCredit(): number {
    return this.flow.sendCredit;
  }

  /** @internal */
  waitSessionCredit(): Promise<void> {
    if (this.state === "ended") return Promise.resolve();
    return this.flow.waitCredit();
  }

  /** @internal */
  sendData(st: Stream, chunk: Uint8Array, fin: boolean): void {
    if (this.state === "ended") return;
    this.flow.sendCredit -= chunk.length;
    if (chunk.length === 0) {
      this.queueOrdered(frameBytes(FrameType.DATA, fin ? Flag.FIN : 0, st.id, 0));
      return;
    }
    // The view is copied into the message by flush(), which the writer calls before its write resolves.
    const h = new Uint8Array(HEADER_LEN);
    putHeader(h, 0, FrameType.DATA, fin ? Flag.FIN : 0, st.id, 0, chunk.length);
    this.queueOrdered({ h, p: chunk, length: HEADER_LEN + chunk.length });
  }

  /** @internal */
  sendReset(st: Stream, code: number, reason: string): void {
    if (this.state === "ended") return;
    this.queueOrdered(frameBytes(FrameType.RST_STREAM, 0, st.id, code, utf8Prefix(reason, MAX_RST_REASON)));
  }

  /** @internal */
  sendStopSending(st: Stream, code: number): void {
    if (this.state === "ended") return;
    this.queueOrdered(frameBytes(FrameType.STOP_SENDING, 0, st.id, code));
  }

  /**
   * @internal Bytes of st read by the application (read) or discarded: credit
   * goes back (spec 8.4), and windows the application keeps up with grow.
   */
  consumed(st: Stream | null, n: number, read = false): void {
    if (this.state === "ended" || n === 0) return;
    const now = this.now();
    const rtt = read ? this.rttMs : 0;
    if (st && !st.recvDone && !st.ended && this.slots.streams.get(st.id) === st) {
      const d = st.rwin.consume(n, now, rtt);
      if (d > 0) {
        this.queueCtrl(frameBytes(FrameType.WINDOW_UPDATE, 0, st.id, d));
        st.recvAvail += d;
      }
      if (st.rwin.window > this.settings.initialStreamWindow) this.creditSession(this.flow.follow(st.rwin.window));
    }
    this.creditSession(this.flow.consume(n, now, rtt));
  }

  private creditSession(d: number): void {
    if (d > 0) this.queueCtrl(frameBytes(FrameType.WINDOW_UPDATE, 0, 0, d));
  }

  /** @internal A stream ended both ways or was reset: forget it, give its slot back. */
  streamEnded(st: Stream): void {
    this.slots.remove(st);
    this.maybeFinishDrain();
  }

  // --- sending ------------------------------------------------------------

  private queueCtrl(b: Part): void {
    if (this.state === "ended") return;
    this.out.pushCtrl(b);
    this.scheduleFlush();
  }

  private queueOrdered(b: Part): void {
    if (this.state === "ended") return;
    this.out.pushOrdered(b);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => this.flush());
  }

  /** @internal Sends everything queued now, in as few messages as the peer's MAX_MESSAGE_SIZE allows. */
  flush(): void {
    this.flushScheduled = false;
    if (this.state === "ended") return;
    if (this.slots.maxStreamsDirty && !this.goAwaySent) this.out.pushCtrl(frameBytes(FrameType.MAX_STREAMS, 0, 0, this.slots.peerCredit));
    this.slots.maxStreamsDirty = false;
    if (this.out.empty) return;
    const failed = this.out.write((this.peerSettings ?? DEFAULT_SETTINGS).maxMessageSize);
    if (failed) {
      this.end(new SessionError(ErrorCode.INTERNAL_ERROR, `WebSocket send failed: ${(failed.thrown as Error).message}`), 1011, false);
      return;
    }
    this.liveness.sent();
  }

  // --- receiving ----------------------------------------------------------

  private onMessage(data: unknown): void {
    if (this.state === "ended") return;
    this.liveness.received();
    if (typeof data === "string") {
      this.fail(new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, "text WebSocket message"), 1003);
      return;
    }
    const msg = messageBytes(data);
    if (!msg) {
      this.fail(new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, "unexpected WebSocket message type"));
      return;
    }
    if (msg.length > this.settings.maxMessageSize) {
      this.fail(new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, `message of ${msg.length} bytes over MAX_MESSAGE_SIZE`), 1009);
      return;
    }
    try {
      walkMessage(msg, this.settings, (f) => {
        if (this.state === "ended") return;
        this.onFrame(f);
      });
    } catch (e) {
      if (e instanceof ProtocolViolation) this.fail(e);
      else this.fail(new ProtocolViolation(ErrorCode.INTERNAL_ERROR, `internal error: ${(e as Error).message}`));
    }
  }

  private onFrame(f: Frame): void {
    if (!this.peerSettings) {
      if (f.type !== FrameType.SETTINGS) throw new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, "first frame is not SETTINGS");
      this.onSettings(f);
      return;
    }
    switch (f.type) {
      case FrameType.SETTINGS:
        throw new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, "second SETTINGS");
      case FrameType.DATA:
        return this.onData(f);
      case FrameType.HEADERS:
        return this.onHeaders(f);
      case FrameType.WINDOW_UPDATE:
        return this.onWindowUpdate(f);
      case FrameType.RST_STREAM:
        return this.onReset(f);
      case FrameType.STOP_SENDING: {
        const st = this.slots.lookup(f, "STOP_SENDING");
        if (!st || st.sendDone) return this.budgets.useless("STOP_SENDING on a finished send side");
        st.stopSending(f.arg);
        return;
      }
      case FrameType.PING:
        return this.onPing(f);
      case FrameType.GOAWAY:
        return this.onGoAway(f);
      case FrameType.MAX_STREAMS:
        if (f.arg <= this.slots.ownCredit) return this.budgets.useless("MAX_STREAMS not above the credit");
        this.slots.ownCredit = f.arg;
        this.slots.wakeOpeners();
        return;
    }
  }

  private onSettings(f: Frame): void {
    const p = parseSettings(f.payload);
    this.peerSettings = p;
    this.flow.sendCredit = p.initialSessionWindow;
    this.slots.ownCredit = p.initialMaxStreams;
    this.settingsWait.arrived();
    // Window growth needs an RTT: one PING now measures it.
    if (this.maxStreamWindow > this.settings.initialStreamWindow) this.ping().catch(() => {});
  }

  private onData(f: Frame): void {
    const n = f.payload.length;
    // The order of checks (7.8, 8.3): an idle stream, then the session
    // window, then (on a live stream) its window, then DATA after FIN.
    const st = this.slots.lookup(f, "DATA");
    this.flow.receive(n);
    if (!st) {
      this.consumed(null, n); // a closed stream: discarded, credited back (7.8)
      return;
    }
    if (n > st.recvAvail) throw new ProtocolViolation(ErrorCode.FLOW_CONTROL_ERROR, `DATA of ${n} bytes beyond the window of stream ${st.id}`);
    st.recvAvail -= n;
    if (st.recvDone) {
      // DATA after FIN: a stream error STREAM_CLOSED (7.5).
      this.budgets.resetHit("DATA after FIN");
      this.consumed(null, n);
      st.reset(ErrorCode.STREAM_CLOSED, "DATA after FIN");
      return;
    }
    if (st.local) st.markAccepted([]);
    if (n > 0) st.push(f.payload); // a view of a message buffer nobody else writes
    if (f.flags & Flag.FIN) st.fin();
  }

  private onHeaders(f: Frame): void {
    const fields = decodeHeaderBlock(f.payload, this.settings.maxHeaderBytes);
    if (f.flags & Flag.SYN) return this.onSyn(f, fields);
    const st = this.slots.lookup(f, "HEADERS");
    if (f.flags & Flag.ACK) {
      if (!this.slots.isOwn(f.streamId)) throw new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, `ACK for stream ${f.streamId} the peer opened`);
      if (!st) return; // reset before the answer came (7.2)
      if (st.ackReceived) throw new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, `second ACK for stream ${f.streamId}`);
      st.ackReceived = true;
      st.markAccepted(fields);
      if (f.flags & Flag.FIN && !st.recvDone) st.fin();
      return;
    }
    if (!st) return this.budgets.useless("HEADERS on a closed stream");
    if (st.recvDone) return this.budgets.useless("HEADERS after the peer's FIN");
    if (f.flags & Flag.FIN) {
      if (st.local) st.markAccepted([]);
      st.fin();
      return;
    }
    this.budgets.useless("HEADERS metadata");
  }

  private onSyn(f: Frame, fields: HeaderFields): void {
    const id = f.streamId;
    this.slots.admit(id);
    const refuse = (code: number, why: string) => {
      this.queueOrdered(frameBytes(FrameType.RST_STREAM, 0, id, code, enc.encode(why)));
    };
    if (this.goAwaySent || this.state !== "open") {
      refuse(ErrorCode.REFUSED_STREAM, "going away");
      return;
    }
    const backlogMax = this.opts.acceptBacklog ?? 64;
    if (!this.opts.onStream && this.slots.backlogFull(backlogMax)) {
      // Its slot comes back only as a stream leaves the backlog (7.3):
      // refusals cannot outpace accept(), and are not counted as resets.
      refuse(ErrorCode.REFUSED_STREAM, "accept backlog full");
      this.slots.owe();
      return;
    }
    const st = new Stream(this, id, false, fields, this.peerSettings!.initialStreamWindow, this.settings.initialStreamWindow, this.maxStreamWindow, this.now());
    this.slots.streams.set(id, st);
    this.queueOrdered(frameBytes(FrameType.HEADERS, Flag.ACK, id, 0));
    if (f.flags & Flag.FIN) st.fin();
    if (this.opts.onStream) {
      st.taken = true;
      this.opts.onStream(st);
      return;
    }
    this.slots.deliver(st);
  }

  private onWindowUpdate(f: Frame): void {
    if (f.streamId === 0) return this.flow.addCredit(f.arg);
    const st = this.slots.lookup(f, "WINDOW_UPDATE");
    if (!st) return this.budgets.useless("WINDOW_UPDATE on a closed stream");
    if (st.sendCredit + f.arg > MAX_U31) throw new ProtocolViolation(ErrorCode.FLOW_CONTROL_ERROR, `credit of stream ${st.id} over 2^31-1`);
    st.addCredit(f.arg);
  }

  private onReset(f: Frame): void {
    const st = this.slots.lookup(f, "RST_STREAM");
    if (!st) return this.budgets.useless("RST_STREAM on a closed stream");
    if (!st.local && this.now() - st.openedAt < 1000 && st.exchanged < 1024) this.budgets.resetHit("stream reset right after it opened");
    const reason = new TextDecoder().decode(f.payload);
    const what = st.local && f.arg === ErrorCode.REFUSED_STREAM && !st.ackReceived ? "refused" : "reset by the peer";
    st.terminate(new StreamResetError(st.id, f.arg, `stream ${st.id} ${what} (${codeName(f.arg)})${reason ? ": " + reason : ""}`, true), false);
  }

  private onPing(f: Frame): void {
    if (f.flags & Flag.ACK) {
      if (!this.liveness.pong(f.arg)) this.budgets.useless("unsolicited PING ACK");
      return;
    }
    this.budgets.pingHit();
    this.queueCtrl(frameBytes(FrameType.PING, Flag.ACK, 0, f.arg));
  }

  private onGoAway(f: Frame): void {
    const debug = new TextDecoder().decode(f.payload);
    if (f.arg !== ErrorCode.NO_ERROR) {
      // Only NO_ERROR drains (9.4): any other code ends the session at once,
      // with no frame of ours, and a close with the code's status (10.2).
      const status = closeStatus(f.arg);
      this.end(new SessionError(f.arg, `the peer ended the session: GOAWAY ${codeName(f.arg)}${debug ? ": " + debug : ""}`, true, status), status, false);
      return;
    }
    if (this.goAwayRecvSeen && f.streamId >= this.goAwayRecv) return this.budgets.useless("GOAWAY that lowers nothing");
    this.goAwayRecvSeen = true;
    this.goAwayRecv = Math.min(this.goAwayRecv, f.streamId);
    for (const st of [...this.slots.streams.values()])
      if (st.local && st.id > this.goAwayRecv)
        st.terminate(new StreamResetError(st.id, ErrorCode.REFUSED_STREAM, `stream ${st.id} not processed: the peer is going away (retry on a new session)`, true), false);
    if (this.state === "open") this.state = "draining";
    this.slots.wakeOpeners();
    this.maybeFinishDrain();
  }

  private checkCanOpen(): void {
    if (this.state === "ended") throw this.endError ?? new SessionError(ErrorCode.NO_ERROR, "session closed");
    if (this.goAwayRecvSeen) throw new SessionError(ErrorCode.REFUSED_STREAM, "the peer sent GOAWAY: open the stream on a new session", true);
    if (this.goAwaySent) throw new SessionError(ErrorCode.REFUSED_STREAM, "this session is closing: open the stream on a new session");
  }

  private waitSettings(): Promise<void> {
    if (this.peerSettings) return Promise.resolve();
    if (this.state === "ended") return Promise.reject(this.endError ?? new SessionError(ErrorCode.NO_ERROR, "session closed"));
    return this.settingsWait.wait();
  }

  private maybeFinishDrain(): void {
    if (this.state !== "draining" || this.slots.streams.size > 0) return;
    // Nothing left: the endpoint with nothing more to send closes with 1000 (9.4).
    this.end(null, 1000, true);
  }

  private onClose(code: number, reason: string): void {
    if (this.state === "ended") return;
    const graceful = code === 1000 || code === 1001 || code === 1005;
    this.end(
      graceful ? null : new SessionError(ErrorCode.PROTOCOL_ERROR, `WebSocket closed with ${code}${reason ? " (" + reason + ")" : ""}`, true, code),
      0,
      false,
      code,
    );
  }

  // --- ending -------------------------------------------------------------

  /** Session error (9.5): GOAWAY(code) as the last frame, then the close. */
  private fail(e: ProtocolViolation, status = closeStatus(e.code)): void {
    if (this.state === "ended") return;
    this.out.clear();
    this.slots.maxStreamsDirty = false;
    try {
      this.ws.send(frameBytes(FrameType.GOAWAY, 0, this.slots.peerHighest, e.code, utf8Prefix(e.message, MAX_GOAWAY_DEBUG)));
    } catch {
      // the connection is gone already
    }
    this.end(new SessionError(e.code, e.message, false, status), status, false);
  }

  private end(err: WsmuxError | null, status: number, flush: boolean, remoteStatus = 0): void {
    if (this.state === "ended") return;
    if (flush) this.flush();
    this.state = "ended";
    this.endError = err;
    const streamErr = err ?? new SessionError(ErrorCode.CANCEL, remoteStatus ? `the session closed (WebSocket close ${remoteStatus})` : "the session closed", remoteStatus !== 0);
    this.slots.close(streamErr);
    this.settingsWait.close(streamErr);
    this.liveness.close(streamErr);
    this.slots.wakeOpeners();
    this.flow.wake();
    if (status) {
      try {
        this.ws.close(status);
      } catch {
        // A browser allows only 1000 and 3000-4999 from scripts.
        try {
          this.ws.close(1000);
        } catch {
          // already closing
        }
      }
    }
    this.resolveDone(err);
  }
}
