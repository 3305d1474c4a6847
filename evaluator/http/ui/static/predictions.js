// The prediction list: card, type label, status badge, t0 -> window end, frozen rule version,
// evidence and outcome. The type label comes from the stored signal name; a name this page does
// not know is labelled "unrecognised" (its raw name beside it), never guessed from similar words.

import { el, when } from "./dom.js";

export const PAGE_SIZE = 50;

const TYPES = {
  ecc_uncorrected_present: "uncorrectable ECC present",
  remap_failure_present: "row remap failure",
  ecc_corrected_growth: "correctable ECC growth",
  remap_pending_growth: "pending row remaps growing",
  retired_pages_growth: "retired pages growing",
};

export function typeLabel(signal) {
  return Object.hasOwn(TYPES, signal) ? TYPES[signal] : "unrecognised";
}

const EMPTY = "No predictions. That does not mean every card is healthy: a card without the " +
  "counters a rule needs is never predicted. See the collection capabilities below.";

function row(item, current, onSelect) {
  const type = typeLabel(item.signal);
  const tr = el("tr", { class: "prediction", "data-id": item.id, "data-node": item.node_id,
                        "data-gpu": item.gpu_index, tabindex: 0 },
    el("td", { class: "card-cell" },
      el("span", { class: "node" }, item.node_id), ` #${item.gpu_index} `,
      el("small", null, item.gpu_uuid || "(no UUID)")),
    el("td", { class: "type", "data-known": type !== "unrecognised" }, type,
      type === "unrecognised" ? el("small", null, ` (${item.signal})`) : null,
      el("small", { class: "layer" }, ` ${item.layer}`)),
    el("td", null, el("span", { class: `badge status-${item.status}` }, item.status)),
    el("td", null, `${when(item.t0)} → ${when(item.window_end)}`),
    el("td", { class: item.rule_version === current ? "version" : "version older" },
      item.rule_version,
      item.rule_version === current ? null : el("small", null, " (not the current version)")),
    el("td", { class: "evidence" }, item.evidence,
      item.outcome ? el("div", { class: "outcome" }, `outcome: ${item.outcome}`) : null));
  const pick = () => onSelect({ node_id: item.node_id, gpu_index: item.gpu_index });
  tr.addEventListener("click", pick);
  tr.addEventListener("keydown", (event) => { if (event.key === "Enter") pick(); });
  return tr;
}

export function renderPredictions(container, body, onSelect) {
  if (!body.items.length) {
    container.replaceChildren(el("p", { class: "empty" }, EMPTY));
    return;
  }
  const head = ["card", "type", "status", "t0 → window end", "rule version", "evidence / outcome"];
  container.replaceChildren(el("table", { class: "predictions" },
    el("thead", null, el("tr", null, head.map((h) => el("th", null, h)))),
    el("tbody", null, body.items.map((item) => row(item, body.current_rule_version, onSelect)))));
}

// "page 2 of 3 · 120 predictions"; a single page shows the total only.
export function pageText(total, offset) {
  const noun = total === 1 ? "prediction" : "predictions";
  if (total <= PAGE_SIZE) return `${total} ${noun}`;
  const page = Math.floor(offset / PAGE_SIZE) + 1;
  return `page ${page} of ${Math.ceil(total / PAGE_SIZE)} · ${total} ${noun}`;
}
