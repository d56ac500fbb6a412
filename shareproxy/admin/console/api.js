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

// The last error, in a bar below the page (never over it) until dismissed or cleared.
export function report(error) {
  const box = problem();
  const text = document.getElementById("problem-text");
  if (error === null) {
    box.hidden = true;
    text.textContent = "";
    return;
  }
  text.textContent = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
  box.hidden = false;
}

document.getElementById("problem-close").addEventListener("click", () => report(null));
