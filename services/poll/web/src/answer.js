// The participant page (ADR-071 §8): every Add and every Remove sends the whole answer at
// once (no Send button). The list shown is what the service stored (its reply), so a refused
// change never looks saved. The AI notice (ADR-072 §4) shows while the switch is on. The
// question heads the page (a phone shows nothing else of the poll), in the poll's language,
// and an idea the teacher has not approved yet says so under it (issue 22).
import { api, follow, h, reason, t, tn, translatePage, usePollLanguage } from "./common.js";

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

let ideas = [];
let waiting = new Set(); // ideas the teacher has not approved yet (moderation on)
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
        ),
        h(
          "button",
          { type: "button", class: "remove", "aria-label": t("answer.remove", { text: idea }), dataset: { index: String(i) }, onclick: () => remove(i) },
          "×",
        ),
      ),
    ),
  );
  if (!ideas.length) mine.append(h("li", { class: "none" }, t("answer.none")));
  counter.textContent = maxIdeas ? tn("answer.count", ideas.length, { max: maxIdeas }) : "";
  addButton.disabled = busy || (maxIdeas !== null && ideas.length >= maxIdeas);
}

async function send(next) {
  busy = true;
  draw();
  problem.textContent = "";
  try {
    const stored = await api("/answer", { method: "POST", body: { ideas: next } });
    ideas = stored.ideas;
    waiting = new Set(stored.waiting || []);
    status.textContent = t("answer.saved");
    return true;
  } catch (e) {
    problem.textContent = reason(e);
    return false;
  } finally {
    busy = false;
    draw();
  }
}

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  const idea = input.value.replace(/\s+/g, " ").trim();
  if (!idea || busy) return;
  if (await send([...ideas, idea])) input.value = "";
  input.focus();
});

async function remove(i) {
  if (busy) return;
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
    if (typeof s.maxIdeas === "number") maxIdeas = s.maxIdeas;
    draw();
  } catch (e) {
    problem.textContent = reason(e);
  }
}

async function loadAnswer() {
  const stored = await api("/answer");
  if (busy) return; // a send in flight answers with the newer state
  ideas = stored.ideas;
  waiting = new Set(stored.waiting || []);
}

// Each frame of the phones follows a change of the poll (a teacher's approval among them):
// while an idea of this phone waits, the answer is read again, at most once every 2 s (a
// room of phones rereads only while they have something waiting, and not at every frame).
let rereading = null;
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
  await loadSettings();
  try {
    await loadAnswer();
  } catch (e) {
    problem.textContent = reason(e);
  }
  draw();
  // The AI switch can move at any time: its notice is re-read every few seconds.
  setInterval(() => document.visibilityState === "visible" && loadSettings(), 4000);
  follow(
    "/stream?audience=phone",
    (type, frame) => {
      if (type !== "poll.tally") return;
      if (waiting.size) rereadSoon();
      const items = frame.sharedList || [];
      sharedSection.hidden = !items.length;
      shared.replaceChildren(...items.map((i) => h("li", {}, i.label)));
    },
    (state) => {
      document.body.dataset.live = state;
    },
  );
})();
