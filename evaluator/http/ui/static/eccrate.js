// Hourly ECC increases of one card, as two bar charts (correctable, uncorrectable). An hour whose
// increase the API could not compute is shaded "unknown" with its reason, never drawn as 0; a
// counter the card never reported is one large "unknown" instead of a chart. The increases are
// computed by the API (/ecc-rate): both hour boundaries fresh, same card, no decrease.

import { el, svg, when } from "./dom.js";

const SERIES = [["ecc_corrected_total", "correctable"], ["ecc_uncorrected_total", "uncorrectable"]];
const BAR = 4;
const HEIGHT = 100;
const REASONS = {
  stale_or_missing: "no fresh sample at an hour boundary",
  uuid_changed: "the card in the slot changed",
  unknown_value: "the counter was unknown at a boundary",
  counter_decreased: "the counter went down (reset or wrap)",
};

function bar(hour, x, max, key) {
  const value = hour[key];
  const label = `${when(hour.start)}: `;
  if (value.increase === null) {
    return svg("rect", { class: "unknown", x, y: 0, width: BAR, height: HEIGHT,
                         "data-hour": hour.start, "data-reason": value.reason },
      svg("title", null, `${label}unknown (${REASONS[value.reason] || value.reason})`));
  }
  const h = value.increase === 0 ? 1 : Math.max(2, Math.round((value.increase / max) * (HEIGHT - 4)));
  return svg("rect", { class: value.increase === 0 ? "zero" : "bar", x, y: HEIGHT - h,
                       width: BAR - 1, height: h, "data-hour": hour.start,
                       "data-increase": value.increase },
    svg("title", null, `${label}+${value.increase}`));
}

function chart(body, key) {
  const known = body.hours.map((h) => h[key].increase).filter((v) => v !== null);
  const max = Math.max(1, ...known);
  return svg("svg", { class: "rate-chart", viewBox: `0 0 ${body.hours.length * BAR} ${HEIGHT}`,
                      width: body.hours.length * BAR, height: HEIGHT, role: "img",
                      "aria-label": `${key} per hour` },
    body.hours.map((hour, i) => bar(hour, i * BAR, max, key)));
}

function coverageText(c) {
  const sum = c.sum_increase === null ? "unknown" : String(c.sum_increase);
  return `${c.computable_hours} of ${c.total_hours} hours computable · ` +
    `sum of the known increases: ${sum}`;
}

function panel(body, key, name, capability) {
  const head = el("h3", null, `${name} errors per hour`);
  if (capability && capability.metrics[key] === "unknown") {
    return el("div", { class: "rate-panel", "data-series": key }, head,
      el("p", { class: "big-unknown" }, "unknown"),
      el("p", null, `this card's stored samples never carried the ${name} counter: it is not ` +
        "collected here, which says nothing about its errors (not zero)"));
  }
  return el("div", { class: "rate-panel", "data-series": key }, head, chart(body, key),
    el("p", { class: "coverage" }, coverageText(body.coverage[key])));
}

export function renderEccRate(container, body, capability) {
  container.replaceChildren(
    el("p", null, `${body.node_id} #${body.gpu_index}, ${when(body.since)} → ${when(body.until)} ` +
      `(UTC); shaded: unknown hour, not zero`),
    ...SERIES.map(([key, name]) => panel(body, key, name, capability)),
    el("p", { class: "note" }, body.note));
}
