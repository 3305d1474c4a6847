// The one way the page talks to the evaluator: GET on the read API of the same origin, with the
// session's token when one is set. Failures become ApiFailure with a kind the blocks can show.

const ROOT = "/api/v1/gpu-health/";
const TOKEN_KEY = "gpu-health-token";

export class ApiFailure extends Error {
  constructor(kind, status, message) {
    super(message);
    this.kind = kind; // unauthorized | forbidden | notfound | busy | error | network
    this.status = status;
  }
}

// The token lives in sessionStorage: gone when the browser session ends, never in a cookie.
export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  forget: () => sessionStorage.removeItem(TOKEN_KEY),
};

const KINDS = { 401: "unauthorized", 403: "forbidden", 404: "notfound", 503: "busy" };

export async function get(endpoint, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") query.set(key, String(value));
  }
  const headers = { Accept: "application/json" };
  const secret = token.get();
  if (secret) headers.Authorization = `Bearer ${secret}`;
  let response;
  try {
    response = await fetch(`${ROOT}${endpoint}?${query}`, { headers, cache: "no-store" });
  } catch {
    throw new ApiFailure("network", null, "the evaluator did not answer");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    body = null; // not JSON (a proxy's error page): the status alone says what happened
  }
  if (!response.ok) {
    const message = body && typeof body.error === "string" ? body.error : `HTTP ${response.status}`;
    throw new ApiFailure(KINDS[response.status] || "error", response.status, message);
  }
  return body;
}

// What a block says when its request failed; a 404 never shows anything but "not found".
export function failureText(failure) {
  if (!(failure instanceof ApiFailure)) return "could not load: the answer was not understood";
  switch (failure.kind) {
    case "notfound": return "not found";
    case "unauthorized": return "could not load: a valid token is required (401), see above";
    case "forbidden": return "this token may not read nodes (403)";
    case "busy": return "the evaluator is busy (503): try again in a moment";
    case "network": return "could not load: the evaluator did not answer";
    default: return `could not load (HTTP ${failure.status})`;
  }
}
