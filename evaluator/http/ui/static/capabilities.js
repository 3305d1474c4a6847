// The capability matrix: per card, which of the five counters its samples ever carried
// ("collectable" / "unknown"), growth prediction possible, newest sample and count, the
// "collection stalled" badge; per node, a row for the listed cards that have no sample at all
// ("N more cards, all counters unknown": a count, never which ones). The API's note is shown
// verbatim under the table.

import { el, when } from "./dom.js";

export const COUNTERS = ["ecc_uncorrected_total", "ecc_corrected_total", "retired_pages",
  "remapped_rows_pending", "remapped_rows_failure"];
const SHORT = { ecc_uncorrected_total: "ECC uncorr.", ecc_corrected_total: "ECC corr.",
  retired_pages: "retired pages", remapped_rows_pending: "remap pending",
  remapped_rows_failure: "remap failure" };

function cardRow(c) {
  return el("tr", { class: "card-row", "data-node": c.node_id, "data-gpu": c.gpu_index },
    el("td", null, el("span", { class: "node" }, c.node_id), ` #${c.gpu_index} `,
      el("small", null, c.gpu_uuid || "(no UUID)"),
      c.collection_stalled ? el("span", { class: "badge stalled" }, "collection stalled") : null),
    COUNTERS.map((k) => el("td", { class: `metric ${c.metrics[k]}`, "data-metric": k },
      c.metrics[k])),
    el("td", null, c.growth_prediction_possible ? "possible" : "not possible"),
    el("td", null, `${when(c.last_sample_at)} (${c.sample_count} samples)`),
    el("td", { class: "action" }, c.action.action));
}

function unsampledRow(n) {
  const noun = n.unsampled_cards === 1 ? "card" : "cards";
  return el("tr", { class: "unsampled-row", "data-node": n.node_id },
    el("td", { colspan: COUNTERS.length + 4 },
      el("span", { class: "node" }, n.node_id),
      `: ${n.unsampled_cards} more ${noun}, all counters unknown ` +
      `(listed by the node, ${n.listed_cards} in all, but never a known counter)`));
}

export function renderCapabilities(container, body) {
  const extra = new Map(body.nodes.filter((n) => n.unsampled_cards > 0).map((n) => [n.node_id, n]));
  const rows = [];
  let previous = null;
  const flush = (node) => { if (extra.has(node)) { rows.push(unsampledRow(extra.get(node))); extra.delete(node); } };
  for (const card of body.items) {
    if (previous !== null && card.node_id !== previous) flush(previous);
    rows.push(cardRow(card));
    previous = card.node_id;
  }
  if (previous !== null) flush(previous);
  for (const node of extra.values()) rows.push(unsampledRow(node));
  const head = ["card", ...COUNTERS.map((k) => SHORT[k]), "growth prediction", "newest sample",
    "action"];
  container.replaceChildren(
    rows.length
      ? el("table", { class: "capabilities" },
        el("thead", null, el("tr", null, head.map((h) => el("th", null, h)))),
        el("tbody", null, rows))
      : el("p", { class: "empty" }, "No card has stored samples for this source."),
    el("p", { class: "note", id: "capabilities-note" }, body.note));
}
