// The participant page (ADR-071 §8): every Add and every Remove sends the whole answer at
// once (no Send button). The list shown is what the service stored (its reply), so a refused
// change never looks saved. The AI notice (ADR-072 §4) shows while the switch is on. The
// question heads the page (a phone shows nothing else of the poll), in the poll's language,
// and an idea the teacher has not approved yet says so under it (issue 22). Issue 34: a link
// with no token, a broken or expired one, or another poll's says so and what to do, with Add
// disabled; at the poll's idea limit the reason stands beside the disabled Add; an idea of
// one's own that the moderation hid is marked as not shown; the AI notice names the model.
import { api, follow, h, modelWho, readToken, reason, t, tn, translatePage, usePollLanguage } from "./common.js";

translatePage();
const form = document.getElementById("add");
const input = document.getElementById("idea");
const addButton = document.getElementById("add-button");
const mine = document.getElementById("mine");
const problem = document.getElementById("problem");
const status = document.getElementById("status");
const aiNotice = document.getElementById("ai-notice");
const shared = document.getElementById("shared");
const sharedSection = document.getElementById("shared-section");
const counter = document.getElementById("counter");
const question = document.getElementById("question");
const full = document.getElementById("full");

let ideas = [];
let waiting = new Set(); // ideas the teacher has not approved yet (moderation on)
let hidden = new Set(); // ideas the moderation hid: never shown in the room
let locked = null; // the link does not open this poll: the reason, and nothing can be sent
let moderated = false;
let maxIdeas = null;
let busy = false;

function draw() {
  mine.replaceChildren(
    ...ideas.map((idea, i) =>
      h(
        "li",
        {},
        h(
          "span",
          { class: "text" },
          idea,
          waiting.has(idea) ? h("span", { class: "waiting" }, t("answer.waiting")) : null,
          hidden.has(idea) ? h("span", { class: "hidden-mark" }, t("answer.hidden")) : null,
        ),
        h(
          "button",
          { type: "button", class: "remove", "aria-label": t("answer.remove", { text: idea }), dataset: { index: String(i) }, onclick: () => remove(i) },
          "×",
        ),
      ),
    ),
  );
  for (const li of mine.children) if (li.querySelector(".hidden-mark")) li.classList.add("hidden");
  if (!ideas.length && !locked) mine.append(h("li", { class: "none" }, t("answer.none")));
  counter.textContent = maxIdeas && !locked ? tn("answer.count", ideas.length, { max: maxIdeas }) : "";
  const atLimit = maxIdeas !== null && ideas.length >= maxIdeas;
  addButton.disabled = busy || atLimit || !!locked;
  input.disabled = !!locked;
  // A link that opens nothing has no list of ideas to show: only the reason and what to do.
  document.getElementById("mine-title").hidden = !!locked;
  // Why Add is greyed, beside it (and read with it by a screen reader).
  full.textContent = locked ? "" : atLimit ? tn("answer.full", maxIdeas) : "";
  full.hidden = !full.textContent;
}

/** The link does not open this poll (no token, a broken or expired one, another poll's):
 * say so and what to do, in the poll's language when this device learned it, and send
 * nothing more. */
function lock(err) {
  locked = err;
  problem.textContent = reason(err, "answer");
  draw();
}

function refusedLink(e) {
  return e && (e.status === 401 || e.status === 403 || e.status === 404);
}

async function send(next) {
  busy = true;
  draw();
  problem.textContent = "";
  try {
    const stored = await api("/answer", { method: "POST", body: { ideas: next } });
    ideas = stored.ideas;
    waiting = new Set(stored.waiting || []);
    hidden = new Set(stored.hidden || []);
    status.textContent = t("answer.saved");
    return true;
  } catch (e) {
    if (refusedLink(e)) lock(e);
    else problem.textContent = reason(e, "answer");
    return false;
  } finally {
    busy = false;
    draw();
  }
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const idea = input.value.replace(/\s+/g, " ").trim();
  if (!idea || busy || locked) return;
  if (await send([...ideas, idea])) input.value = "";
  input.focus();
});

async function remove(i) {
  if (busy || locked) return;
  await send(ideas.filter((_, j) => j !== i));
  const next = mine.querySelector(`button[data-index="${Math.min(i, ideas.length - 1)}"]`);
  (next || input).focus();
}

async function loadSettings() {
  try {
    const s = await api("/settings");
    if (s.prompt && question.textContent !== s.prompt) {
      usePollLanguage(s.prompt);
      // After translatePage, which writes the heading's fallback ("Your ideas").
      delete question.dataset.t;
      question.textContent = s.prompt;
    }
    // Moderation just switched: which ideas wait changed with it.
    if (moderated !== !!s.moderation && ideas.length) rereadSoon();
    moderated = !!s.moderation;
    aiNotice.hidden = !s.ai;
    aiNotice.textContent = s.demo ? t("answer.ai.demo") : t("answer.ai", { who: modelWho(s.aiModel, s.aiProvider) });
    if (typeof s.maxIdeas === "number") maxIdeas = s.maxIdeas;
    draw();
    return true;
  } catch (e) {
    if (refusedLink(e)) lock(e);
    else problem.textContent = reason(e, "answer");
    return false;
  }
}

async function loadAnswer() {
  const stored = await api("/answer");
  if (busy) return; // a send in flight answers with the newer state
  ideas = stored.ideas;
  waiting = new Set(stored.waiting || []);
  hidden = new Set(stored.hidden || []);
}

// Each frame of the phones follows a change of the poll (a teacher's approval among them):
// while an idea of this phone waits, or when an idea left the shared list (hidden: maybe one of
// this phone's, which it then marks "not shown"), the answer is read again, at most once every 2 s (a
// room of phones rereads only while they have something waiting, and not at every frame).
let rereading = null;
let sharedKeys = new Set(); // the keys of the last frame's shared list
function rereadSoon() {
  if (rereading) return;
  rereading = setTimeout(async () => {
    rereading = null;
    try {
      await loadAnswer();
      draw();
    } catch {
      // the next frame tries again; the list shown stays what the service last answered
    }
  }, 2000);
}

(async () => {
  if (!readToken()) {
    // No token in the link at all: nothing can be asked; say what to do.
    lock({ status: 401, code: "missing", message: "" });
    return;
  }
  if (!(await loadSettings()) && locked) return;
  try {
    await loadAnswer();
  } catch (e) {
    if (refusedLink(e)) return lock(e);
    problem.textContent = reason(e, "answer");
  }
  draw();
  // The AI switch can move at any time: its notice is re-read every few seconds.
  setInterval(() => document.visibilityState === "visible" && !locked && loadSettings(), 4000);
  follow(
    "/stream?audience=phone",
    (type, frame) => {
      if (type !== "poll.tally") return;
      const items = frame.sharedList || [];
      const now = new Set(items.map((i) => i.key));
      const left = [...sharedKeys].some((k) => !now.has(k));
      sharedKeys = now;
      if (waiting.size || (left && ideas.length)) rereadSoon();
      sharedSection.hidden = !items.length;
      shared.replaceChildren(...items.map((i) => h("li", {}, i.label)));
    },
    (state) => {
      document.body.dataset.live = state;
    },
  );
})();
