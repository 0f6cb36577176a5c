// Bundles the three pages' scripts into ../src/quiz_poll/static/ (committed, so `make run` needs
// no Node). Run by `make pages` (npm ci, then this). Output names are fixed: the HTML pages and
// poll.css, written by hand in that folder (short and readable as they are), reference them.
import { build } from "esbuild";
import { mkdir } from "node:fs/promises";

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
