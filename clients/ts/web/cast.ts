// What the replay page (recordings.ts) does to a wsmux cast before
// asciinema-player plays it; no DOM, so node's tests run it.

/**
 * What asciinema-player plays of a wsmux cast: stderr events ("e", sessions
 * without a terminal) become output in red, and without a terminal, "\n"
 * becomes "\r\n" (no terminal translated it when it was written).
 */
export function forPlayer(cast: string): string {
  const lines = cast.split("\n");
  let tty = true;
  const out: string[] = [];
  lines.forEach((line, i) => {
    if (!line) return;
    if (i === 0) {
      try {
        tty = JSON.parse(line)?.wsmux?.tty !== false;
      } catch {
        // not ours: played as it is
      }
      out.push(line);
      return;
    }
    let ev: [number, string, string];
    try {
      ev = JSON.parse(line);
    } catch {
      return; // a line cut by a crash
    }
    let [t, code, data] = ev;
    if (code !== "o" && code !== "e") {
      out.push(JSON.stringify([t, code, data]));
      return;
    }
    if (!tty) data = data.replace(/\r?\n/g, "\r\n");
    if (code === "e") data = `\x1b[31m${data}\x1b[39m`;
    out.push(JSON.stringify([t, "o", data]));
  });
  return out.join("\n") + "\n";
}
