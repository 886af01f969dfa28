// The workbench of `teamrun serve`: its entry module. Each panel is a module of its own (newrun.js, history.js,
// pending.js, runview.js, chat.js) that listens for the events it needs (events.js, their one table of names)
// and starts on EVENT.init, said here once every module of the page has loaded: no panel can be asked for
// anything before the others exist (the "TeamrunGraph is not defined" of script-order globals).
import { EVENT, say } from "./events.js";
import "./newrun.js";
import "./runview.js";
import "./history.js";
import "./pending.js";
import "./chat.js";

say(EVENT.init);
