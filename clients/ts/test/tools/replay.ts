// The headless-Chromium test of the replay page (/ui/recordings/), driven
// by the Go test TestRecordingReplay in gateway/webui, which records an
// interactive kubectl session through the gateway first:
//   node dist/test/tools/replay.js BASE_URL TOKEN OUT_DIR CLIENT_FILE COLS ROWS
// CLIENT_FILE holds what the client's terminal got, of COLS x ROWS at the
// end. Prints one JSON line per check ({"name","ok","error","detail"}):
// the list and its filters, the playback's screen, and the client's screen
// as xterm.js (the web terminal's emulator) shows those bytes.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import puppeteer, { type Page } from "puppeteer-core";

const [base, token, outDir, clientFile, cols, rows] = process.argv.slice(2);
const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";
const require = createRequire(import.meta.url);

type Replay = { wsmuxReplay: { screen(): string[] } };

function report(name: string, ok: boolean, detail: unknown = "", error = ""): void {
  console.log(JSON.stringify({ name, ok, detail, error }));
}

async function check(name: string, page: Page | null, fn: () => Promise<unknown>): Promise<void> {
  try {
    report(name, true, (await fn()) ?? "");
  } catch (e) {
    if (page) await page.screenshot({ path: join(outDir, `${name.replace(/\W+/g, "-")}-failed.png`) }).catch(() => {});
    report(name, false, "", String((e as Error)?.stack ?? e));
  }
}

async function status(page: Page): Promise<string> {
  return page.$eval("#status", (e) => e.textContent ?? "");
}

async function waitStatus(page: Page, re: RegExp, timeoutMs = 20000): Promise<string> {
  await page.waitForFunction((src: string) => new RegExp(src).test(document.getElementById("status")?.textContent ?? ""), { timeout: timeoutMs, polling: 50 }, re.source).catch(async () => {
    throw new Error(`status ${JSON.stringify(await status(page))}, want ${re}`);
  });
  return status(page);
}

async function rows_(page: Page): Promise<number> {
  return page.$$eval("#list tbody tr", (trs) => trs.length);
}

async function list(page: Page, caller: string, pod: string): Promise<number> {
  await page.$eval("#caller", (e, v) => ((e as HTMLInputElement).value = v), caller);
  await page.$eval("#pod", (e, v) => ((e as HTMLInputElement).value = v), pod);
  await page.click("#search");
  await waitStatus(page, /^\d+ recordings?$/);
  return rows_(page);
}

/** Trailing empty lines dropped. */
function trimScreen(lines: string[]): string[] {
  const out = [...lines];
  while (out.length && out[out.length - 1] === "") out.pop();
  return out;
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
    acceptInsecureCerts: true,
    defaultViewport: { width: 1200, height: 900 },
  });
  try {
    const page = await browser.newPage();
    const pageErrors: string[] = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));

    await check("replay/wrong-token-401", page, async () => {
      await page.goto(base + "/ui/recordings/", { waitUntil: "load" });
      await page.type("#token", "not-a-token");
      await page.click("#search");
      return waitStatus(page, /^401 /);
    });

    await check("replay/list-filters", page, async () => {
      await page.type("#token", token);
      const all = await list(page, "", "");
      const mine = await list(page, "browser-tester", "web-0");
      const none = await list(page, "", "no-such-pod");
      const nobody = await list(page, "mallory", "");
      if (all < 1 || mine !== all || none !== 0 || nobody !== 0) throw new Error(`rows: all ${all}, caller+pod ${mine}, other pod ${none}, other caller ${nobody}`);
      // Since after now: nothing; since an hour ago: everything.
      const later = new Date(Date.now() + 3600e3);
      const local = (d: Date) => new Date(d.getTime() - d.getTimezoneOffset() * 60e3).toISOString().slice(0, 16);
      await page.$eval("#since", (e, v) => ((e as HTMLInputElement).value = v), local(later));
      const future = await list(page, "", "");
      await page.$eval("#since", (e, v) => ((e as HTMLInputElement).value = v), local(new Date(Date.now() - 3600e3)));
      const recent = await list(page, "", "");
      if (future !== 0 || recent !== all) throw new Error(`since: in an hour ${future} rows, an hour ago ${recent}, want 0 and ${all}`);
      return `${all} recording(s); filters by caller, pod and time narrow the list`;
    });

    let replayed: string[] = [];
    await check("replay/play", page, async () => {
      await list(page, "", "web-0");
      await page.click("#list tbody tr");
      await waitStatus(page, /^playback ended/, 30000);
      // The player renders its last frames after "ended" on a loaded
      // machine: read the screen once it has stayed the same for 500 ms.
      await page.waitForFunction(() => {
        const g = globalThis as unknown as Replay & { lastScreen?: string; stableSince?: number };
        const s = JSON.stringify(g.wsmuxReplay.screen());
        if (s !== g.lastScreen) {
          g.lastScreen = s;
          g.stableSince = performance.now();
          return false;
        }
        return performance.now() - (g.stableSince ?? 0) >= 500;
      }, { polling: 50, timeout: 20000 });
      replayed = trimScreen(await page.evaluate(() => (globalThis as unknown as Replay).wsmuxReplay.screen()));
      await page.screenshot({ path: join(outDir, "replay.png") });
      if (!replayed.length) throw new Error("the player shows nothing");
      return replayed;
    });

    await check("replay/client-screen", null, async () => {
      // What the client saw: its terminal's bytes in xterm.js, at its size.
      const p = await browser.newPage();
      await p.setContent('<div id="t"></div>');
      await p.addScriptTag({ path: require.resolve("@xterm/xterm/lib/xterm.js") });
      const bytes = [...readFileSync(clientFile)];
      const lines = await p.evaluate(
        async (data: number[], c: number, r: number) => {
          const T = (globalThis as unknown as { Terminal: new (o: object) => any }).Terminal;
          const term = new T({ cols: c, rows: r, scrollback: 0 });
          term.open(document.getElementById("t"));
          await new Promise<void>((done) => term.write(new Uint8Array(data), done));
          const b = term.buffer.active;
          const out: string[] = [];
          for (let i = b.viewportY; i < b.viewportY + r; i++) out.push(b.getLine(i)?.translateToString(true) ?? "");
          return out;
        },
        bytes,
        Number(cols),
        Number(rows),
      );
      await p.close();
      return trimScreen(lines);
    });

    if (pageErrors.length) report("replay/no-uncaught-errors", false, "", pageErrors.join("\n"));
    else report("replay/no-uncaught-errors", true);
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  report("replay/launch", false, "", String(e?.stack ?? e));
  process.exit(1);
});
