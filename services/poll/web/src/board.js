// The moderation board (ADR-071 §6, ADR-072 §2/§13): every variant, staff only, in its own tab.
// Every action is a POST …/poll/ideas whose answer is the new board; other changes (answers,
// the model's verdicts, another teacher) arrive live. Every action has a keyboard path:
// buttons, checkboxes and the "Merge into" select; dragging is a shortcut, never the only way.
// It reads in the poll's language and is headed by the poll's question (issue 34); a row
// offers only the actions that change something, and an approved idea with a spelling typed
// since is one state, "new spelling to approve", counted among the ideas waiting.
import { api, follow, h, modelWho, reason, t, tn, translatePage, usePollLanguage } from "./common.js";

translatePage();
const list = document.getElementById("clusters");
const problem = document.getElementById("problem");
const status = document.getElementById("status");
const live = document.getElementById("live");
const counts = document.getElementById("counts");
const aiSwitch = document.getElementById("ai");
const aiNotice = document.getElementById("ai-notice");
const aiCalls = document.getElementById("ai-calls");
const aiError = document.getElementById("ai-error");
const moderationSwitch = document.getElementById("moderation");
const selectedCount = document.getElementById("selected-count");
const mergeTarget = document.getElementById("merge-target");
const selectionBar = document.getElementById("selection");
const question = document.getElementById("question");
const demoBadge = document.getElementById("demo");

const RUN_CAP = 200; // ADR-072 §12, shown when the service does not say it
let board = null;
const selected = new Set();
let editing = null; // the cluster key whose rename form is open: renders wait for it
let waiting = null; // a board that arrived while editing or dragging
let dragging = false; // a redraw would drop the row being dragged: it waits for the drop

function say(message) {
  status.textContent = message;
}

function fail(e) {
  problem.textContent = reason(e);
}

async function act(body, what) {
  problem.textContent = "";
  try {
    const next = await api("/ideas", { method: "POST", body });
    // A merge answers its selection: what was picked is now one group, and a selection left
    // checked would carry into the next action.
    if (body.action === "merge") selected.clear();
    show(next);
    say(t("board.done", { what }));
  } catch (e) {
    fail(e);
  }
}

function keysOr(key) {
  return selected.has(key) && selected.size > 1 ? [...selected] : [key];
}

function variantOf(key) {
  for (const c of board ? board.clusters : []) for (const v of c.variants) if (v.key === key) return v;
  return null;
}

/** An approval of `keys` names the spellings this board shows for them (the typed text and the
 * new spellings): the room may then read those, and none typed since (issue 21). */
function approval(keys) {
  const spellings = [];
  for (const key of keys) {
    const v = variantOf(key);
    if (v) spellings.push(v.text, ...(v.newSpellings || []));
  }
  return { action: "approve", keys, spellings: [...new Set(spellings)].slice(0, 500) };
}

/** The spellings typed since an approval, when they matter: under moderation the room reads
 * only approved spellings; without it, every spelling is read and none waits. */
function freshOf(v) {
  return board && board.moderation && v.status === "approved" ? v.newSpellings || [] : [];
}

/** The row's state as the teacher reads it: "new spelling to approve" is its own state. */
function stateOf(v) {
  return freshOf(v).length ? "spelling" : v.status;
}

/** Ideas waiting for the teacher: the undecided ones and the approved ones with a new
 * spelling (the room does not read it until approved), under moderation only. */
function waitingCount(next) {
  if (!next.moderation) return 0;
  let fresh = 0;
  for (const c of next.clusters) for (const v of c.variants) if (v.status === "approved" && (v.newSpellings || []).length) fresh += 1;
  return next.pending + fresh;
}

/** "2 participants · on the wall": how many hold the group, and what the wall counts of them. */
function wallWords(cluster) {
  const people = tn("board.people", cluster.total);
  const wall =
    cluster.count === 0
      ? t("board.wall.none")
      : cluster.count >= cluster.total
        ? t("board.wall.all")
        : t("board.wall.some", { count: cluster.count });
  return `${people} · ${wall}`;
}

function variantRow(cluster, v) {
  const shown = v.correction || v.text;
  const state = stateOf(v);
  const check = h("input", {
    type: "checkbox",
    id: `pick-${v.key}`,
    "aria-label": t("board.select", { text: v.text }),
    checked: selected.has(v.key),
    dataset: { focus: `sel:${v.key}` },
    onchange: (e) => {
      if (e.target.checked) selected.add(v.key);
      else selected.delete(v.key);
      showSelection();
    },
  });
  const button = (name, body, label = t(`board.${name}`)) =>
    h(
      "button",
      { type: "button", class: `act ${name}`, dataset: { focus: `${name}:${v.key}` }, onclick: () => act(body(), label) },
      label,
    );
  // Only what changes something: no "Approve" on an approved idea (unless a new spelling
  // waits: approving lets the room read it), no "Hide" on a hidden one, no "Undo decision"
  // where nobody decided.
  const actions = h(
    "div",
    { class: "actions", role: "group", "aria-label": t("board.actionsFor", { text: shown }) },
    state === "spelling"
      ? button("approve", () => approval(keysOr(v.key)), t("board.approveSpelling"))
      : v.status !== "approved"
        ? button("approve", () => approval(keysOr(v.key)))
        : null,
    v.status !== "hidden" ? button("hide", () => ({ action: "hide", keys: keysOr(v.key) })) : null,
    v.status !== "pending" ? button("reset", () => ({ action: "reset", keys: keysOr(v.key) })) : null,
    // "Take out of group" for a member only: the head is the group (detaching it changes nothing).
    v.key !== cluster.key ? button("detach", () => ({ action: "detach", keys: keysOr(v.key) })) : null,
  );
  const fresh = freshOf(v);
  const row = h(
    "li",
    { class: `variant ${v.status}${fresh.length ? " has-new" : ""}`, draggable: "true", dataset: { key: v.key, state } },
    check,
    h(
      "label",
      { for: `pick-${v.key}`, class: "texts" },
      h("span", { class: "typed", title: t("board.typed") }, v.text),
      v.correction && v.correction !== v.text
        ? h("span", { class: "correction" }, h("span", { class: "sr-only" }, `${t("board.correction")}: `), `→ ${v.correction}`)
        : null,
      // Spellings typed after the approval: the room does not read them until "Approve" again;
      // beside them, what the wall reads now (the typed text above may be the new spelling).
      fresh.length && v.onWall ? h("span", { class: "on-wall" }, t("board.onWall", { text: v.onWall })) : null,
      fresh.length ? h("span", { class: "new-spellings" }, t("board.newSpellings", { list: fresh.join(" · ") })) : null,
    ),
    h("span", { class: `status ${state}` }, t(`board.status.${state}`)),
    // Who decided, only where someone did: the model (source ai) or this teacher. An idea
    // nobody marked carries no tag (a "teacher" tag there read as "I wrote this").
    v.ai
      ? h("span", { class: "source ai" }, t("board.source.ai"))
      : v.status !== "pending"
        ? h("span", { class: "source teacher" }, t("board.source.teacher"))
        : h("span", { class: "source none" }),
    h("span", { class: "count" }, tn("board.people", v.count)),
    actions,
  );
  row.addEventListener("dragstart", (e) => {
    e.dataTransfer.setData("text/x-idea-key", v.key);
    e.dataTransfer.effectAllowed = "move";
    row.classList.add("dragging");
    dragging = true;
  });
  row.addEventListener("dragend", () => {
    row.classList.remove("dragging");
    dragging = false;
    if (waiting && !editing) {
      const next = waiting;
      waiting = null;
      render(next);
    }
  });
  return row;
}

function renameForm(cluster) {
  const input = h("input", {
    type: "text",
    maxlength: "60",
    value: cluster.renamed ? cluster.label : "",
    placeholder: cluster.label,
    "aria-label": t("board.label"),
    id: `rename-${cluster.key}`,
  });
  const close = () => {
    editing = null;
    const next = waiting || board;
    waiting = null;
    render(next);
    focusOn(`rename:${cluster.key}`);
  };
  const form = h(
    "form",
    {
      class: "rename",
      onsubmit: async (e) => {
        e.preventDefault();
        editing = null;
        waiting = null;
        await act({ action: "rename", key: cluster.key, label: input.value.trim() || null }, t("board.rename"));
        focusOn(`rename:${cluster.key}`);
      },
      onkeydown: (e) => {
        if (e.key === "Escape") close();
      },
    },
    input,
    h("button", { type: "submit" }, t("board.save")),
    h("button", { type: "button", onclick: close }, t("board.cancel")),
  );
  setTimeout(() => input.focus(), 0);
  return form;
}

function clusterSection(cluster) {
  const heading = h(
    "h2",
    { id: `c-${cluster.key}` },
    h("span", { class: "label" }, cluster.label),
    cluster.renamed ? h("span", { class: "renamed" }, t("board.renamed")) : null,
  );
  const section = h(
    "li",
    { class: "cluster", dataset: { key: cluster.key }, "aria-labelledby": `c-${cluster.key}` },
    h(
      "div",
      { class: "head" },
      heading,
      h("span", { class: "count" }, wallWords(cluster)),
      editing === cluster.key
        ? renameForm(cluster)
        : h(
            "button",
            {
              type: "button",
              class: "rename-open",
              dataset: { focus: `rename:${cluster.key}` },
              onclick: () => {
                editing = cluster.key;
                render(board);
              },
            },
            t("board.rename"),
          ),
    ),
    h("ul", { class: "variants" }, cluster.variants.map((v) => variantRow(cluster, v))),
  );
  section.addEventListener("dragover", (e) => {
    if (![...e.dataTransfer.types].includes("text/x-idea-key")) return;
    e.preventDefault();
    section.classList.add("drop");
  });
  section.addEventListener("dragleave", () => section.classList.remove("drop"));
  section.addEventListener("drop", (e) => {
    e.preventDefault();
    section.classList.remove("drop");
    dragging = false; // the merge's answer is drawn at once
    const key = e.dataTransfer.getData("text/x-idea-key");
    if (!key || cluster.variants.some((v) => v.key === key)) return;
    act({ action: "merge", keys: keysOr(key), into: cluster.key }, t("board.mergeGo"));
  });
  return section;
}

function showSelection() {
  for (const k of [...selected]) if (!board || !board.clusters.some((c) => c.variants.some((v) => v.key === k))) selected.delete(k);
  selectedCount.textContent = tn("board.selected", selected.size);
  for (const b of selectionBar.querySelectorAll("button, select")) b.disabled = selected.size === 0;
}

function focusOn(id) {
  const el = id && document.querySelector(`[data-focus="${CSS.escape(id)}"]`);
  if (el) el.focus();
}

/** Draws a board; keeps the keyboard focus and the selection across the redraw. */
function show(next) {
  if (!next) return;
  if (editing || dragging) {
    waiting = next;
    return;
  }
  render(next);
}

function render(next) {
  board = next;
  const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.focus : null;
  counts.textContent = next.moderation
    ? `${tn("board.answered", next.answered)} · ${tn("board.pending", waitingCount(next))}`
    : tn("board.answered", next.answered);
  moderationSwitch.checked = next.moderation;
  showAi(next.ai);
  list.replaceChildren(...next.clusters.map(clusterSection));
  if (!next.clusters.length) list.append(h("li", { class: "empty" }, t("board.empty")));
  const current = mergeTarget.value;
  mergeTarget.replaceChildren(...next.clusters.map((c) => h("option", { value: c.key }, c.label)));
  if (next.clusters.some((c) => c.key === current)) mergeTarget.value = current;
  showSelection();
  focusOn(focused);
}

function showAi(ai) {
  aiSwitch.checked = ai.on;
  // The notice names what the gateway reports: its model and provider, or the demo.
  const on = ai.demo ? t("board.ai.notice.demo") : t("board.ai.notice.on", { who: modelWho(ai.model, ai.provider) });
  aiNotice.textContent = ai.on ? on : ai.available ? t("board.ai.notice.off") : t("board.ai.unavailable");
  aiNotice.className = ai.on ? "notice on" : "notice";
  demoBadge.hidden = !ai.demo;
  const calls = ai.calls ?? null;
  aiCalls.textContent = calls === null ? "" : t("board.ai.calls", { calls, cap: ai.runCap ?? RUN_CAP });
  aiCalls.hidden = calls === null;
  aiError.textContent = ai.error ? t("board.ai.error", { code: ai.error }) : "";
  aiError.hidden = !ai.error;
}

async function refresh() {
  try {
    show(await api("/ideas"));
  } catch (e) {
    fail(e);
  }
}

async function flip(name, input) {
  input.disabled = true;
  problem.textContent = "";
  try {
    await api("/reveal", { method: "POST", body: { [name]: input.checked } });
    await refresh();
  } catch (e) {
    input.checked = !input.checked;
    fail(e);
  } finally {
    input.disabled = false;
  }
}

aiSwitch.addEventListener("change", () => flip("ai", aiSwitch));
moderationSwitch.addEventListener("change", () => flip("moderation", moderationSwitch));
for (const name of ["approve", "hide", "reset", "detach"]) {
  document.getElementById(`sel-${name}`).addEventListener("click", () =>
    act(name === "approve" ? approval([...selected]) : { action: name, keys: [...selected] }, t(`board.${name}`)),
  );
}
document.getElementById("sel-merge").addEventListener("click", () => {
  const into = mergeTarget.value;
  const keys = [...selected].filter((k) => k !== into);
  if (into && keys.length) act({ action: "merge", keys, into }, t("board.mergeGo"));
});
// The selection bar sticks to the top of the window: whatever is scrolled or focused into view
// stops below it, never under it (its height changes as it wraps).
new ResizeObserver(() => {
  document.documentElement.style.scrollPaddingTop = `${selectionBar.offsetHeight + 8}px`;
}).observe(selectionBar);
document.getElementById("sel-clear").addEventListener("click", () => {
  selected.clear();
  show(board);
});

// Live: the board's own stream when the service has it; else every wall frame (a change
// of the tally) re-reads the board. A slow timer also catches what moves no frame (the AI's
// call count and error).
let coalesce = null;
function soon() {
  if (!coalesce) coalesce = setTimeout(() => ((coalesce = null), refresh()), 150);
}
function onState(state, err) {
  document.body.dataset.live = state;
  live.textContent = state === "reconnecting" ? t("live.reconnecting") : state === "refused" ? t("live.refused") : "";
  if (err && state === "refused" && err.status !== 404) fail(err);
  return state;
}
/** The question heads the board, and its language is the board's (the wall's and the phones'
 * too), whatever the browser's. */
async function loadQuestion() {
  try {
    const s = await api("/settings");
    if (usePollLanguage(s.prompt) && board) render(board);
    if (s.prompt) {
      question.textContent = s.prompt;
      question.hidden = false;
      document.title = `${s.prompt} — ${t("board.title")}`;
    }
  } catch (e) {
    fail(e);
  }
}

loadQuestion().then(refresh);
let fellBack = false;
follow(
  "/board/stream",
  (type, data) => type === "poll.board" && show(data),
  (state, err) => {
    if (state === "refused" && err && err.status === 404 && !fellBack) {
      fellBack = true;
      follow("/stream?audience=wall", (type) => type === "poll.tally" && soon(), onState);
      return;
    }
    onState(state, err);
  },
);
setInterval(() => document.visibilityState === "visible" && !editing && refresh(), 5000);
