// The page's layout on small screens. Below 1100 px the chat list is a drawer (the ☰ button);
// below 900 px the chat and the notebook are two tabs, and the Notebook tab shows its number of
// cells, marked when something changed there while the chat was in view.

import { $ } from "./dom.js";

const narrow = matchMedia("(max-width: 900px)");

export class Layout {
  constructor() {
    this.root = $(".layout");
    this.menu = $("#menu");
    this.sidebar = $("#sidebar");
    this.scrim = $("#scrim");
    this.badge = $("#notebook-badge");
    this.tabs = { chat: $("#tab-chat"), notebook: $("#tab-notebook") };
    this.menu.addEventListener("click", () => (this.drawerOpen ? this.closeDrawer() : this.openDrawer()));
    this.scrim.addEventListener("click", () => this.closeDrawer());
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && this.drawerOpen && !document.querySelector("dialog[open]")) {
        e.preventDefault();
        this.closeDrawer();
      }
    });
    for (const [pane, tab] of Object.entries(this.tabs)) {
      tab.addEventListener("click", () => this.show(pane));
      tab.addEventListener("keydown", (e) => {
        if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
          e.preventDefault();
          const other = pane === "chat" ? "notebook" : "chat";
          this.show(other);
          this.tabs[other].focus();
        }
      });
    }
    this.show("chat");
  }

  get drawerOpen() {
    return document.body.classList.contains("drawer-open");
  }

  openDrawer() {
    document.body.classList.add("drawer-open");
    this.menu.setAttribute("aria-expanded", "true");
    this.scrim.hidden = false;
    (this.sidebar.querySelector("[aria-current='true']") || this.sidebar.querySelector("button"))?.focus();
  }

  closeDrawer({ focus = true } = {}) {
    if (!this.drawerOpen) return;
    document.body.classList.remove("drawer-open");
    this.menu.setAttribute("aria-expanded", "false");
    this.scrim.hidden = true;
    if (focus && getComputedStyle(this.menu).display !== "none") this.menu.focus();
  }

  // Shows a pane (on wide screens both are shown; the choice is kept for when it narrows).
  show(pane) {
    this.root.dataset.pane = pane;
    for (const [name, tab] of Object.entries(this.tabs)) {
      tab.setAttribute("aria-selected", String(name === pane));
      tab.tabIndex = name === pane ? 0 : -1;
    }
    if (pane === "notebook") {
      delete this.badge.dataset.fresh;
      // Charts drawn while the pane was hidden have no size yet; Plotly resizes on this event.
      window.dispatchEvent(new Event("resize"));
    }
  }

  // The notebook changed (`cells`: how many it has now).
  notebookChanged(cells) {
    this.badge.hidden = !cells;
    this.badge.textContent = String(cells || "");
    this.badge.setAttribute("aria-label", `${cells} cell${cells === 1 ? "" : "s"}`);
    if (narrow.matches && this.root.dataset.pane !== "notebook") this.badge.dataset.fresh = "true";
  }
}
