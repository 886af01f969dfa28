// The workbench's panels talk through window events; this is their one table of names (no panel spells one).
//   init      the page's modules are all loaded: each panel starts on it (never at its own load)
//   token     the token changed                     teams   the served teams (detail: GET /v1/teams' data)
//   store     the server's store (detail: its dialect, or null)
//   open      open a run in the view (detail: {id, record?, started?, user?})
//   shown     the view shows a run (detail: its record)
//   runOver   a followed run ended (detail: its record)
//   answered  a pending item was answered from the page (detail: {run, item})
export const EVENT = Object.freeze({
  init: "teamrun:init",
  token: "teamrun:token",
  teams: "teamrun:teams",
  store: "teamrun:store",
  open: "teamrun:open",
  shown: "teamrun:shown",
  runOver: "teamrun:run-over",
  answered: "teamrun:answered",
});

const NAMES = new Set(Object.values(EVENT));

function known(name) {
  if (!NAMES.has(name)) throw new Error(`no workbench event '${name}' (events.js names them: ${[...NAMES].join(", ")})`);
  return name;
}

// Says ``name`` (one of EVENT) with ``detail`` to every panel.
export function say(name, detail) {
  window.dispatchEvent(new CustomEvent(known(name), { detail }));
}

// Calls ``handler(detail)`` each time ``name`` (one of EVENT) is said.
export function on(name, handler) {
  window.addEventListener(known(name), (e) => handler(e.detail));
}
