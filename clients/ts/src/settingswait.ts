// Waiting for the peer's SETTINGS, the first frame of its side (spec 6.1):
// open() calls wait for them, and the session ends with SETTINGS_TIMEOUT
// when they do not come in time (9.6). Internal: index.ts exports none of it.

/** @internal */
export class SettingsWait {
  private waiters: Array<[() => void, (e: Error) => void]> = [];
  private timer: ReturnType<typeof setTimeout> | null = null;

  /** timedOut runs in ms unless arrived() or close() comes first (ms <= 0: never). */
  start(ms: number, timedOut: () => void): void {
    if (ms > 0) this.timer = setTimeout(timedOut, ms);
  }

  /** Resolves at arrived(), rejects at close(). */
  wait(): Promise<void> {
    return new Promise((res, rej) => this.waiters.push([res, rej]));
  }

  /** The peer's SETTINGS arrived: the waiting calls go on. */
  arrived(): void {
    if (this.timer) clearTimeout(this.timer);
    const ws = this.waiters;
    this.waiters = [];
    for (const [res] of ws) res();
  }

  /** The session ended: the waiting calls reject with err. */
  close(err: Error): void {
    if (this.timer) clearTimeout(this.timer);
    for (const [, rej] of this.waiters) rej(err);
    this.waiters = [];
  }
}
