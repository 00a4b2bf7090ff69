// Builds the web terminal (web/) into gateway/webui/static/,
// which wsmux embeds: app.js (esbuild, minified, no source map), app.css
// (xterm's stylesheet and ours), index.html; and the replay page of session
// recordings into static/recordings/ (asciinema-player's script and
// stylesheet, ours). With --check it builds in memory
// and fails when the committed files differ (make test runs that).
import { build } from "esbuild";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const out = join(root, "..", "..", "gateway", "webui", "static");
const check = process.argv.includes("--check");

const bundle = async (entry) =>
  (
    await build({
      entryPoints: [join(root, "web", entry)],
      bundle: true,
      format: "esm",
      target: "es2022",
      minify: true,
      legalComments: "eof",
      write: false,
      logLevel: "warning",
    })
  ).outputFiles[0].text;
const web = (name) => readFileSync(join(root, "web", name), "utf8");
const files = {
  "app.js": await bundle("terminal.ts"),
  "app.css": readFileSync(join(root, "node_modules", "@xterm", "xterm", "css", "xterm.css"), "utf8") + "\n" + web("style.css"),
  "index.html": web("index.html"),
  "recordings/app.js": await bundle("recordings.ts"),
  "recordings/app.css":
    readFileSync(join(root, "node_modules", "asciinema-player", "dist", "bundle", "asciinema-player.css"), "utf8") + "\n" + web("style.css") + "\n" + web("recordings.css"),
  "recordings/index.html": web("recordings.html"),
};
let stale = [];
for (const [name, text] of Object.entries(files)) {
  const p = join(out, name);
  if (check) {
    let cur = null;
    try {
      cur = readFileSync(p, "utf8");
    } catch {}
    if (cur !== text) stale.push(p);
  } else {
    mkdirSync(dirname(p), { recursive: true });
    writeFileSync(p, text);
  }
}
if (stale.length) {
  console.error(`bundle: ${stale.join(", ")} differ from clients/ts/web and its dependencies: run \`npm run bundle\` in clients/ts and commit the result`);
  process.exit(1);
}
console.log(check ? "bundle: up to date" : `bundle: wrote ${Object.keys(files).join(", ")} to ${out}`);
