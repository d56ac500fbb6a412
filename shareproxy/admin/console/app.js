// The console's router: #/ the overview, #/groups/{id} a group; each page refreshes every
// few seconds, updating its cells in place.
import { refreshed, report } from "./api.js";
import { cancelPlan } from "./confirm.js";
import { clear, setText } from "./dom.js";
import { groupPage } from "./group.js";
import { overview } from "./overview.js";

const REFRESH_MS = 3000;
let timer = null;
let generation = 0;

function route() {
  const match = /^#\/groups\/(.+)$/.exec(location.hash);
  if (!match) return { page: "overview" };
  try {
    return { page: "group", group: decodeURIComponent(match[1]) };
  } catch {
    return { page: "group", group: match[1] }; // not percent-encoded: taken as written
  }
}

async function show() {
  const mine = ++generation;
  clearTimeout(timer);
  cancelPlan();
  const main = document.getElementById("main");
  clear(main);
  report(null);
  const where = route();
  const refresh = where.page === "group" ? groupPage(main, where.group) : overview(main);
  document.title = where.page === "group" ? `${where.group} · shareproxy` : "Share groups · shareproxy";
  const tick = async () => {
    if (mine !== generation) return;
    try {
      await refresh();
      if (mine !== generation) return;
      setText(document.getElementById("refreshed"), `updated ${new Date().toLocaleTimeString()}`);
      main.setAttribute("data-loaded", "true");
      refreshed();
    } catch (error) {
      if (mine === generation) report(error, true);
    }
    if (mine === generation) timer = setTimeout(tick, REFRESH_MS);
  };
  await tick();
}

window.addEventListener("hashchange", show);
show();
