// The session's stream slots: the live streams by id, the stream ids of
// both endpoints (spec 7.1), the stream credit both ways (MAX_STREAMS, 7.3)
// and the streams the peer opened waiting for accept() (7.2). Internal:
// index.ts exports none of it.

import { ErrorCode, ProtocolViolation, SessionError, WsmuxError } from "./errors.js";
import { DEFAULT_SETTINGS, Frame, MAX_U31 } from "./frame.js";
import type { Stream } from "./stream.js";

/** @internal */
export class Slots {
  /** Live streams by id. */
  readonly streams = new Map<number, Stream>();
  /** Highest id of a stream the peer opened. */
  peerHighest = 0;
  /** Streams this endpoint may open (the peer's MAX_STREAMS). */
  ownCredit = DEFAULT_SETTINGS.initialMaxStreams;
  /** Streams the peer may open (this endpoint's MAX_STREAMS). */
  peerCredit: number;
  /** peerCredit grew since the last MAX_STREAMS. */
  maxStreamsDirty = false;
  private backlog: Stream[] = [];
  private acceptWaiters: Array<[(s: Stream) => void, (e: Error) => void]> = [];
  private nextId: number;
  /** Slots of streams refused for a full backlog, given back as streams leave it. */
  private owedSlots = 0;
  private openWaiters: Array<() => void> = [];
  /**
   * givesBack: whether slots still go back to the peer (not once this
   * endpoint sent GOAWAY or the session ended); slotBack: a slot went back,
   * a MAX_STREAMS is due.
   */
  constructor(
    private readonly isClient: boolean,
    peerCredit: number,
    private readonly givesBack: () => boolean,
    private readonly slotBack: () => void,
  ) {
    this.nextId = isClient ? 1 : 2;
    this.peerCredit = peerCredit;
  }

  // --- ids ----------------------------------------------------------------

  isOwn(id: number): boolean {
    return (id & 1) === (this.isClient ? 1 : 0);
  }

  private isIdle(id: number): boolean {
    return this.isOwn(id) ? id >= this.nextId : id > this.peerHighest;
  }

  /** The live stream f names; throws on an idle id; null for a closed one. */
  lookup(f: Frame, name: string): Stream | null {
    const st = this.streams.get(f.streamId);
    if (st) return st;
    if (this.isIdle(f.streamId)) throw new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, `${name} on idle stream ${f.streamId}`);
    return null;
  }

  /** A SYN of the peer's for stream id: its id and the peer's credit are checked (7.1, 7.3), and id is the peer's highest. */
  admit(id: number): void {
    if (this.isOwn(id)) throw new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, `SYN with this endpoint's parity (stream ${id})`);
    if (id <= this.peerHighest) throw new ProtocolViolation(ErrorCode.PROTOCOL_ERROR, `SYN for stream ${id} not above ${this.peerHighest}`);
    if ((id + 1) >> 1 > this.peerCredit) throw new ProtocolViolation(ErrorCode.STREAM_LIMIT_ERROR, `SYN for stream ${id} beyond the stream credit ${this.peerCredit}`);
    this.peerHighest = id;
  }

  // --- opening ------------------------------------------------------------

  /** True when the peer's credit lets this endpoint open a stream now; throws once its ids are used up. */
  hasCredit(): boolean {
    if (this.nextId > MAX_U31) throw new SessionError(ErrorCode.REFUSED_STREAM, "stream ids of this session are used up: open a new session");
    return (this.nextId + 1) >> 1 <= this.ownCredit;
  }

  /** Resolves at the next wakeOpeners(). */
  waitCredit(): Promise<void> {
    return new Promise<void>((res) => this.openWaiters.push(res));
  }

  wakeOpeners(): void {
    const ws = this.openWaiters;
    this.openWaiters = [];
    for (const w of ws) w();
  }

  /** The id of the next stream this endpoint opens. */
  takeId(): number {
    const id = this.nextId;
    this.nextId += 2;
    return id;
  }

  // --- accepting ----------------------------------------------------------

  /** The oldest stream of the backlog, taken by the application, if any. */
  shift(): Stream | undefined {
    const st = this.backlog.shift();
    if (st) this.take(st);
    return st;
  }

  /** The next stream deliver() hands over (rejected by close()). */
  waitAccept(): Promise<Stream> {
    return new Promise((res, rej) => this.acceptWaiters.push([res, rej]));
  }

  backlogFull(max: number): boolean {
    return this.backlog.length >= max;
  }

  /** A SYN was refused for a full backlog: its slot is owed. */
  owe(): void {
    this.owedSlots++;
  }

  /** A stream the peer opened: to a waiting accept(), or into the backlog. */
  deliver(st: Stream): void {
    const w = this.acceptWaiters.shift();
    if (w) {
      this.take(st);
      w[0](st);
    } else if (!st.ended) this.backlog.push(st);
    else this.take(st);
  }

  // --- slots going back ---------------------------------------------------

  /** st ended both ways or was reset: it leaves the table and its slot goes back. */
  remove(st: Stream): void {
    if (this.streams.get(st.id) === st) this.streams.delete(st.id);
    if (!st.local) {
      const i = this.backlog.indexOf(st);
      if (i >= 0) {
        // Reset before the application took it: it never reaches the application.
        this.backlog.splice(i, 1);
        this.returnSlot();
        this.repaySlot(); // it left the backlog
      } else if (st.taken) this.returnSlot();
    }
  }

  /** The session ended with err: the streams end with err, accept() calls waiting reject. */
  close(err: WsmuxError): void {
    for (const st of [...this.streams.values()]) st.terminate(err, false);
    this.streams.clear();
    for (const [, rej] of this.acceptWaiters) rej(err);
    this.acceptWaiters = [];
  }

  private returnSlot(): void {
    if (!this.givesBack()) return;
    this.peerCredit++;
    this.maxStreamsDirty = true;
    this.slotBack();
  }

  private take(st: Stream): void {
    st.taken = true;
    if (st.ended) this.returnSlot();
    this.repaySlot();
  }

  /** Gives back one slot of a stream refused for a full backlog (Session.onSyn). */
  private repaySlot(): void {
    if (this.owedSlots > 0) {
      this.owedSlots--;
      this.returnSlot();
    }
  }
}
