// The wall (ADR-071 §5–§7): the projected bubble cloud, "Show votes" and "Moderate". The wall
// is in front of the room: moderation is switched on the board only (a mis-click here would
// turn it off before the class), and the count of ideas waiting for the teacher is not shown.
// It draws ONLY what the wall's tally frame holds (`tally.ideas`): one HTML bubble per
// bubble of the frame, removed as soon as a frame no longer has it. No board data is read here.
import { forceCollide, forceSimulation, forceX, forceY } from "d3-force";
import { api, evaluationId, follow, h, readToken, reason, t, tn, translatePage, usePollLanguage } from "./common.js";

translatePage();
const cloud = document.getElementById("cloud");
const note = document.getElementById("note");
const live = document.getElementById("live");
const stats = document.getElementById("stats");
const problem = document.getElementById("problem");
const votesSwitch = document.getElementById("votes");
const moderateButton = document.getElementById("moderate");
const prompt = document.getElementById("prompt");
const demoBadge = document.getElementById("demo");

let settings = null;
let lastSeq = 0;
let lastTally = null; // the last frame's tally: the note says why the cloud is empty
/** key → {key, label, count, r, x, y, el} */
const nodes = new Map();

const simulation = forceSimulation([])
  .force("x", forceX(0).strength(0.06))
  .force("y", forceY(0).strength(0.09))
  .force("collide", forceCollide((d) => d.r + 6).iterations(4))
  .alphaDecay(0.035)
  .on("tick", place)
  // `data-packed` marks a cloud at rest (the tests and the bench wait for it).
  .on("end", () => {
    separate([...nodes.values()], GAP);
    placeAll();
    cloud.dataset.packed = "true";
  });

// The gap kept between two bubbles at rest, px (the collide force aims at 12).
const GAP = 3;

/**
 * Pushes overlapping bubbles apart until no pair is closer than `gap` (or 300 passes).
 *
 * The simulation can come to rest with a pair still overlapping: the centering forces and the
 * walls squeeze a crowded cloud, and d3's collide force only nudges. This pass moves each
 * overlapping pair apart along the line of their centres, half each, clamping to the cloud,
 * until the cloud holds no overlap; 60 bubbles, 1,770 pairs a pass, well under a frame.
 */
function separate(list, gap) {
  const { w, h: hgt } = size();
  for (let pass = 0; pass < 300; pass++) {
    let moved = false;
    for (let i = 0; i < list.length; i++) {
      const a = list[i];
      for (let j = i + 1; j < list.length; j++) {
        const b = list[j];
        let dx = b.x - a.x;
        let dy = b.y - a.y;
        let d = Math.hypot(dx, dy);
        const want = a.r + b.r + gap;
        if (d >= want) continue;
        if (d < 1e-6) {
          // Same centre: part them along a direction fixed by the pair, not at random.
          dx = Math.cos(i + j);
          dy = Math.sin(i + j);
          d = 1;
        }
        const push = (want - d) / 2 + 0.01;
        a.x -= (dx / d) * push;
        a.y -= (dy / d) * push;
        b.x += (dx / d) * push;
        b.y += (dy / d) * push;
        moved = true;
      }
    }
    for (const n of list) keepInside(n, w, hgt);
    if (!moved) return;
  }
}

function keepInside(n, w, hgt) {
  n.x = Math.max(-w / 2 + n.r, Math.min(w / 2 - n.r, n.x));
  n.y = Math.max(-hgt / 2 + n.r, Math.min(hgt / 2 - n.r, n.y));
}

// The cloud's size, read on resize only: reading it at every tick would force a layout.
let box = null;
function size() {
  if (!box) box = { w: cloud.clientWidth || 800, h: cloud.clientHeight || 600 };
  return box;
}

/** Radii ∝ √count (area ∝ count), scaled so the bubbles cover about half the cloud. */
function radii(items) {
  const { w, h: hgt } = size();
  const total = items.reduce((s, b) => s + Math.max(b.count, 1), 0) || 1;
  const scale = Math.sqrt((0.48 * w * hgt) / (Math.PI * total));
  const cap = 0.42 * Math.min(w, hgt);
  const floor = Math.min(Math.max(30, Math.min(64, 0.05 * Math.min(w, hgt))), cap);
  return items.map((b) => Math.max(floor, Math.min(cap, scale * Math.sqrt(Math.max(b.count, 1)))));
}

// The label's type follows the bubble, and the bubble the count (radius ∝ √count): two
// bubbles of one count have one type size, whatever their labels. A label wraps at word
// boundaries within the bubble, and one too long for its lines ends with an ellipsis
// (poll.css: line clamp), so a short label never looks bigger than a long one.
const LINE = 1.12; // the label's line-height (poll.css)
const LABEL_EM = 0.2; // the label's type, as a share of the radius
const LABEL_LINES = 3; // lines a label may take before its ellipsis

/** The label's type (px), its box's width and height, from the radius alone. */
function labelBox(r) {
  const px = Math.max(9, r * LABEL_EM);
  return { px, width: r * 1.75, height: LABEL_LINES * LINE * px };
}

function place() {
  const started = performance.now();
  placeAll();
  performance.measure("poll.tick", { start: started });
}

function placeAll() {
  const { w, h: hgt } = size();
  for (const n of nodes.values()) {
    keepInside(n, w, hgt); // the wall never scrolls
    n.el.style.transform = `translate(${(w / 2 + n.x - n.r).toFixed(1)}px, ${(hgt / 2 + n.y - n.r).toFixed(1)}px)`;
  }
}

function bubbleElement(b) {
  const label = h("span", { class: "label" });
  const count = h("span", { class: "count" });
  const el = h("li", { class: "bubble" }, label, count);
  el.dataset.key = b.key;
  return el;
}

/** Draws one frame's cloud: updates, adds and REMOVES bubbles so the DOM is the frame. */
function draw(frame) {
  const started = performance.now();
  drawFrame(frame);
  // Chromium's own timing of each redraw, read by bench/poll_wall.py (Performance API).
  performance.measure("poll.draw", { start: started });
}

function drawFrame(frame) {
  const tally = frame.tally;
  const items = tally ? tally.ideas : [];
  if (tally) lastTally = tally;
  if (tally) {
    stats.textContent = `${tn("wall.answered", tally.answered)} · ${tn("wall.people", tally.joined)}`;
  }
  const seen = new Set(items.map((b) => b.key));
  for (const [key, n] of nodes) {
    if (!seen.has(key)) {
      n.el.remove();
      nodes.delete(key);
    }
  }
  const rs = radii(items);
  const { w, h: hgt } = size();
  items.forEach((b, i) => {
    let n = nodes.get(b.key);
    if (!n) {
      const angle = Math.random() * 2 * Math.PI;
      const dist = 0.15 * Math.min(w, hgt) * Math.random();
      n = { key: b.key, x: Math.cos(angle) * dist, y: Math.sin(angle) * dist, el: bubbleElement(b) };
      nodes.set(b.key, n);
      cloud.append(n.el);
    }
    const sizeChanged = n.r === undefined || Math.abs(n.r - rs[i]) > 0.5;
    n.r = rs[i];
    n.count = b.count;
    const label = n.el.firstChild;
    if (sizeChanged) n.el.style.width = n.el.style.height = `${(2 * n.r).toFixed(1)}px`;
    if (label.textContent !== b.label) label.textContent = b.label;
    // Style writes only where something changed: a frame of 60 bubbles whose counts barely
    // moved costs no relayout of the labels.
    if (n.fitted !== n.r.toFixed(0)) {
      n.fitted = n.r.toFixed(0);
      const fit = labelBox(n.r);
      label.style.fontSize = `${Math.floor(fit.px * 10) / 10}px`;
      label.style.width = `${fit.width.toFixed(1)}px`;
      label.style.maxHeight = `${fit.height.toFixed(1)}px`;
      n.el.lastChild.style.fontSize = `${Math.max(11, Math.min(n.r * 0.22, 30)).toFixed(0)}px`;
    }
    if (n.el.dataset.count !== String(b.count)) {
      n.el.dataset.count = String(b.count);
      n.el.lastChild.textContent = String(b.count);
    }
    const name = `${b.label}: ${b.count}`;
    if (n.el.getAttribute("aria-label") !== name) n.el.setAttribute("aria-label", name);
    if (n.el.style.getPropertyValue("--hue") === "") n.el.style.setProperty("--hue", String(hue(b.key)));
  });
  // Biggest first in the DOM, so a screen reader reads the cloud in count order; moved only
  // when the order changed (a move restyles the whole list).
  const order = items.map((b) => b.key);
  const current = [...cloud.children].map((el) => el.dataset.key);
  if (order.join("\n") !== current.join("\n")) {
    for (const key of order) cloud.append(nodes.get(key).el);
  }
  simulation.nodes([...nodes.values()]);
  delete cloud.dataset.packed;
  simulation.alpha(Math.max(simulation.alpha(), 0.5)).restart();
  showNote();
}

/** The cloud's placeholder, only while it has no bubble: "votes hidden" (§7); ideas waiting
 * for moderation (the tally's `pending`; no count: the room is not told how many, issue 22,
 * only that ideas came, issue 34); no idea shown (every one hidden); or waiting for the first. */
function showNote() {
  const votesOff = settings && !settings.votes;
  let text = "";
  if (!nodes.size) {
    if (votesOff) text = t("wall.hidden");
    else if (lastTally && lastTally.pending > 0) text = t("wall.moderating");
    else if (lastTally && lastTally.answered > 0) text = t("wall.noneShown");
    else text = t("wall.empty");
  }
  note.textContent = text;
  note.hidden = nodes.size > 0;
}

function hue(key) {
  let x = 0;
  for (const c of key) x = (x * 31 + c.codePointAt(0)) >>> 0;
  return x % 360;
}

function showSettings(s) {
  settings = s;
  // The question heads the wall; with votes hidden it is all the wall shows (§7).
  // The room reads the poll's language (its question's), first: translating rewrites the
  // heading's fallback text, which the question then replaces.
  if (usePollLanguage(s.prompt) && lastFrame) draw(lastFrame);
  if (s.prompt) {
    delete prompt.dataset.t;
    prompt.textContent = s.prompt;
  }
  votesSwitch.checked = !!s.votes;
  // The demo's canned replies say so in front of the room too (README "Demo mode").
  demoBadge.hidden = !s.demo;
  showNote();
}

async function loadSettings() {
  try {
    showSettings(await api("/settings"));
  } catch (e) {
    problem.textContent = reason(e);
  }
}

async function flip(name, input) {
  input.disabled = true;
  problem.textContent = "";
  try {
    showSettings(await api("/reveal", { method: "POST", body: { [name]: input.checked } }));
  } catch (e) {
    input.checked = !input.checked;
    problem.textContent = reason(e);
  } finally {
    input.disabled = false;
  }
}

votesSwitch.addEventListener("change", () => flip("votes", votesSwitch));
moderateButton.addEventListener("click", () => {
  // The board opens in another tab (§6) with the same staff token, again in the fragment.
  const url = `/poll/${encodeURIComponent(evaluationId())}/moderate${location.search}#token=${encodeURIComponent(readToken())}`;
  window.open(url, "_blank", "noopener");
});

let settingsTimer = null;
function onFrame(frame) {
  if (frame.seq < lastSeq) return; // an older frame met after a newer one: never go back
  lastSeq = frame.seq;
  lastFrame = frame;
  draw(frame);
  // A switch may be flipped from the board's tab: re-read them, at most every 2 s.
  if (!settingsTimer) settingsTimer = setTimeout(() => ((settingsTimer = null), loadSettings()), 2000);
}

// The cloud's box changes with the window and with the header (the question arrives with the
// settings and may wrap): the same frame is drawn again in the new box.
let lastFrame = null;
new ResizeObserver(() => {
  box = null;
  if (lastFrame) draw(lastFrame);
}).observe(cloud);

(async () => {
  await loadSettings();
  try {
    onFrame(await api("/tally?audience=wall"));
  } catch (e) {
    problem.textContent = reason(e);
  }
  follow(
    "/stream?audience=wall",
    (type, data) => type === "poll.tally" && onFrame(data),
    (state, err) => {
      // A new connection starts with the latest frame, whatever its seq: the guard against
      // going back holds within one connection and against the first GET.
      if (state === "live") lastSeq = 0;
      document.body.dataset.live = state;
      live.textContent = state === "reconnecting" ? t("live.reconnecting") : state === "refused" ? t("live.refused") : "";
      if (err) problem.textContent = reason(err);
    },
  );
})();
