// One dialog for every action: the plan first, the change only on confirm. With `refusal`
// (why the API would refuse it) the plan is shown with its action disabled.
import { report } from "./api.js";
import { clear, el, setText } from "./dom.js";

let open = null; // the plan shown now: its close, so that a page change cancels it

// A plan left open by a page change is cancelled: confirmed, it would act on the page left.
export function cancelPlan() {
  if (open) open();
}

export function confirmPlan(title, body, action, perform, refusal = null) {
  const dialog = document.getElementById("confirm");
  setText(document.getElementById("confirm-title"), title);
  const holder = document.getElementById("confirm-body");
  clear(holder);
  holder.append(...body);
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  setText(ok, action);
  ok.disabled = refusal !== null;
  if (refusal !== null) {
    holder.append(el("p", { id: "confirm-refusal", class: "refusal" }, refusal));
    ok.setAttribute("aria-describedby", "confirm-refusal");
  } else {
    ok.removeAttribute("aria-describedby");
  }
  const close = () => {
    if (open !== close) return; // cancelled already, or replaced by a newer plan
    open = null;
    ok.onclick = null;
    cancel.onclick = null;
    dialog.close();
  };
  cancel.onclick = close;
  ok.onclick = async () => {
    ok.disabled = true;
    try {
      await perform();
      report(null);
    } catch (error) {
      report(error);
    } finally {
      ok.disabled = false;
      close();
    }
  };
  open = close;
  dialog.showModal();
  cancel.focus();
}
