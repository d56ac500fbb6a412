// /ui: every share group the principal may describe, and the proxy nodes with what each
// serves, refreshed in place.
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
  const nodes = nodesTable();
  const unreached = el("p", { class: "muted", id: "nodes-unreached" });
  main.append(el("h1", {}, "Share groups"), table.table, el("h2", {}, "Proxy nodes"), nodes.table,
    unreached);
  return async () => {
    const [groups, cluster] = await Promise.all([get("/v1/share-groups"), get("/v1/nodes")]);
    table.update(groups);
    nodes.update(cluster.nodes.map((n) => ({ ...n, answering: n.node_id === cluster.node_id })));
    setText(unreached, cluster.unreached.length ? `Not reached: ${cluster.unreached.join("; ")}` : "");
  };
}

function nodesTable() {
  const table = new LiveTable(
    [
      {
        key: "node", label: "Node", width: "8%", numeric: true, value: (n) => n.node_id,
        render: (cell, n) => setText(cell, n.answering ? `${n.node_id} (this)` : n.node_id),
      },
      {
        key: "listeners", label: "Listeners", width: "30%",
        value: (n) => Object.entries(n.listeners).map(([p, a]) => `${p}://${a}`).join(", "),
      },
      { key: "admin", label: "Admin API", width: "22%", value: (n) => n.admin_url },
      { key: "lease", label: "Lease", width: "10%", value: (n) => (n.lease_live ? "live" : "lapsed") },
      { key: "groups", label: "Groups coordinated", width: "15%", numeric: true, value: (n) => n.groups_coordinated },
      { key: "partitions", label: "Share-partitions led", width: "15%", numeric: true, value: (n) => n.share_partitions_led },
    ],
    (n) => String(n.node_id),
    "The live proxy nodes, each with the share groups it coordinates and the share-partitions it leads.",
  );
  table.table.id = "nodes";
  return table;
}
