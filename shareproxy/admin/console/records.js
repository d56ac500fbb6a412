// Single in-flight records changed from the page: release, accept (skip) or reject a run of
// offsets of one share-partition, shown as planned (with their states now) before it is made.
import { post, report, seg } from "./api.js";
import { confirmPlan } from "./confirm.js";
import { el } from "./dom.js";

const ACTIONS = {
  release: "Acquired → Available (delivery count kept)",
  accept: "Available or Acquired → Acknowledged (skipped)",
  reject: "Available or Acquired → Archived (or Archiving with a dead-letter topic)",
  deliver: "Available → due now (a record waiting for its delivery time, or in a back-off)",
};

function statesNow(partition, first, last) {
  return (partition?.ranges || [])
    .filter((r) => r.last_offset >= first && r.first_offset <= last)
    .map((r) => `${Math.max(r.first_offset, first)}–${Math.min(r.last_offset, last)}: ${r.state}`);
}

// Why offsets from..to cannot change (the API refuses any outside SPSO–SPEO), or null.
function outsideInFlight(partition, from, to) {
  const spso = partition.start_offset;
  const speo = partition.end_offset;
  if (spso === null || spso === undefined || spso >= speo) {
    return "Not possible: no record of this share-partition is in flight.";
  }
  if (from >= spso && to < speo) return null;
  return `Not possible: only in-flight offsets can change, ${spso}–${speo - 1} (SPSO ${spso}, SPEO ${speo}).`;
}

// partitions(): the share-partitions as last shown (topic, partition, ranges)
export function recordsForm(group, partitions, refresh) {
  const which = el("select", { id: "records-partition", name: "partition" });
  const first = el("input", { id: "records-first", name: "first", type: "number", min: 0, size: 8 });
  const last = el("input", { id: "records-last", name: "last", type: "number", min: 0, size: 8 });
  const action = el("select", { id: "records-action", name: "action" },
    ...Object.keys(ACTIONS).map((a) => el("option", { value: a }, a)));
  // disabled until the first refresh offers a share-partition
  const submit = el("button", { type: "submit", disabled: "" }, "Change records…");
  const form = el("form", { class: "reset", "aria-label": "Change records" },
    el("label", { for: "records-partition" }, "Share-partition", which),
    el("label", { for: "records-first" }, "First offset", first),
    el("label", { for: "records-last" }, "Last offset (default: first)", last),
    el("label", { for: "records-action" }, "Action", action),
    submit);
  form.refill = () => {
    const keep = which.value;
    const keys = partitions().map((p) => `${p.topic}:${p.partition}`);
    submit.disabled = keys.length === 0;
    if (keys.join() === [...which.options].map((o) => o.value).join()) return;
    while (which.firstChild) which.firstChild.remove();
    for (const key of keys) which.append(el("option", { value: key }, key));
    if (keys.includes(keep)) which.value = keep;
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = partitions().find((p) => `${p.topic}:${p.partition}` === which.value);
    if (!chosen || first.value === "") {
      report("choose a share-partition and a first offset");
      return;
    }
    const from = Number(first.value);
    const to = last.value === "" ? from : Number(last.value);
    const now = statesNow(chosen, from, to);
    confirmPlan(`${action.value}: offsets ${from}–${to} of ${which.value}`,
      [el("p", {}, ACTIONS[action.value]),
        el("p", {}, "Now: ", now.length ? now.join("; ") : "outside SPSO–SPEO"),
        el("p", { class: "muted" }, "All of them change or none (a record in another state refuses the change).")],
      `${action.value[0].toUpperCase()}${action.value.slice(1)}`,
      async () => {
        await post(`/v1/share-groups/${seg(group)}/partitions/${seg(chosen.topic)}/${chosen.partition}/records/${action.value}`,
          { first_offset: from, last_offset: to });
        await refresh();
      },
      outsideInFlight(chosen, from, to));
  });
  return form;
}
