// What the three pages share: the token, the API calls, the SSE reader and the strings.
import { STRINGS } from "./strings.js";

const TOKEN_KEY = "quiz-poll-token";

/** The page's JWT: read once from the URL fragment `#token=…`, kept in sessionStorage.
 * The fragment is wiped from the address bar at once, so a projected page never shows it,
 * and it is never sent to the server in a URL (only as `Authorization: Bearer`). */
export function readToken() {
  const hash = new URLSearchParams(location.hash.replace(/^#/, ""));
  const fromHash = hash.get("token");
  if (fromHash) {
    sessionStorage.setItem(TOKEN_KEY, fromHash);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

/** The evaluation id of `/poll/{evaluation}/{page}`. */
export function evaluationId() {
  const parts = location.pathname.split("/").filter(Boolean);
  return decodeURIComponent(parts[1] || "");
}

export function apiBase() {
  return `/app/api/evaluations/${encodeURIComponent(evaluationId())}/poll`;
}

/** An API error: `{code, message}` as the service answers, or a network failure. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** Calls the poll API with the page's token; resolves to the JSON body, rejects with ApiError. */
export async function api(path, { method = "GET", body } = {}) {
  let res;
  try {
    res = await fetch(apiBase() + path, {
      method,
      headers: {
        Authorization: `Bearer ${readToken()}`,
        Accept: "application/json",
        ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    });
  } catch (e) {
    throw new ApiError(0, "network", String(e && e.message ? e.message : e));
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!res.ok) {
    const code = (data && data.code) || `http_${res.status}`;
    throw new ApiError(res.status, code, (data && data.message) || res.statusText);
  }
  return data;
}

/** Follows an SSE stream read with fetch() (so the token travels in a header, never a URL).
 * `onEvent(type, data, id)` gets each event's parsed JSON; `onState("live"|"reconnecting"|
 * "refused", error?)` tells the connection's state. Reconnects after a drop with the last
 * `id` as `Last-Event-ID` (the service answers with the latest frame), backing off 0.5 s → 8 s.
 * A 401/404 is not retried: the token does not reach this poll. Returns a stop function. */
export function follow(path, onEvent, onState) {
  let lastId = null;
  let stopped = false;
  let delay = 500;
  let controller = null;

  async function once() {
    controller = new AbortController();
    const headers = { Authorization: `Bearer ${readToken()}`, Accept: "text/event-stream" };
    if (lastId !== null) headers["Last-Event-ID"] = lastId;
    const res = await fetch(apiBase() + path, {
      headers,
      signal: controller.signal,
      cache: "no-store",
    });
    if (!res.ok || !res.body) {
      let data = null;
      try {
        data = await res.json();
      } catch {
        data = null;
      }
      throw new ApiError(res.status, (data && data.code) || `http_${res.status}`, (data && data.message) || "");
    }
    onState("live");
    delay = 500;
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      // Events end with a blank line; CRLF and CR are legal line ends in SSE.
      buffer = buffer.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let type = "message";
        let id = null;
        const data = [];
        for (const line of block.split("\n")) {
          if (!line || line.startsWith(":")) continue; // keep-alive comment
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let val = colon < 0 ? "" : line.slice(colon + 1);
          if (val.startsWith(" ")) val = val.slice(1);
          if (field === "event") type = val;
          else if (field === "data") data.push(val);
          else if (field === "id") id = val;
        }
        if (id !== null) lastId = id;
        if (!data.length) continue;
        let parsed;
        try {
          parsed = JSON.parse(data.join("\n"));
        } catch {
          continue;
        }
        onEvent(type, parsed, id);
      }
    }
  }

  (async () => {
    while (!stopped) {
      try {
        await once();
      } catch (e) {
        if (stopped) return;
        if (e instanceof ApiError && (e.status === 401 || e.status === 403 || e.status === 404)) {
          onState("refused", e);
          return;
        }
      }
      if (stopped) return;
      onState("reconnecting");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 8000);
    }
  })();
  return () => {
    stopped = true;
    if (controller) controller.abort();
  };
}

/** The language asked in the URL (`?lang=fr|en`), or null. */
function askedLanguage() {
  const asked = new URLSearchParams(location.search).get("lang");
  return asked && STRINGS[asked] ? asked : null;
}

/** The browser's first French or English choice, else English. */
function browserLanguage() {
  for (const l of navigator.languages || [navigator.language || "en"]) {
    const short = l.slice(0, 2).toLowerCase();
    if (STRINGS[short]) return short;
  }
  return "en";
}

// Short words only one of the two languages uses often: a question's own words tell its language.
const FRENCH = new Set(
  "le la les un une des du de au aux et est sont qui que quoi quel quelle quels quelles pour par sur dans avec vous nous ce cette ces votre vos ne pas plus comment pourquoi où ou quand se sa son ses il elle ils elles on y en à".split(" "),
);
const ENGLISH = new Set(
  "the a an of and is are was were what which who whom why how when where to in on for with you your we our this that these those it its do does can not be by from".split(" "),
);

/** The language a question is written in: "fr", "en", or null when its words do not say.
 * French also shows in its letters (é, è, ç…) and its elisions (qu', l', d'). */
export function questionLanguage(text) {
  const lower = (text || "").toLowerCase();
  let fr = (lower.match(/[éèêàâçùûîôœ]/g) || []).length + (lower.match(/\b(qu|l|d|n|s|c|j)['’]/g) || []).length;
  let en = 0;
  for (const w of lower.split(/[^a-zà-ÿœ]+/).filter(Boolean)) {
    if (FRENCH.has(w)) fr += 1;
    if (ENGLISH.has(w)) en += 1;
  }
  if (fr > en) return "fr";
  if (en > fr) return "en";
  return null;
}

let LANG = askedLanguage() || browserLanguage();

/** The page's language: `?lang=fr|en`, else the poll's (its question's), else the browser's. */
export function language() {
  return LANG;
}

/** Takes the poll's language from its question (unless `?lang=` asked for one); true when the
 * page's language changed, so the caller redraws what it wrote. */
export function usePollLanguage(prompt) {
  if (askedLanguage()) return false;
  const lang = questionLanguage(prompt);
  if (!lang || lang === LANG) return false;
  LANG = lang;
  translatePage();
  return true;
}

/** A string of the page's language; `{name}` placeholders are filled from `vars`. */
export function t(key, vars = {}) {
  const s = STRINGS[LANG][key] ?? STRINGS.en[key] ?? key;
  return s.replace(/\{(\w+)\}/g, (_, k) => (k in vars ? String(vars[k]) : `{${k}}`));
}

/** A count in words: `key.one` or `key.other` as the language's plural rules choose for `n`
 * (French: 0 and 1 are singular; English: 1 only); `{n}` and `vars` fill the placeholders. */
export function tn(key, n, vars = {}) {
  const rule = new Intl.PluralRules(LANG).select(n);
  const chosen = STRINGS[LANG][`${key}.${rule}`] !== undefined ? `${key}.${rule}` : `${key}.other`;
  return t(chosen, { n, ...vars });
}

/** Fills every `[data-t]` element's text, `[data-t-label]`'s aria-label and the title. */
export function translatePage() {
  document.documentElement.lang = LANG;
  for (const el of document.querySelectorAll("[data-t]")) el.textContent = t(el.dataset.t);
  for (const el of document.querySelectorAll("[data-t-label]")) {
    el.setAttribute("aria-label", t(el.dataset.tLabel));
  }
  for (const el of document.querySelectorAll("[data-t-placeholder]")) {
    el.setAttribute("placeholder", t(el.dataset.tPlaceholder));
  }
  const title = document.querySelector("title[data-t]");
  if (title) document.title = t(title.dataset.t);
}

/** A readable reason for an API error code, in the page's language. */
export function reason(err) {
  const key = `error.${err.code}`;
  const known = t(key);
  return known === key ? t("error.other", { code: err.code, message: err.message || "" }) : known;
}

/** `h("button", {class: "x", onclick}, "text", child)`: a small element builder (text is
 * always set as text, never parsed as HTML, so typed ideas can never inject markup). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
