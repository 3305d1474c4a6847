// The two statistics cards (hit window N = 7 and N = 30 days). Below the sample gates the API's
// ratios are null: the card then says "not enough samples" with the reasons, never 0%. The raw
// counts are shown in both cases.

import { el, interval, known, percent, when } from "./dom.js";

function reasons(w) {
  const list = [];
  if (w.observed_days === null) list.push("no samples observed in the period");
  else if (w.observed_days < w.required_days) {
    list.push(`observed ${w.observed_days.toFixed(1)} days, needs ${w.required_days}`);
  }
  if (w.matured < w.required_matured) {
    list.push(`${w.matured} matured predictions (hit + miss), needs ${w.required_matured}`);
  }
  return list;
}

function ratio(name, value, ci) {
  return el("p", { class: "ratio", "data-ratio": name },
    el("span", { class: "ratio-name" }, `${name} `),
    el("strong", null, percent(value)),
    ci ? el("small", { class: "ci" }, ` (${interval(ci)})`) : null);
}

function ratios(w) {
  if (!w.sufficient) {
    return el("div", { class: "insufficient" },
      el("p", { class: "insufficient-title" }, "Not enough samples: no hit rate yet"),
      el("ul", { class: "reasons" }, reasons(w).map((r) => el("li", null, r))));
  }
  return el("div", { class: "sufficient" },
    ratio("precision", w.precision, w.precision_ci95),
    ratio("recall", w.recall, w.recall_ci95),
    ratio("F1", w.f1, null));
}

function counts(w) {
  const p = w.predictions;
  const rows = [
    ["pending", p.pending], ["hit", p.hit], ["miss", p.miss], ["voided", p.voided],
    ["matured (hit + miss)", w.matured],
    ["faulty cards", w.faulty_cards], ["predicted faulty cards", w.predicted_faulty_cards],
    ["missed cards", w.missed_cards], ["monitorable cards", w.monitorable_cards],
    ["exposure (card-days)", known(w.exposure_card_days)],
    ["observed days", w.observed_days === null ? "unknown" : w.observed_days.toFixed(1)],
  ];
  return el("dl", { class: "counts" },
    rows.map(([name, value]) => [el("dt", null, name), el("dd", null, String(value))]));
}

function missed(w) {
  if (!w.missed.length) return null;
  const shown = w.missed.slice(0, 10);
  return el("details", { class: "missed" },
    el("summary", null, `missed cards (${w.missed.length})`),
    el("ul", null, shown.map((m) => el("li", null,
      `${m.node_id} #${m.gpu_index} ${m.gpu_uuid || "(no UUID)"}, first fault ${when(m.first_fault_at)}`))),
    w.missed.length > shown.length ? el("p", null, `and ${w.missed.length - shown.length} more`) : null);
}

export function renderStats(container, body) {
  container.replaceChildren(...body.windows.map((w) => el("article",
    { class: `card ${w.sufficient ? "is-sufficient" : "is-insufficient"}`, "data-window": w.window_days },
    el("h3", null, `Hit window N = ${w.window_days} days`),
    ratios(w),
    counts(w),
    missed(w),
    el("p", { class: "note" }, w.note),
    el("p", { class: "versions" }, `rule versions: ${w.rule_versions.join(", ") || "none"}`))));
}
