// The panel of one workload: facts, a Stop button, its events and the tail of its logs.
import { ApiError, api } from "./api";
import { fill, h } from "./dom";
import { ACTIVE, KIND_LABEL, TERMINAL, age, clock, errorMessage, resources, timestamp } from "./format";
import type { Role, Workload, WorkloadEvent } from "./types";
import { canSubmit, errorBanner, statusBadge } from "./widgets";

const LOG_POLL_MS = 3000;
const TAIL_CHOICES = [200, 1000, 5000];

export interface DetailHost {
  close(): void;
  /** The workload changed on the server (e.g. stop requested): refetch the list soon. */
  changed(): void;
  notify(message: string): void;
  sessionExpired(): void;
}

export class WorkloadDetail {
  readonly element: HTMLElement;
  private workload: Workload;
  private readonly header = h("div", { class: "detail-header" });
  private readonly facts = h("dl", { class: "facts" });
  private readonly actions = h("div", { class: "actions" });
  private readonly eventsBody = h("div", { class: "events" });
  private readonly logsBox = h("pre", { class: "logs", tabindex: 0, "aria-label": "Log output" });
  private readonly logsStatus = h("div", { class: "logs-status" });
  private readonly replicaSelect = h("select", { "aria-label": "Replica" });
  private readonly tailSelect = h("select", { "aria-label": "Lines" });
  private readonly followBox = h("input", { type: "checkbox", checked: true });
  private stopping = false;
  private stopError = "";
  private events: WorkloadEvent[] | null = null;
  private eventsError = "";
  private eventsTimer: number | undefined;
  private logsTimer: number | undefined;
  private logsAbort: AbortController | null = null;
  private eventsAbort: AbortController | null = null;
  private logsLoaded = false;
  private destroyed = false;

  constructor(
    private readonly slug: string,
    private readonly role: Role,
    workload: Workload,
    private readonly host: DetailHost,
  ) {
    this.workload = workload;
    for (const tail of TAIL_CHOICES) this.tailSelect.append(h("option", { value: tail }, `last ${tail} lines`));
    this.replicaSelect.addEventListener("change", () => this.reloadLogs());
    this.tailSelect.addEventListener("change", () => this.reloadLogs());
    this.followBox.addEventListener("change", () => this.scheduleLogs(0));
    this.element = h(
      "aside",
      { class: "detail", "aria-label": `Workload ${workload.name}` },
      this.header,
      this.facts,
      this.actions,
      h("section", {}, h("h3", {}, "Events"), this.eventsBody),
      h(
        "section",
        {},
        h(
          "div",
          { class: "logs-toolbar" },
          h("h3", {}, "Logs"),
          h("label", {}, "Replica ", this.replicaSelect),
          this.tailSelect,
          h("label", { class: "follow" }, this.followBox, " Follow"),
          h("button", { type: "button", onclick: () => this.reloadLogs() }, "Refresh"),
        ),
        this.logsStatus,
        this.logsBox,
      ),
    );
    this.render();
    void this.loadEvents();
    this.reloadLogs();
  }

  get id(): number {
    return this.workload.id;
  }

  /** New data for this workload from a list refresh (null: it is gone). */
  update(workload: Workload | null): void {
    if (workload === null) {
      this.host.notify(`Workload ${this.workload.name} no longer exists.`);
      this.host.close();
      return;
    }
    const statusChanged = workload.status !== this.workload.status;
    const replicasChanged = workload.replicas !== this.workload.replicas;
    const wasActive = ACTIVE.has(this.workload.status);
    this.workload = workload;
    this.render(replicasChanged);
    if (statusChanged) {
      this.eventsChanged();
      // Fetch once more when replicas start or stop so the final lines show up.
      if (wasActive !== ACTIVE.has(workload.status)) this.scheduleLogs(500);
    }
  }

  /** A `workload.event` arrived for this workload over the websocket. */
  eventsChanged(): void {
    window.clearTimeout(this.eventsTimer);
    this.eventsTimer = window.setTimeout(() => void this.loadEvents(), 300);
  }

  destroy(): void {
    this.destroyed = true;
    window.clearTimeout(this.eventsTimer);
    window.clearTimeout(this.logsTimer);
    this.logsAbort?.abort();
    this.eventsAbort?.abort();
    this.element.remove();
  }

  private render(replicasChanged = true): void {
    const w = this.workload;
    fill(
      this.header,
      h("div", {}, h("h2", {}, w.name), h("span", { class: "muted" }, `${KIND_LABEL[w.kind] ?? w.kind} #${w.id}`)),
      statusBadge(w.status, w.status_message),
      h("button", { type: "button", class: "close", "aria-label": "Close", onclick: () => this.host.close() }, "×"),
    );

    const rows: [string, string | Node][] = [];
    if (w.status === "queued") rows.push(["Pending", w.pending_reason || "Waiting for the scheduler."]);
    if (w.status_reason || w.status_message) {
      rows.push(["Reason", [w.status_reason, w.status_message].filter(Boolean).join(": ")]);
    }
    if (w.exit_code !== null && w.exit_code !== undefined) rows.push(["Exit code", String(w.exit_code)]);
    rows.push(["Priority", w.priority]);
    rows.push(["Replicas", String(w.replicas)]);
    rows.push(["Per replica", resources(w.resources)]);
    const restarts = w.restarts === 1 ? "1 restart" : `${w.restarts} restarts`;
    rows.push(["Attempt", w.restarts ? `${w.attempt} (${restarts})` : String(w.attempt)]);
    rows.push(["Created", `${timestamp(w.created_at)} (${age(w.created_at)} ago)`]);
    if (w.started_at) rows.push(["Started", timestamp(w.started_at)]);
    if (w.finished_at) rows.push(["Finished", timestamp(w.finished_at)]);
    const url = w.runtime?.url;
    if (typeof url === "string" && /^(https?:\/\/|\/)/.test(url)) {
      // A notebook's URL needs its token to log in; the token stays out of the visible text.
      const token = w.runtime?.token;
      const href = typeof token === "string" && token ? `${url}?token=${encodeURIComponent(token)}` : url;
      rows.push(["Open", h("a", { href, target: "_blank", rel: "noopener noreferrer" }, url)]);
    }
    fill(this.facts, ...rows.flatMap(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));

    const terminal = TERMINAL.has(w.status);
    const allowed = canSubmit(this.role);
    const stopButton = h(
      "button",
      {
        type: "button",
        class: "danger",
        disabled: terminal || !allowed || this.stopping || w.status === "stopping",
        title: !allowed ? "Viewers cannot stop workloads." : terminal ? "This workload has finished." : null,
        onclick: () => void this.stop(),
      },
      w.status === "stopping" ? "Stopping…" : this.stopping ? "Stopping…" : "Stop",
    );
    fill(this.actions, stopButton, this.stopError ? errorBanner(this.stopError) : null);

    if (replicasChanged) {
      const current = Number(this.replicaSelect.value || 0);
      fill(
        this.replicaSelect,
        ...Array.from({ length: Math.max(1, w.replicas) }, (_, i) => h("option", { value: i }, String(i))),
      );
      this.replicaSelect.value = String(current < w.replicas ? current : 0);
    }
  }

  private async stop(): Promise<void> {
    const w = this.workload;
    if (!window.confirm(`Stop ${w.name}? Running replicas get a grace period to exit, then are killed.`)) return;
    this.stopping = true;
    this.stopError = "";
    this.render(false);
    try {
      await api.stop(this.slug, w);
      this.host.notify(`Stop requested for ${w.name}.`);
      this.host.changed();
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) return this.host.sessionExpired();
      this.stopError = `Could not stop ${w.name}: ${errorMessage(error)}`;
    } finally {
      this.stopping = false;
      if (!this.destroyed) this.render(false);
    }
  }

  private async loadEvents(): Promise<void> {
    this.eventsAbort?.abort();
    const abort = new AbortController();
    this.eventsAbort = abort;
    try {
      this.events = await api.events(this.slug, this.workload, abort.signal);
      this.eventsError = "";
    } catch (error) {
      if (abort.signal.aborted) return;
      this.eventsError = `Could not load events: ${errorMessage(error)}`;
    }
    if (this.destroyed) return;
    this.renderEvents();
  }

  private renderEvents(): void {
    const parts: Node[] = [];
    if (this.eventsError) parts.push(errorBanner(this.eventsError, () => void this.loadEvents()));
    if (this.events === null) {
      if (!this.eventsError) parts.push(h("p", { class: "muted" }, "Loading events…"));
    } else if (this.events.length === 0) {
      parts.push(h("p", { class: "muted" }, "No events yet."));
    } else {
      parts.push(
        h(
          "table",
          { class: "events-table" },
          h("tbody", {}, ...this.events.map((event) =>
            h(
              "tr",
              { class: event.type === "Warning" ? "warning" : null },
              h("td", { class: "nowrap muted", title: timestamp(event.time) }, clock(event.time)),
              h("td", { class: "nowrap" }, event.reason),
              h("td", {}, event.message),
            ),
          )),
        ),
      );
    }
    fill(this.eventsBody, ...parts);
  }

  private reloadLogs(): void {
    this.logsLoaded = false;
    this.logsBox.textContent = "";
    this.scheduleLogs(0);
  }

  private scheduleLogs(delay: number): void {
    window.clearTimeout(this.logsTimer);
    if (this.destroyed) return;
    this.logsTimer = window.setTimeout(() => void this.loadLogs(), delay);
  }

  private async loadLogs(): Promise<void> {
    this.logsAbort?.abort();
    const abort = new AbortController();
    this.logsAbort = abort;
    const replica = Number(this.replicaSelect.value || 0);
    const tail = Number(this.tailSelect.value || TAIL_CHOICES[0]);
    const box = this.logsBox;
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 24;
    try {
      const text = await api.logs(this.slug, this.workload, replica, tail, abort.signal);
      if (this.destroyed) return;
      box.textContent = text;
      fill(this.logsStatus, text ? null : h("p", { class: "muted" }, this.noLogsMessage()));
      if (atBottom || !this.logsLoaded) box.scrollTop = box.scrollHeight;
      this.logsLoaded = true;
    } catch (error) {
      if (abort.signal.aborted || this.destroyed) return;
      if (error instanceof ApiError && error.status === 401) return this.host.sessionExpired();
      fill(this.logsStatus, errorBanner(`Could not load logs: ${errorMessage(error)}`, () => this.reloadLogs()));
    }
    if (this.followBox.checked && ACTIVE.has(this.workload.status)) this.scheduleLogs(LOG_POLL_MS);
  }

  private noLogsMessage(): string {
    if (this.workload.status === "queued") return "No logs yet: the workload has not started.";
    if (ACTIVE.has(this.workload.status)) return "No output yet.";
    return "This replica wrote no output.";
  }
}
