// A table whose rows are kept by key and updated in place (no layout jumps on refresh),
// sorted by the column whose header button was last pressed (Enter and Space work too).
import { el, setText } from "./dom.js";

export class LiveTable {
  // columns: [{ key, label, width, numeric, value(row) -> sort value, render(cell, row) }]
  constructor(columns, keyOf, caption) {
    this.columns = columns;
    this.keyOf = keyOf;
    this.rows = new Map();
    this.sortBy = columns[0].key;
    this.descending = false;
    this.body = el("tbody");
    const head = el("tr");
    this.headers = columns.map((c) => {
      const button = el("button", { type: "button" }, c.label);
      const th = el("th", { scope: "col", class: c.numeric ? "num" : undefined }, button);
      if (c.width) th.style.width = c.width;
      button.addEventListener("click", () => this.sort(c.key));
      head.append(th);
      return th;
    });
    this.table = el("table", {}, el("caption", { class: "muted" }, caption), el("thead", {}, head),
      this.body);
    this.table.querySelector("caption").style.textAlign = "left";
    this.markSort();
  }

  sort(key) {
    this.descending = this.sortBy === key ? !this.descending : false;
    this.sortBy = key;
    this.markSort();
    this.order();
  }

  markSort() {
    this.columns.forEach((c, i) => {
      if (c.key === this.sortBy) {
        this.headers[i].setAttribute("aria-sort", this.descending ? "descending" : "ascending");
      } else {
        this.headers[i].removeAttribute("aria-sort");
      }
    });
  }

  update(items) {
    const seen = new Set();
    for (const item of items) {
      const key = this.keyOf(item);
      seen.add(key);
      let entry = this.rows.get(key);
      if (!entry) {
        const cells = this.columns.map((c) => el("td", { class: c.numeric ? "num" : undefined }));
        const tr = el("tr", { "data-key": key }, ...cells);
        entry = { tr, cells, item };
        this.rows.set(key, entry);
      }
      entry.item = item;
      this.columns.forEach((c, i) => {
        if (c.render) c.render(entry.cells[i], item);
        else setText(entry.cells[i], c.value(item));
      });
    }
    for (const [key, entry] of this.rows) {
      if (!seen.has(key)) {
        entry.tr.remove();
        this.rows.delete(key);
      }
    }
    this.order();
  }

  order() {
    const column = this.columns.find((c) => c.key === this.sortBy);
    const sign = this.descending ? -1 : 1;
    const entries = [...this.rows.values()].sort((a, b) => {
      const x = column.value(a.item);
      const y = column.value(b.item);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sign;
    });
    entries.forEach((entry, i) => {
      if (this.body.children[i] !== entry.tr) this.body.insertBefore(entry.tr, this.body.children[i] || null);
    });
  }
}
