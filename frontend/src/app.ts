// The dashboard: who am I, which project, its workloads (live), and one workload's detail.
import { ApiError, api } from "./api";
import { config } from "./config";
import { WorkloadDetail } from "./detail";
import { fill, h } from "./dom";
import { KIND_LABEL, age, errorMessage, resources, timestamp } from "./format";
import { ProjectLive, type LiveState } from "./live";
import type { LiveMessage, Me, ProjectRef, Workload } from "./types";
import { emptyState, errorBanner, statusBadge } from "./widgets";

const PROJECT_KEY = "cairn.project";
/** Refetch interval while the websocket is up (a safety net) and while it is down. */
const POLL_LIVE_MS = 30_000;
const POLL_OFFLINE_MS = 5_000;
const AGE_TICK_MS = 15_000;

interface Route {
  project: string | null;
  workload: number | null;
}

/** `#/<project>` or `#/<project>/workloads/<id>`. */
function parseHash(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  let project: string | null = null;
  try {
    project = parts[0] ? decodeURIComponent(parts[0]) : null;
  } catch {
    project = null;
  }
  const id = parts[1] === "workloads" && /^\d+$/.test(parts[2] ?? "") ? Number(parts[2]) : null;
  return { project, workload: id };
}

function hashFor(project: string, workload: number | null = null): string {
  return `#/${encodeURIComponent(project)}${workload === null ? "" : `/workloads/${workload}`}`;
}

const LIVE_LABEL: Record<LiveState, string> = {
  connecting: "Connecting…",
  live: "Live",
  offline: `Offline: refreshing every ${POLL_OFFLINE_MS / 1000} s`,
  denied: "Live updates unavailable",
};

export class Dashboard {
  private me: Me | null = null;
  private project: ProjectRef | null = null;
  private workloads: Workload[] = [];
  private count = 0;
  private loaded = false;
  private listError = "";
  private lastRefresh: number | null = null;
  private listAbort: AbortController | null = null;
  private live: ProjectLive | null = null;
  private liveState: LiveState = "offline";
  private detail: WorkloadDetail | null = null;
  private pollTimer: number | undefined;
  private refreshTimer: number | undefined;
  private toastTimer: number | undefined;

  private readonly projectSelect = h("select", { id: "project", "aria-label": "Project" });
  private readonly liveBadge = h("span", { class: "live", role: "status" });
  private readonly listBody = h("div", { class: "list" });
  private readonly listMeta = h("span", { class: "muted" });
  private readonly toast = h("div", { class: "toast", role: "status", hidden: true });
  private readonly layout = h("div", { class: "layout" });

  constructor(private readonly root: HTMLElement) {}

  async start(): Promise<void> {
    fill(this.root, h("p", { class: "muted center" }, "Loading…"));
    try {
      this.me = await api.me();
    } catch (error) {
      if (error instanceof ApiError && error.unauthenticated) return this.renderLoggedOut();
      fill(
        this.root,
        h("div", { class: "center" }, errorBanner(`Cairn could not load: ${errorMessage(error)}`, () => void this.start())),
      );
      return;
    }
    this.renderShell();
    window.addEventListener("hashchange", () => this.route());
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden && this.project) this.refreshSoon(0);
    });
    window.setInterval(() => this.tickAges(), AGE_TICK_MS);
    this.route();
  }

  // ---- layout -----------------------------------------------------------------------------

  private renderLoggedOut(message = ""): void {
    this.teardownProject();
    fill(
      this.root,
      h(
        "div",
        { class: "signin" },
        h("h1", {}, "Cairn"),
        h("p", {}, message || "Sign in to see your projects, their workloads and logs."),
        h("a", { class: "button primary", href: config.loginUrl }, "Log in"),
      ),
    );
  }

  private renderShell(): void {
    const me = this.me!;
    this.projectSelect.addEventListener("change", () => {
      window.location.hash = hashFor(this.projectSelect.value);
    });
    fill(
      this.projectSelect,
      ...me.projects.map((p) => h("option", { value: p.slug }, p.name === p.slug ? p.slug : `${p.name} (${p.slug})`)),
    );
    const header = h(
      "header",
      { class: "topbar" },
      h("a", { class: "brand", href: "#" }, "Cairn"),
      me.projects.length ? h("label", { class: "picker" }, "Project ", this.projectSelect) : null,
      this.liveBadge,
      h("span", { class: "spacer" }),
      h("a", { href: config.apiDocsUrl }, "API"),
      me.is_staff ? h("a", { href: config.adminUrl }, "Admin") : null,
      h("span", { class: "user" }, me.username),
      h("button", { type: "button", class: "link", onclick: () => void this.logout() }, "Log out"),
    );
    fill(this.root, header, this.layout, this.toast);
    this.renderLive();
  }

  private renderLive(): void {
    const shown = this.project ? this.liveState : "offline";
    this.liveBadge.className = `live live-${shown}`;
    fill(this.liveBadge, this.project ? LIVE_LABEL[shown] : "");
  }

  // ---- routing ----------------------------------------------------------------------------

  private route(): void {
    const me = this.me!;
    if (me.projects.length === 0) {
      this.teardownProject();
      fill(
        this.layout,
        emptyState(
          "You are not a member of any project yet.",
          me.is_staff
            ? h("span", {}, "Create one and add members in the ", h("a", { href: config.adminUrl }, "admin"), ".")
            : "Ask a project owner or maintainer to add you.",
        ),
      );
      return;
    }
    const route = parseHash(window.location.hash);
    const wanted = route.project ?? localStorage.getItem(PROJECT_KEY);
    let project = me.projects.find((p) => p.slug === wanted);
    if (!project) {
      project = me.projects[0]!;
      if (route.project) this.notify(`You are not a member of a project named "${route.project}".`);
      history.replaceState(null, "", hashFor(project.slug));
    }
    if (project.slug !== this.project?.slug) this.openProject(project);
    this.select(project.slug === route.project ? route.workload : null);
  }

  private openProject(project: ProjectRef): void {
    this.teardownProject();
    this.project = project;
    this.workloads = [];
    this.count = 0;
    this.loaded = false;
    this.listError = "";
    localStorage.setItem(PROJECT_KEY, project.slug);
    this.projectSelect.value = project.slug;
    document.title = `${project.name} · Cairn`;
    fill(
      this.layout,
      h(
        "section",
        { class: "workloads" },
        h(
          "div",
          { class: "toolbar" },
          h("h1", {}, "Workloads"),
          this.listMeta,
          h("span", { class: "spacer" }),
          h("button", { type: "button", onclick: () => this.refreshSoon(0) }, "Refresh"),
        ),
        this.listBody,
      ),
    );
    this.renderList();
    this.live = new ProjectLive(
      project.slug,
      (message) => this.onLive(message),
      (state) => this.onLiveState(state),
    );
    this.refreshSoon(0);
  }

  private teardownProject(): void {
    this.live?.close();
    this.live = null;
    this.listAbort?.abort();
    window.clearTimeout(this.pollTimer);
    window.clearTimeout(this.refreshTimer);
    this.detail?.destroy();
    this.detail = null;
    this.project = null;
  }

  private select(id: number | null): void {
    if (this.detail && this.detail.id === id) return;
    this.detail?.destroy();
    this.detail = null;
    const workload = id === null ? undefined : this.workloads.find((w) => w.id === id);
    if (id !== null && workload && this.project) {
      this.detail = new WorkloadDetail(this.project.slug, this.project.role, workload, {
        close: () => {
          window.location.hash = hashFor(this.project!.slug);
        },
        changed: () => this.refreshSoon(200),
        notify: (message) => this.notify(message),
        sessionExpired: () => this.renderLoggedOut("Your session has expired. Log in again to continue."),
      });
      this.layout.append(this.detail.element);
    }
    // An id we have not loaded yet is opened after the next refresh (see refresh()).
    this.layout.classList.toggle("with-detail", this.detail !== null);
    this.markSelected();
  }

  // ---- data -------------------------------------------------------------------------------

  /** Refetch the list after `delay` ms; calls in the meantime are merged into one fetch. */
  private refreshSoon(delay: number): void {
    window.clearTimeout(this.refreshTimer);
    this.refreshTimer = window.setTimeout(() => void this.refresh(), delay);
  }

  private async refresh(): Promise<void> {
    const project = this.project;
    if (!project) return;
    window.clearTimeout(this.pollTimer);
    this.listAbort?.abort();
    const abort = new AbortController();
    this.listAbort = abort;
    try {
      const page = await api.workloads(project.slug, abort.signal);
      if (abort.signal.aborted || project !== this.project) return;
      this.workloads = page.results;
      this.count = page.count;
      this.loaded = true;
      this.listError = "";
      this.lastRefresh = Date.now();
    } catch (error) {
      if (abort.signal.aborted || project !== this.project) return;
      if (error instanceof ApiError && error.status === 401) {
        return this.renderLoggedOut("Your session has expired. Log in again to continue.");
      }
      this.listError = `Could not load workloads: ${errorMessage(error)}`;
    }
    this.renderList();
    const route = parseHash(window.location.hash);
    if (this.detail) {
      this.detail.update(this.workloads.find((w) => w.id === this.detail!.id) ?? null);
    } else if (route.workload !== null && route.project === project.slug && this.loaded) {
      this.select(route.workload);
      if (!this.detail) {
        this.notify(`Workload #${route.workload} is not among the ${this.workloads.length} newest workloads of ${project.name}.`);
        history.replaceState(null, "", hashFor(project.slug));
      }
    }
    this.schedulePoll();
  }

  private schedulePoll(): void {
    window.clearTimeout(this.pollTimer);
    const every = this.liveState === "live" ? POLL_LIVE_MS : POLL_OFFLINE_MS;
    this.pollTimer = window.setTimeout(() => {
      if (document.hidden) this.schedulePoll();
      else void this.refresh();
    }, every);
  }

  private onLive(message: LiveMessage): void {
    if (message.type === "workload.status") {
      const index = this.workloads.findIndex((w) => w.id === message.workload);
      if (index >= 0) {
        // Show the new status at once (a new object: the detail panel compares old and new);
        // the refetch brings the other fields.
        const old = this.workloads[index]!;
        const updated = { ...old, status: message.status, status_reason: message.reason ?? old.status_reason };
        this.workloads[index] = updated;
        this.renderList();
        if (this.detail?.id === updated.id) this.detail.update(updated);
      }
      this.refreshSoon(400);
    } else if (message.type === "workload.event") {
      if (this.detail?.id === message.workload) this.detail.eventsChanged();
      this.refreshSoon(1000);
    }
  }

  private onLiveState(state: LiveState): void {
    const wasLive = this.liveState === "live";
    this.liveState = state;
    this.renderLive();
    // Coming back online: catch up on what happened while the socket was down.
    if (state === "live" && !wasLive && this.loaded) this.refreshSoon(0);
    if (state !== "live" && wasLive) this.schedulePoll();
  }

  // ---- the table --------------------------------------------------------------------------

  private renderList(): void {
    const project = this.project;
    if (!project) return;
    const parts: Node[] = [];
    if (this.listError) parts.push(errorBanner(this.listError, () => this.refreshSoon(0)));
    if (!this.loaded) {
      if (!this.listError) parts.push(h("p", { class: "muted" }, "Loading workloads…"));
    } else if (this.workloads.length === 0) {
      parts.push(
        emptyState(
          `No workloads in ${project.name} yet.`,
          h(
            "span",
            {},
            "Submit a training job, notebook or deployment with the ",
            h("a", { href: config.apiDocsUrl }, "API"),
            " or the cairn CLI; it shows up here as it is queued, scheduled and run.",
          ),
        ),
      );
    } else {
      parts.push(this.table());
      if (this.count > this.workloads.length) {
        parts.push(h("p", { class: "muted" }, `Showing the ${this.workloads.length} newest of ${this.count} workloads.`));
      }
    }
    fill(this.listBody, ...parts);
    fill(
      this.listMeta,
      this.loaded ? `${this.count} total` : "",
      this.lastRefresh ? ` · updated ${new Date(this.lastRefresh).toLocaleTimeString()}` : "",
    );
    this.markSelected();
  }

  private table(): HTMLTableElement {
    const slug = this.project!.slug;
    const head = ["Name", "Kind", "Status", "Pending reason", "Replicas", "Resources / replica", "Age"];
    return h(
      "table",
      { class: "grid" },
      h("thead", {}, h("tr", {}, ...head.map((label) => h("th", { scope: "col" }, label)))),
      h(
        "tbody",
        {},
        ...this.workloads.map((w) => {
          const href = hashFor(slug, w.id);
          const row = h(
            "tr",
            { "data-id": w.id },
            h("td", {}, h("a", { href, class: "name" }, w.name)),
            h("td", {}, KIND_LABEL[w.kind] ?? w.kind),
            h(
              "td",
              { class: "nowrap" },
              statusBadge(w.status, [w.status_reason, w.status_message].filter(Boolean).join(": ")),
              w.restarts ? h("span", { class: "muted restarts", title: `${w.restarts} restarts` }, ` ↻${w.restarts}`) : null,
            ),
            h("td", { class: "reason" }, w.status === "queued" ? w.pending_reason || "Waiting for the scheduler." : "—"),
            h("td", { class: "num" }, String(w.replicas)),
            h("td", { class: "nowrap" }, resources(w.resources)),
            h("td", { class: "nowrap age", "data-since": w.created_at, title: timestamp(w.created_at) }, age(w.created_at)),
          );
          row.addEventListener("click", (event) => {
            if ((event.target as Element).closest("a")) return;
            window.location.hash = href;
          });
          return row;
        }),
      ),
    );
  }

  private markSelected(): void {
    const id = this.detail ? String(this.detail.id) : null;
    for (const row of this.listBody.querySelectorAll<HTMLTableRowElement>("tr[data-id]")) {
      row.classList.toggle("selected", row.dataset.id === id);
    }
  }

  private tickAges(): void {
    const now = Date.now();
    for (const cell of this.listBody.querySelectorAll<HTMLElement>("td[data-since]")) {
      cell.textContent = age(cell.dataset.since ?? null, now);
    }
  }

  // ---- misc -------------------------------------------------------------------------------

  private notify(message: string): void {
    this.toast.textContent = message;
    this.toast.hidden = false;
    window.clearTimeout(this.toastTimer);
    this.toastTimer = window.setTimeout(() => {
      this.toast.hidden = true;
    }, 5000);
  }

  private async logout(): Promise<void> {
    try {
      await api.logout();
    } catch {
      // Even if the request failed, reloading shows the true state.
    }
    window.location.hash = "";
    window.location.reload();
  }
}
