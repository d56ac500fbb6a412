// Offsets moved or deleted from the page: the plan shown in the dialog first.
import { call, post, report, seg } from "./api.js";
import { confirmPlan } from "./confirm.js";
import { el, setText } from "./dom.js";

export function resetForm(group, refresh) {
  const to = el("select", { id: "reset-to", name: "to" },
    ...["earliest", "latest", "offset", "shift", "datetime", "duration"].map((v) => el("option", { value: v }, v)));
  const value = el("input", { id: "reset-value", name: "value", size: 22 });
  const topics = el("input", { id: "reset-topics", name: "topics", size: 28, placeholder: "all, or: t1 t2:0,2" });
  const submit = el("button", { type: "submit", "aria-describedby": "reset-blocked" }, "Plan reset…");
  const blocked = el("p", { id: "reset-blocked", class: "refusal", hidden: "" });
  const form = el("form", { class: "reset", "aria-label": "Reset offsets" },
    blocked,
    el("label", { for: "reset-to" }, "Reset to", to),
    el("label", { for: "reset-value" }, "Value (offset, shift, ISO time or duration)", value),
    el("label", { for: "reset-topics" }, "Topics", topics),
    submit);
  // members: the count the API gives; the API refuses a reset of a group that has any
  form.members = (members) => {
    for (const control of [to, value, topics, submit]) control.disabled = members > 0;
    blocked.hidden = members === 0;
    setText(blocked, members === 0 ? ""
      : `Disabled: the group has ${members} member${members === 1 ? "" : "s"}, and offsets are reset only in an empty group (stop its consumers first).`);
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { to: to.value, dry_run: true };
    const v = value.value.trim();
    if (to.value === "offset") body.offset = Number(v);
    if (to.value === "shift") body.shift = Number(v);
    if (to.value === "datetime") body.datetime = v;
    if (to.value === "duration") body.duration = v;
    const named = topics.value.split(/[\s;]+/).filter(Boolean);
    if (named.length) body.topics = named;
    const path = `/v1/share-groups/${seg(group)}/offsets/reset`;
    try {
      const plan = await post(path, body);
      report(null);
      const rows = plan.partitions.map((s) =>
        el("tr", {}, el("td", {}, `${s.topic}:${s.partition}`),
          el("td", { class: "num" }, s.current_start_offset ?? "–"),
          el("td", { class: "num" }, s.new_start_offset)));
      const table = el("table", { id: "reset-plan" },
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Share-partition"),
          el("th", { scope: "col", class: "num" }, "Start offset now"),
          el("th", { scope: "col", class: "num" }, "New start offset"))),
        el("tbody", {}, ...rows));
      confirmPlan("Reset offsets: the plan (dry run)",
        [el("p", {}, "Nothing has changed yet. Confirm to move the start offsets as shown."), table],
        "Reset offsets",
        async () => {
          await post(path, { ...body, dry_run: false });
          await refresh();
        });
    } catch (error) {
      report(error);
    }
  });
  return form;
}

// partitions(): the share-partitions as last shown, whose topics are offered
export function deleteOffsetsForm(group, partitions, refresh) {
  const topic = el("select", { id: "delete-topic", name: "topic" });
  const fill = () => {
    const names = [...new Set(partitions().map((p) => p.topic))].sort();
    if ([...topic.options].map((o) => o.value).join() === names.join()) return;
    const keep = topic.value;
    while (topic.firstChild) topic.firstChild.remove();
    for (const n of names) topic.append(el("option", { value: n }, n));
    if (names.includes(keep)) topic.value = keep;
    submit.disabled = names.length === 0;
  };
  // disabled until the first refresh offers a topic: a click before it would plan nothing
  const submit = el("button", { type: "submit", disabled: "" }, "Delete offsets…");
  const form = el("form", { class: "reset", "aria-label": "Delete offsets" },
    el("label", { for: "delete-topic" }, "Topic", topic), submit);
  form.refill = fill;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const name = topic.value;
    if (!name) {
      report("no topic to delete offsets of");
      return;
    }
    confirmPlan(`Delete the offsets of ${name}`,
      [el("p", {}, "The group's state for every partition of ", el("code", {}, name),
        " is deleted; its next consumer starts as share.auto.offset.reset says. Refused while a member subscribes to it.")],
      "Delete offsets",
      async () => {
        await call("DELETE", `/v1/share-groups/${seg(group)}/offsets?topic=${seg(name)}`);
        await refresh();
      });
  });
  return form;
}
