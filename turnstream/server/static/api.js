// The API key and the HTTP API. The key arrives in the address's fragment (`#key=…`, printed by
// `turnstream serve`), moves to localStorage and leaves the address bar at once; every request
// sends it as a bearer key. The fragment may also name the open chat (`session=…`).

export const KEY_STORAGE = "turnstream.key";

export function fragment() {
  return new URLSearchParams(location.hash.replace(/^#/, ""));
}

export function setFragment(params) {
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
}

export function takeKeyFromFragment() {
  const frag = fragment();
  const key = frag.get("key");
  if (key) {
    localStorage.setItem(KEY_STORAGE, key);
    frag.delete("key");
    setFragment(frag);
  }
  return localStorage.getItem(KEY_STORAGE);
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function errorText(resp) {
  try {
    const body = await resp.json();
    const detail = body.detail ?? body.message ?? body.error ?? body;
    return typeof detail === "string" ? detail : JSON.stringify(detail);
  } catch {
    return `${resp.status} ${resp.statusText}`;
  }
}

export const api = {
  key: null,
  onUnauthorised: () => {},
  headers(extra = {}) {
    const h = { ...extra };
    if (this.key) h.Authorization = `Bearer ${this.key}`;
    return h;
  },
  async raw(path, { method = "GET", body, headers = {}, signal } = {}) {
    const init = { method, headers: this.headers(headers), signal };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    const sentWith = this.key;
    const resp = await fetch(path, init);
    if (resp.status === 401) {
      // Only a refusal of the key in use asks again: one answered after the user typed a new key
      // (a request still in flight with the old one) must not reopen the login dialog.
      if (sentWith === this.key) this.onUnauthorised();
      throw new ApiError(401, "unauthorised");
    }
    return resp;
  },
  async json(path, opts) {
    const resp = await this.raw(path, opts);
    if (!resp.ok) throw new ApiError(resp.status, await errorText(resp));
    if (resp.status === 204) return null;
    const text = await resp.text();
    return text ? JSON.parse(text) : null;
  },
};
