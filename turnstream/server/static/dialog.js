// The page's own confirmation dialog (a modal <dialog>), in place of the browser's confirm():
// styled like the page, read by screen readers, Escape or Cancel says no.

import { $ } from "./dom.js";

export function confirmDialog({ title, message, confirm = "OK" }) {
  const dlg = $("#confirm-dialog");
  $("#confirm-title").textContent = title;
  $("#confirm-message").textContent = message;
  $("#confirm-ok").textContent = confirm;
  dlg.returnValue = "";
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.showModal();
    dlg.querySelector("button[value='cancel']").focus(); // the safe choice first
  });
}
