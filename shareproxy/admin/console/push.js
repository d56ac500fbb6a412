// A group's push to an HTTP endpoint: where it goes, the endpoint's health, the outcomes since
// each node started and the last answers (GET …/push, summed over the nodes). A group without
// a push shows a line saying so; the push is set with the CLI or the REST API.
import { ApiError, get, seg } from "./api.js";
import { el, setText } from "./dom.js";
import { LiveTable } from "./sortable.js";

const when = (ms) => new Date(ms).toISOString().slice(11, 19);

export function pushSection(group) {
  const summary = el("p", { id: "push-summary" });
  const health = el("p", { id: "push-health" });
  const table = new LiveTable(
    [
      { key: "at", label: "At (UTC)", width: "14%", value: (r) => when(r.at_ms) },
      { key: "tp", label: "Share-partition", width: "22%", value: (r) => `${r.topic}:${r.partition}` },
      { key: "offset", label: "Offset", width: "12%", numeric: true, value: (r) => r.offset },
      { key: "count", label: "Delivery", width: "10%", numeric: true, value: (r) => r.delivery_count },
      { key: "status", label: "Status", width: "12%", value: (r) => (r.status === null ? "no answer" : `${r.status}`) },
      { key: "outcome", label: "Outcome", width: "16%", value: (r) => r.outcome },
      { key: "ms", label: "Took (ms)", width: "14%", numeric: true, value: (r) => r.took_ms },
    ],
    (r) => `${r.topic}:${r.partition}:${r.offset}:${r.at_ms}`,
    "The endpoint's last answers, newest last.",
  );
  table.table.id = "push-recent";
  const load = async () => {
    let push;
    try {
      push = await get(`/v1/share-groups/${seg(group)}/push`);
    } catch (error) {
      if (error instanceof ApiError && error.code === "RESOURCE_NOT_FOUND") {
        setText(summary, "No push: set one with `shareproxy push set` or PUT …/push.");
        setText(health, "");
        table.update([]);
        return;
      }
      throw error;
    }
    const s = push.status;
    setText(summary, `POST ${push.url} · topics ${push.topics.join(", ")} · at most ${push.max_in_flight} in flight per node · time-out ${push.timeout_ms} ms · order: ${push.ordered}`);
    const outcomes = Object.entries(s.outcomes).map(([k, v]) => `${k} ${v}`).join(", ");
    const down = s.endpoint === "down" ? ` since ${when(s.endpoint_down_since_ms)} (last status ${s.last_failure_status ?? "none"})` : "";
    setText(health, `Endpoint ${s.endpoint}${down} · in flight ${s.in_flight} · ${outcomes}${s.problems.length ? ` · ${s.problems.join("; ")}` : ""}`);
    health.className = s.endpoint === "down" || s.problems.length ? "refusal" : "";
    table.update(s.recent);
  };
  return { section: [el("h2", {}, "Push"), summary, health, table.table], load };
}
