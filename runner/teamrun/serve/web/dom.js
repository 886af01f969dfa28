// What every panel of the workbench uses: elements by id, building elements, the API with the token, a cost,
// a status word in the shared palette, and opening a run. Everything from the server or a model is put in with
// textContent, never as HTML.
import { EVENT, say } from "./events.js";

export const $ = (id) => document.getElementById(id);
export const workbench = { teams: [], store: null };  // what the server serves, and its store (null: none)

export function headers() {
  const h = { "Content-Type": "application/json" };
  const token = $("token").value.trim();
  if (token) h.Authorization = "Bearer " + token;
  return h;
}

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export async function api(path, options) {
  const response = await fetch(path, Object.assign({ headers: headers() }, options || {}));
  const body = response.headers.get("content-type")?.includes("json") ? await response.json() : null;
  if (!response.ok) {
    const error = new Error((body && body.error && body.error.message) || response.statusText);
    error.status = response.status;  // what the server answered (401, 404, 409, ...), for the messages that say it
    throw error;
  }
  return body;
}

// A cost in dollars: the view's rule (TeamrunView.usd, the text teamrun.money.format_usd writes). The view's
// classic scripts run before any module of the page.
export function usd(v) {
  return window.TeamrunView.usd(v);
}

// The classes of a status word: its colour is the run view's palette (view.css st-*), one for the whole page.
export function statusClasses(status) {
  return "status-word st-" + window.TeamrunView.statusClass(status) + " status-" + status;
}

// A status shown as a word with its colour (never the colour alone).
export function statusWord(status, tag) {
  return el(tag || "span", statusClasses(status), status);
}

export function openRun(id, how) {
  say(EVENT.open, Object.assign({ id }, how || {}));
}
