// Bundles the three pages into ../src/quiz_poll/static/ (committed, so `make run` needs no Node).
// Run by `make pages` (npm ci, then this). Output names are fixed; the HTML pages reference them.
import { build } from "esbuild";
import { copyFile, mkdir, readdir } from "node:fs/promises";

// POLL_PAGES_OUT: another folder (the test that the committed build is the sources' build).
const out = process.env.POLL_PAGES_OUT
  ? `${process.env.POLL_PAGES_OUT.replace(/\/$/, "")}/`
  : new URL("../src/quiz_poll/static/", import.meta.url).pathname;
await mkdir(out, { recursive: true });
await build({
  entryPoints: ["src/wall.js", "src/board.js", "src/answer.js"],
  bundle: true,
  minify: true,
  format: "iife",
  target: ["chrome100", "firefox100", "safari15"],
  outdir: out,
  legalComments: "eof",
  logLevel: process.env.POLL_PAGES_OUT ? "warning" : "info",
});
// The HTML and CSS are copied as written: they are short and readable as they are.
for (const name of await readdir("pages")) {
  await copyFile(`pages/${name}`, `${out}${name}`);
}
