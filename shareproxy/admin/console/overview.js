// /ui: every share group the principal may describe, refreshed in place.
import { get } from "./api.js";
import { age, el, setText } from "./dom.js";
import { LiveTable } from "./sortable.js";

export function overview(main) {
  const table = new LiveTable(
    [
      {
        key: "group", label: "Group", width: "28%", value: (g) => g.group_id,
        render(cell, g) {
          let link = cell.firstChild;
          if (!link) {
            link = el("a", { href: `#/groups/${encodeURIComponent(g.group_id)}` });
            cell.append(link);
          }
          setText(link, g.group_id);
          cell.setAttribute("title", g.group_id);
        },
      },
      { key: "state", label: "State", width: "10%", value: (g) => g.state },
      { key: "members", label: "Members", width: "10%", numeric: true, value: (g) => g.members },
      { key: "topics", label: "Topics", width: "26%", value: (g) => g.topics.join(", ") },
      { key: "lag", label: "Lag", width: "10%", numeric: true, value: (g) => g.lag },
      {
        key: "age", label: "Oldest unacked", width: "16%", numeric: true,
        value: (g) => g.oldest_unacked_age_seconds,
        render: (cell, g) => setText(cell, age(g.oldest_unacked_age_seconds)),
      },
    ],
    (g) => g.group_id,
    "Share groups, refreshed every few seconds. Sort by a column with its header button.",
  );
  table.table.id = "groups";
  main.append(el("h1", {}, "Share groups"), table.table);
  return async () => table.update(await get("/v1/share-groups"));
}
