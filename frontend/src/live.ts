// One websocket per page: the project's live events, reconnected with backoff.
import type { LiveMessage } from "./types";

export type LiveState = "connecting" | "live" | "offline" | "denied";

const MAX_BACKOFF_MS = 30_000;

export class ProjectLive {
  private socket: WebSocket | null = null;
  private timer: number | undefined;
  private attempts = 0;
  private closed = false;

  constructor(
    private readonly slug: string,
    private readonly onMessage: (message: LiveMessage) => void,
    private readonly onState: (state: LiveState) => void,
  ) {
    this.connect();
  }

  close(): void {
    this.closed = true;
    window.clearTimeout(this.timer);
    this.socket?.close(1000);
    this.socket = null;
  }

  private connect(): void {
    if (this.closed) return;
    this.onState("connecting");
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${window.location.host}/ws/projects/${encodeURIComponent(this.slug)}/events/`;
    let socket: WebSocket;
    try {
      socket = new WebSocket(url);
    } catch {
      this.retry();
      return;
    }
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.attempts = 0;
      this.onState("live");
    });
    socket.addEventListener("message", (event: MessageEvent) => {
      let message: unknown;
      try {
        message = JSON.parse(String(event.data));
      } catch {
        return;
      }
      if (message && typeof message === "object" && "type" in message) this.onMessage(message as LiveMessage);
    });
    socket.addEventListener("close", (event: CloseEvent) => {
      if (this.socket !== socket || this.closed) return;
      this.socket = null;
      // 4401: not authenticated, 4404: not a member. Retrying will not help.
      if (event.code === 4401 || event.code === 4404) {
        this.onState("denied");
        return;
      }
      this.retry();
    });
  }

  private retry(): void {
    this.onState("offline");
    const delay = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** this.attempts) * (0.75 + Math.random() / 2);
    this.attempts += 1;
    this.timer = window.setTimeout(() => this.connect(), delay);
  }
}
