// The page's state and the order of its requests. Nothing here refreshes by itself: data is
// fetched when the page loads and when the operator acts (source switch, filter, page, card).
// Every load carries the generation it started in; an answer that arrives after the source was
// switched belongs to the old generation and is dropped, so real and simulated data never share
// the screen, not even for a moment.

import { ApiFailure, failureText, get, token } from "./api.js";
import { renderCapabilities } from "./capabilities.js";
import { byId, clear, el, show } from "./dom.js";
import { renderEccRate } from "./eccrate.js";
import { PAGE_SIZE, pageText, renderPredictions } from "./predictions.js";
import { renderStats } from "./stats.js";

const LOCAL_NOTICE = byId("notice").textContent;
const BLOCKS = ["stats", "predictions", "ecc", "capabilities"];
const state = { source: "real", generation: 0, status: "", offset: 0, card: null, cards: [] };

function hashCard() {
  // The node is everything before the last "/": node ids may contain one (backtest imports).
  const match = /^#card=(.+)\/(\d+)$/.exec(window.location.hash);
  if (!match) return null;
  try {
    return { node_id: decodeURIComponent(match[1]), gpu_index: Number(match[2]) };
  } catch {
    return null; // a malformed link (URIError) opens the page as if it named no card
  }
}

// ?source=simulated opens the page on the simulated data (the demo's banner links it); any
// other value, or none, opens it on the real data.
function linkedSource() {
  return new URLSearchParams(window.location.search).get("source") === "simulated"
    ? "simulated" : "real";
}

// The address follows the switch, so a copied link opens what the operator sees.
function linkSource(source) {
  const url = new URL(window.location.href);
  if (source === "real") url.searchParams.delete("source");
  else url.searchParams.set("source", source);
  window.history.replaceState(null, "", url);
}

function message(id, text, kind) {
  byId(id).replaceChildren(el("p", { class: kind }, text));
}

function loading() {
  for (const id of BLOCKS) message(id, "loading…", "loading");
}

// One request of the current generation; null when it failed (the block then says why) or when
// the page moved on meanwhile.
async function fetchFor(generation, block, endpoint, params) {
  try {
    const body = await get(endpoint, { ...params, source: state.source });
    return generation === state.generation ? body : null;
  } catch (failure) {
    if (generation !== state.generation) return null;
    if (failure instanceof ApiFailure && failure.kind === "unauthorized") askToken();
    message(block, failureText(failure), failure.kind === "notfound" ? "notfound" : "failed");
    return null;
  }
}

function askToken() {
  byId("token-reason").textContent = token.get()
    ? "The evaluator refused the token. Enter another one (scope nodes:read)."
    : "This evaluator requires an API token (scope nodes:read).";
  show(byId("token-form"), true);
}

async function loadStats(generation) {
  byId("notice").textContent = LOCAL_NOTICE;
  byId("notice").dataset.origin = "local";
  const body = await fetchFor(generation, "stats", "prediction-stats", {});
  if (!body) return;
  byId("notice").textContent = body.disclaimer; // verbatim
  byId("notice").dataset.origin = "api";
  renderStats(byId("stats"), body);
}

async function loadPredictions(generation) {
  const body = await fetchFor(generation, "predictions", "predictions",
    { status: state.status, limit: PAGE_SIZE, offset: state.offset });
  byId("page-info").textContent = body ? pageText(body.total, state.offset) : "";
  show(byId("page-prev"), Boolean(body) && state.offset > 0);
  show(byId("page-next"), Boolean(body) && state.offset + PAGE_SIZE < body.total);
  if (body) renderPredictions(byId("predictions"), body, selectCard);
}

function cardKey(card) {
  return `${card.node_id}/${card.gpu_index}`;
}

function fillCardSelect() {
  const select = clear(byId("card-select"));
  const listed = state.cards.map((c) => el("option", { value: cardKey(c) },
    `${c.node_id} #${c.gpu_index}${c.collection_stalled ? " (stalled)" : ""}`));
  if (state.card && !state.cards.some((c) => cardKey(c) === cardKey(state.card))) {
    listed.unshift(el("option", { value: cardKey(state.card) },
      `${state.card.node_id} #${state.card.gpu_index}`));
  }
  select.append(...listed);
  if (state.card) select.value = cardKey(state.card);
}

async function loadCapabilities(generation) {
  const body = await fetchFor(generation, "capabilities", "capabilities", {});
  if (!body) {
    if (generation === state.generation) message("ecc", "no card to show", "failed");
    return;
  }
  state.cards = body.items;
  renderCapabilities(byId("capabilities"), body);
  // The first card with an ECC counter, unless the address or a click chose one.
  state.card = state.card || hashCard() || body.items.find((c) =>
    c.metrics.ecc_corrected_total === "collectable" ||
    c.metrics.ecc_uncorrected_total === "collectable") || null;
  fillCardSelect();
  if (state.card) await loadEccRate(generation);
  else message("ecc", "no card with an ECC counter has samples for this source", "empty");
}

async function loadEccRate(generation) {
  message("ecc", "loading…", "loading");
  const card = state.card;
  const body = await fetchFor(generation, "ecc", "ecc-rate",
    { node_id: card.node_id, gpu_index: card.gpu_index });
  if (!body) return;
  const capability = state.cards.find((c) => cardKey(c) === cardKey(card)) || null;
  renderEccRate(byId("ecc"), body, capability);
}

function selectCard(card) {
  state.card = card;
  fillCardSelect();
  loadEccRate(state.generation);
  byId("ecc-block").scrollIntoView({ block: "nearest" });
}

// Everything for the current source, from a clean screen.
function loadAll() {
  state.generation += 1;
  const generation = state.generation;
  loading();
  loadStats(generation);
  loadPredictions(generation);
  loadCapabilities(generation);
}

function switchSource(source) {
  // Clear first: the old source's rows, selection and page must be gone before anything loads.
  state.source = source;
  linkSource(source);
  state.status = "";
  state.offset = 0;
  state.card = null;
  state.cards = [];
  byId("status-filter").value = "";
  clear(byId("card-select"));
  byId("page-info").textContent = "";
  const simulated = source === "simulated";
  show(byId("simulated-banner"), simulated);
  document.body.classList.toggle("simulated", simulated);
  for (const badge of document.querySelectorAll(".badge.simulated")) show(badge, simulated);
  loadAll();
}

function showToken() {
  const secret = token.get();
  show(byId("token-status"), Boolean(secret));
  byId("token-name").textContent = secret ? "Using a token for this browser session." : "";
}

function wire() {
  for (const input of document.querySelectorAll("input[name=source]")) {
    input.addEventListener("change", () => { if (input.checked) switchSource(input.value); });
  }
  byId("status-filter").addEventListener("change", (event) => {
    state.status = event.target.value;
    state.offset = 0; // a new filter starts at page 1
    loadPredictions(state.generation);
  });
  byId("page-prev").addEventListener("click", () => {
    state.offset = Math.max(0, state.offset - PAGE_SIZE);
    loadPredictions(state.generation);
  });
  byId("page-next").addEventListener("click", () => {
    state.offset += PAGE_SIZE;
    loadPredictions(state.generation);
  });
  byId("card-select").addEventListener("change", (event) => {
    const [node, gpu] = [event.target.value.slice(0, event.target.value.lastIndexOf("/")),
      event.target.value.slice(event.target.value.lastIndexOf("/") + 1)];
    selectCard({ node_id: node, gpu_index: Number(gpu) });
  });
  byId("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = byId("token-input").value.trim();
    if (!value) return;
    token.set(value);
    byId("token-input").value = "";
    show(byId("token-form"), false);
    showToken();
    loadAll();
  });
  byId("token-forget").addEventListener("click", () => {
    token.forget();
    showToken();
    switchSource(state.source);
  });
}

wire();
showToken();
const linked = linkedSource();
for (const input of document.querySelectorAll("input[name=source]")) {
  input.checked = input.value === linked;
}
switchSource(linked);
