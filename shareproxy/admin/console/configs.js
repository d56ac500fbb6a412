// A group's configs: each value and where it comes from, and a change confirmed after the
// old and new values are shown.
import { call, get, seg } from "./api.js";
import { confirmPlan } from "./confirm.js";
import { el } from "./dom.js";
import { LiveTable } from "./sortable.js";

// the range this node accepts, as the API gives it (group.share.min/max… on the proxy)
const bounds = (c) => (c && c.min !== null && c.min !== undefined ? `${c.min} to ${c.max}` : "");

export function configSection(group, afterChange) {
  const path = `/v1/share-groups/${seg(group)}/config`;
  const table = new LiveTable(
    [
      { key: "name", label: "Config", width: "36%", value: (c) => c.name },
      { key: "value", label: "Value", width: "24%", value: (c) => c.value },
      { key: "source", label: "Source", width: "16%", value: (c) => c.source },
      { key: "bounds", label: "Allowed", width: "24%", value: (c) => bounds(c) },
    ],
    (c) => c.name,
    "Group configs: a group's own value, or the proxy's default.",
  );
  table.table.id = "configs";
  let current = {};
  const name = el("select", { id: "config-name", name: "name" });
  const value = el("input", { id: "config-value", name: "value", size: 24, placeholder: "empty: back to default" });
  // disabled until the configs are loaded: the plan shows the value it replaces
  const submit = el("button", { type: "submit", disabled: "" }, "Change config…");
  const form = el("form", { class: "reset", "aria-label": "Change a config" },
    el("label", { for: "config-name" }, "Config", name),
    el("label", { for: "config-value" }, "New value", value), submit);
  const hint = () => {
    const allowed = bounds(current[name.value]);
    if (allowed) value.setAttribute("title", `allowed: ${allowed}`);
    else value.removeAttribute("title");
  };
  name.addEventListener("change", hint);
  const load = async () => {
    const answer = await get(path);
    current = answer.configs;
    const names = Object.keys(current).sort();
    if ([...name.options].map((o) => o.value).join() !== names.join()) {
      while (name.firstChild) name.firstChild.remove();
      for (const n of names) name.append(el("option", { value: n }, n));
    }
    table.update(names.map((n) => ({ name: n, ...current[n] })));
    submit.disabled = names.length === 0;
    hint();
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = name.value;
    const wanted = value.value.trim();
    const was = current[chosen];
    confirmPlan(`Change ${chosen}`,
      [el("p", {}, `${chosen}: ${was ? `${was.value} (${was.source})` : "–"} → `,
        wanted === "" ? "the default" : wanted),
      ...(bounds(was) ? [el("p", { class: "muted" }, `Allowed: ${bounds(was)}.`)] : [])],
      "Change config",
      async () => {
        await call("PUT", path, { configs: { [chosen]: wanted === "" ? null : wanted } });
        await load();
        await afterChange();
      });
  });
  const section = [el("h2", {}, "Configs"), table.table, form];
  return { section, load };
}
