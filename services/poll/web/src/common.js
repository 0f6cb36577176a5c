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

/** The language asked in the URL (`?lang=fr|en|de|it`), or null. */
function askedLanguage() {
  const asked = new URLSearchParams(location.search).get("lang");
  return asked && STRINGS[asked] ? asked : null;
}

/** The browser's first French, English, German or Italian choice, else English. */
function browserLanguage() {
  for (const l of navigator.languages || [navigator.language || "en"]) {
    const short = l.slice(0, 2).toLowerCase();
    if (STRINGS[short]) return short;
  }
  return "en";
}

// Short words one language uses often and the others rarely: a question's words tell its
// language. A word two languages share ("la", "in") counts for both and so decides nothing.
const WORDS = {
  fr: "le la les un une des du de au aux et est sont qui que quoi quel quelle quels quelles pour par sur dans avec vous nous ce cette ces votre vos ne pas plus comment pourquoi où ou quand se sa son ses il elle ils elles on y en à",
  en: "the a an of and is are was were what which who whom why how when where to in on for with you your we our this that these those it its do does can not be by from",
  de: "der die das den dem des und ist sind war was wer wie warum wo wann welche welcher welches ein eine einen einem einer nicht mit für von zu zum zur auf im ins sie wir ihr ich es man kann können braucht brauchen gibt",
  it: "il lo gli la le un una uno di del della dello dei degli delle che cosa chi come perché dove quando è sono per con non nel nella nei al alla ai si ci quali quale questo questa",
};
const LEXICON = Object.fromEntries(Object.entries(WORDS).map(([l, w]) => [l, new Set(w.split(" "))]));
// Letters and elisions that belong to one language of the four.
const MARKS = {
  fr: /[êâçûîôœëï]|\b(qu|j|n|c|s)['’]/g,
  en: /\b\w+['’](s|t|re|ve|ll)\b/g,
  de: /[äöüß]/g,
  it: /[ìò]|\b(dell|all|nell|dall|un)['’]/g,
};

/** The language a question is written in: "fr", "en", "de", "it", or null when its words do
 * not say (no language ahead of the others). */
export function questionLanguage(text) {
  const lower = (text || "").toLowerCase();
  const score = {};
  for (const [l, re] of Object.entries(MARKS)) score[l] = (lower.match(re) || []).length;
  for (const w of lower.split(/[^a-zà-ÿœ]+/).filter(Boolean)) {
    for (const [l, set] of Object.entries(LEXICON)) if (set.has(w)) score[l] += 1;
  }
  const ranked = Object.entries(score).sort((a, b) => b[1] - a[1]);
  return ranked[0][1] > ranked[1][1] ? ranked[0][0] : null;
}

// The poll's language, once a page learned it, is kept for this poll on this device: a later
// visit whose link no longer works still explains that in the poll's language (issue 34).
const LANG_KEY = () => `quiz-poll-lang:${evaluationId()}`;

function rememberedLanguage() {
  try {
    const l = localStorage.getItem(LANG_KEY());
    return l && STRINGS[l] ? l : null;
  } catch {
    return null;
  }
}

let LANG = askedLanguage() || rememberedLanguage() || browserLanguage();

/** The page's language: `?lang=`, else the poll's (its question's, or the one remembered for
 * this poll), else the browser's. */
export function language() {
  return LANG;
}

/** Takes the poll's language from its question (unless `?lang=` asked for one); true when the
 * page's language changed, so the caller redraws what it wrote. */
export function usePollLanguage(prompt) {
  const lang = questionLanguage(prompt);
  if (lang) {
    try {
      localStorage.setItem(LANG_KEY(), lang);
    } catch {
      // storage refused (private mode): the language is only not remembered
    }
  }
  if (askedLanguage()) return false;
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

/** A readable reason for an API error code, in the page's language; `page` ("answer", …)
 * picks that page's own wording first (`answer.error.unauthorized`: what a student does). */
export function reason(err, page = null) {
  for (const key of page ? [`${page}.error.${err.code}`, `error.${err.code}`] : [`error.${err.code}`]) {
    if (t(key) !== key) return t(key);
  }
  return t("error.other", { code: err.code, message: err.message || "" });
}

/** Who reads the ideas, as the notices name it: "an AI model by Anthropic (claude-…)", from
 * the model and provider the gateway reports (`PollAiState`, `PollPageSettings`). */
export function modelWho(model, provider) {
  if (model && provider) return t("ai.who.provider", { model, provider });
  if (model) return t("ai.who.model", { model });
  return t("ai.who.unknown");
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
