// /ui/#/groups/{id}: members, each share-partition's in-flight records from SPSO to SPEO,
// and the actions, each confirmed after its plan is shown.
import { ApiError, get, post, seg } from "./api.js";
import { archivedSection } from "./archived.js";
import { pushSection } from "./push.js";
import { groupCharts } from "./charts.js";
import { configSection } from "./configs.js";
import { recordsForm } from "./records.js";
import { deleteOffsetsForm, resetForm } from "./reset.js";
import { confirmPlan } from "./confirm.js";
import { age, clear, el, setText } from "./dom.js";
import { LiveTable } from "./sortable.js";

const STATES = ["Available", "Waiting", "Acquired", "Acknowledged", "Archiving", "Archived"];

function bar(cell, p) {
  let box = cell.firstChild;
  if (!box) {
    box = el("div", { class: "bar", role: "img" });
    cell.append(box);
  }
  const start = p.start_offset;
  const end = p.end_offset;
  box.setAttribute("aria-label", `offsets ${start ?? "–"} to ${end ?? "–"} (exclusive)`);
  box.setAttribute("data-spso", start ?? "");
  box.setAttribute("data-speo", end ?? "");
  clear(box);
  const span = start === null || end === null ? 0 : end - start;
  for (const r of p.ranges || []) {
    if (span <= 0) break;
    const count = r.last_offset - r.first_offset + 1;
    const lock = r.lock_expires_at ? `, lock ends ${r.lock_expires_at}` : "";
    const member = r.member_id ? `, member ${r.member_id}` : "";
    // Available but not before its delivery time (or the end of its back-off): its own colour
    const waiting = r.state === "Available" && r.deliverable_at && Date.parse(r.deliverable_at) > Date.now();
    const shown = waiting ? "Waiting" : r.state;
    const due = r.deliverable_at ? `, deliverable at ${r.deliverable_at}` : "";
    const piece = el("span", {
      class: `s-${shown}`,
      "data-state": shown,
      "data-first": r.first_offset,
      "data-last": r.last_offset,
      title: `${r.first_offset}–${r.last_offset}: ${shown}, delivery count ${r.delivery_count}${member}${lock}${due}`,
    });
    piece.style.width = `${(100 * count) / span}%`;
    box.append(piece);
  }
}

function membersTable(group, refresh) {
  return new LiveTable(
    [
      { key: "member", label: "Member id", width: "20%", value: (m) => m.member_id },
      { key: "client", label: "Client id", width: "16%", value: (m) => m.client_id },
      { key: "host", label: "Host", width: "12%", value: (m) => m.host },
      {
        key: "assignment", label: "Assignment", width: "22%",
        value: (m) => Object.entries(m.assignment).map(([t, ps]) => `${t}: ${ps.join(",")}`).join("; "),
      },
      { key: "epoch", label: "Epoch", width: "7%", numeric: true, value: (m) => m.member_epoch },
      {
        key: "heartbeat", label: "Last heartbeat", width: "11%", numeric: true,
        value: (m) => -Date.parse(m.last_heartbeat),
        render(cell, m) {
          // the age by this browser's clock: the API gives the time, the same from every node
          const seconds = Math.max(0, (Date.now() - Date.parse(m.last_heartbeat)) / 1000);
          cell.setAttribute("title", m.last_heartbeat);
          setText(cell, `${age(seconds)} ago`);
        },
      },
      {
        key: "act", label: "Locks", width: "12%", value: () => "",
        render(cell, m) {
          if (cell.firstChild) return;
          const button = el("button", { type: "button" }, "Release…");
          button.setAttribute("aria-label", `Release the locks of member ${m.member_id}`);
          button.addEventListener("click", () =>
            confirmPlan(
              "Release a member's locks",
              [el("p", {}, "Every record member ", el("code", {}, m.member_id),
                " holds becomes Available again (delivery counts kept). The member stays.")],
              "Release locks",
              async () => {
                await post(`/v1/share-groups/${seg(group)}/members/${seg(m.member_id)}/release`, {});
                await refresh();
              },
            ));
          cell.append(button);
        },
      },
    ],
    (m) => m.member_id,
    "Members, as the group's coordinator holds them.",
  );
}

function partitionsTable() {
  return new LiveTable(
    [
      { key: "tp", label: "Share-partition", width: "20%", value: (p) => `${p.topic}:${p.partition}` },
      { key: "spso", label: "SPSO", width: "9%", numeric: true, value: (p) => p.start_offset },
      { key: "speo", label: "SPEO", width: "9%", numeric: true, value: (p) => p.end_offset },
      { key: "hw", label: "High watermark", width: "13%", numeric: true, value: (p) => p.high_watermark },
      { key: "lag", label: "Lag", width: "8%", numeric: true, value: (p) => p.lag },
      { key: "bar", label: "In flight (SPSO → SPEO)", width: "41%", value: (p) => p.start_offset, render: bar },
    ],
    (p) => `${p.topic}:${p.partition}`,
    "Share-partitions: hover a range for its offsets, state and delivery count.",
  );
}

function legend() {
  return el("p", { class: "legend" }, ...STATES.map((s) => el("span", {}, el("i", { class: `s-${s}` }), s)));
}

export function groupPage(main, group) {
  const state = el("span", { id: "group-state" });
  const epochs = el("span", { class: "muted" });
  let refresh = async () => {};
  const members = membersTable(group, () => refresh());
  const partitions = partitionsTable();
  members.table.id = "members";
  partitions.table.id = "partitions";
  const lag = el("span", { id: "total-lag" });
  let shown = [];
  const configs = configSection(group, () => refresh());
  const archived = archivedSection(group, () => refresh());
  const push = pushSection(group);
  const charts = groupCharts();
  const changeRecords = recordsForm(group, () => shown, () => refresh());
  const deleteOffsets = deleteOffsetsForm(group, () => shown, () => refresh());
  const reset = resetForm(group, () => refresh());
  const missing = el("p", { id: "group-missing", class: "refusal", hidden: "" });
  const body = el("div", { id: "group-body" },
    el("p", {}, "State: ", state, " · total lag: ", lag, " · ", epochs),
    ...charts.section,
    el("h2", {}, "Members"), members.table,
    el("h2", {}, "Share-partitions"), legend(), partitions.table,
    el("h2", {}, "Change records"), changeRecords,
    el("h2", {}, "Reset offsets"),
    el("p", { class: "muted" }, "The group must have no members. The plan is shown before anything changes."),
    reset,
    el("h2", {}, "Delete offsets"), deleteOffsets,
    ...configs.section, ...push.section, ...archived.section,
  );
  main.append(
    el("p", {}, el("a", { href: "#/" }, "← Share groups")),
    el("h1", {}, "Share group ", el("code", { id: "group-id" }, group)),
    missing, body,
  );
  refresh = async () => {
    const base = `/v1/share-groups/${seg(group)}`;
    const answers = await Promise.allSettled([
      get(base), get(`${base}/offsets`), get(`${base}/stats`),
    ]);
    const failed = answers.filter((a) => a.status === "rejected").map((a) => a.reason);
    const gone = failed.find((e) => e instanceof ApiError && e.code === "GROUP_ID_NOT_FOUND");
    missing.hidden = !gone;
    body.hidden = Boolean(gone);
    if (gone) {
      setText(missing, "This share group does not exist (the API answers GROUP_ID_NOT_FOUND). "
        + "Its page fills in once a share consumer joins it.");
      return;
    }
    if (failed.length) throw failed[0];
    const [detail, offsets, stats] = answers.map((a) => a.value);
    charts.sample(offsets.total_lag, stats);
    setText(state, detail.state);
    setText(epochs, `group epoch ${detail.group_epoch}, assignment epoch ${detail.assignment_epoch}`);
    setText(lag, offsets.total_lag);
    members.update(detail.members);
    reset.members(detail.members.length);
    const rows = await Promise.all(offsets.partitions.map(async (p) => {
      if (p.start_offset === null) return { ...p, ranges: [] };
      const page = await get(`${base}/partitions/${seg(p.topic)}/${p.partition}/records?limit=1000`);
      return { ...p, start_offset: page.start_offset, end_offset: page.end_offset, ranges: page.records };
    }));
    shown = rows;
    partitions.update(rows);
    changeRecords.refill();
    deleteOffsets.refill();
    // the sections fill in even if one fails; the failure is the refresh's
    const failures = (await Promise.allSettled([configs.load(), push.load(), archived.load()]))
      .filter((a) => a.status === "rejected");
    if (failures.length) throw failures[0].reason;
  };
  return refresh;
}
