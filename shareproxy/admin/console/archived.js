// Archived records (rejected, or at the delivery limit) from the archive log with their first
// record's key and value previewed, each range redriven to its source topic after the dry
// run's plan is shown.
import { get, post, report, seg } from "./api.js";
import { confirmPlan } from "./confirm.js";
import { el, setText } from "./dom.js";
import { LiveTable } from "./sortable.js";

const ranges = (list) => list.map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`)).join(", ") || "none";

// the first record's key or value, previewed by the API (bounded, binary shown by its size)
const shown = (a, part) => (a.first_record ? (a.first_record[part] ?? "(null)") : null);

function previewCell(part) {
  return (cell, a) => {
    const text = shown(a, part);
    setText(cell, text);
    cell.setAttribute("title", text ?? "not read: gone from the log, or no Read on the topic");
  };
}

export function archivedSection(group, afterChange) {
  const base = `/v1/share-groups/${seg(group)}/archived`;
  const dead = el("p", { id: "dead-letter-topic" });
  const table = new LiveTable(
    [
      { key: "tp", label: "Share-partition", width: "13%", value: (a) => `${a.topic ?? a.topic_id}:${a.partition}` },
      { key: "offsets", label: "Offsets", width: "9%", value: (a) => `${a.first_offset}–${a.last_offset}` },
      { key: "reason", label: "Reason", width: "11%", value: (a) => a.reason },
      { key: "count", label: "Deliveries", width: "8%", numeric: true, value: (a) => a.delivery_count },
      { key: "at", label: "Archived at", width: "13%", value: (a) => a.archived_at },
      { key: "redriven", label: "Redriven at", width: "13%", value: (a) => a.redriven_at },
      { key: "rkey", label: "First key", width: "12%", value: (a) => shown(a, "key"), render: previewCell("key") },
      { key: "rvalue", label: "First value", width: "13%", value: (a) => shown(a, "value"), render: previewCell("value") },
      {
        key: "act", label: "Redrive", width: "8%", value: () => "",
        render(cell, a) {
          if (cell.firstChild || a.topic === null) return;
          const button = el("button", { type: "button" }, "Redrive…");
          button.setAttribute("aria-label", `Redrive offsets ${a.first_offset}–${a.last_offset} of ${a.topic}:${a.partition}`);
          button.addEventListener("click", async () => {
            const body = { records: [{ topic: a.topic, partition: a.partition, first_offset: a.first_offset, last_offset: a.last_offset }] };
            let plan;
            try {
              plan = await post(`${base}/redrive`, { ...body, dry_run: true });
            } catch (error) {
              report(error); // refused (no Write on the topic, the range gone, the store down)
              return;
            }
            if (!button.isConnected) return; // the page changed while the dry run ran
            report(null);
            confirmPlan("Redrive archived records: the plan (dry run)",
              plan.partitions.map((p) => el("p", { class: "redrive-plan" },
                `${p.topic}:${p.partition}: produce again ${ranges(p.redrive)}; already redriven ${ranges(p.already_redriven)}`)),
              "Redrive",
              async () => {
                await post(`${base}/redrive`, { ...body, dry_run: false });
                await afterChange();
              });
          });
          cell.append(button);
        },
      },
    ],
    (a) => `${a.topic_id}:${a.partition}:${a.first_offset}`,
    "Archived records (the archive log), newest pages first as the API lists them.",
  );
  table.table.id = "archived";
  // a range's first record never changes: its preview is read from the log once, not on every
  // refresh (each costs the proxy an upstream fetch)
  const previews = new Map();
  const key = (a) => `${a.topic_id}:${a.partition}:${a.first_offset}`;
  const load = async () => {
    let answer = await get(`${base}?limit=100`);
    if (answer.archived.some((a) => !previews.has(key(a)))) {
      answer = await get(`${base}?limit=100&preview=true`);
      for (const a of answer.archived) previews.set(key(a), a.first_record ?? null);
    }
    answer.archived = answer.archived.map((a) => ({ ...a, first_record: previews.get(key(a)) ?? null }));
    setText(dead, answer.dead_letter_topic
      ? `Dead-letter topic: ${answer.dead_letter_topic}; waiting on this node: ${answer.dead_letters_waiting.map((w) => `${w.topic}:${w.partition} ${w.waiting}${w.problem ? ` (${w.problem})` : ""}`).join(", ") || "none"}`
      : "No dead-letter topic.");
    table.update(answer.archived);
  };
  return { section: [el("h2", {}, "Archived records"), dead, table.table], load };
}
