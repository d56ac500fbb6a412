// One dialog for every action: the plan first, the change only on confirm.
import { report } from "./api.js";
import { clear, setText } from "./dom.js";

export function confirmPlan(title, body, action, perform) {
  const dialog = document.getElementById("confirm");
  setText(document.getElementById("confirm-title"), title);
  const holder = document.getElementById("confirm-body");
  clear(holder);
  holder.append(...body);
  const ok = document.getElementById("confirm-ok");
  const cancel = document.getElementById("confirm-cancel");
  setText(ok, action);
  const close = () => {
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
  dialog.showModal();
  cancel.focus();
}
