// Small pieces shared by the list and the detail panel.
import { h } from "./dom";
import type { Role, Status } from "./types";

const ROLE_RANK: Record<Role, number> = { viewer: 10, member: 20, maintainer: 30, owner: 40 };

/** Members and above may submit and stop workloads (apps/projects/choices.py MINIMUM_ROLE). */
export function canSubmit(role: Role): boolean {
  return ROLE_RANK[role] >= ROLE_RANK.member;
}

export function statusBadge(status: Status, title = ""): HTMLElement {
  return h("span", { class: `badge badge-${status}`, title: title || null }, status);
}

export function emptyState(title: string, ...lines: (string | Node)[]): HTMLElement {
  return h("div", { class: "empty" }, h("p", { class: "empty-title" }, title), ...lines.map((line) => h("p", {}, line)));
}

export function errorBanner(message: string, retry?: () => void): HTMLElement {
  return h(
    "div",
    { class: "error", role: "alert" },
    h("span", {}, message),
    retry ? h("button", { type: "button", class: "link", onclick: retry }, "Retry") : null,
  );
}
