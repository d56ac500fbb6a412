// The REST API, same origin: the browser sends the credentials it was asked for.
const problem = () => document.getElementById("problem");

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const seg = (value) => encodeURIComponent(value);

export async function call(method, path, body) {
  const init = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const answer = await fetch(path, init);
  if (answer.status === 204) return null;
  let data = null;
  try {
    data = await answer.json();
  } catch {
    data = null;
  }
  if (!answer.ok) {
    const code = (data && data.error_code) || `HTTP ${answer.status}`;
    const message = (data && (data.message || JSON.stringify(data.detail))) || answer.statusText;
    throw new ApiError(answer.status, code, message);
  }
  return data;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body);

// The last error, in a bar below the page (never over it). An action's error stays until
// dismissed, the next action or a page change; a background refresh's error (`refresh`) also
// goes once a refresh of the page succeeds, and never hides an action's error still shown.
let fromRefresh = false;

export function report(error, refresh = false) {
  const box = problem();
  const text = document.getElementById("problem-text");
  if (error === null) {
    box.hidden = true;
    text.textContent = "";
    fromRefresh = false;
    return;
  }
  if (refresh && !box.hidden && !fromRefresh) return;
  fromRefresh = refresh;
  text.textContent = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
  box.hidden = false;
}

// a refresh of the page succeeded: its earlier failure is over
export function refreshed() {
  if (fromRefresh) report(null);
}

document.getElementById("problem-close").addEventListener("click", () => report(null));
