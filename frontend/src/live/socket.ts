// One websocket per page (docs/live.md): the page subscribes to topics over a single
// connection; the socket re-connects with backoff and re-subscribes what is still wanted.

export interface LiveFrame {
  topic: string;
  type: string;
  [key: string]: unknown;
}

export type LiveStatus = "connecting" | "open" | "reconnecting" | "closed";
type Handler = (frame: LiveFrame) => void;

/** Close codes after which re-connecting cannot help (docs/live.md): 4401 not signed in (signed
 * out, session or token ended), 4403 origin refused or no longer a member, 4404 no such project. */
export const FATAL_CODES = new Set([4401, 4403, 4404]);

export interface SocketLike {
  readyState: number;
  onopen: ((ev: Event) => void) | null;
  onclose: ((ev: CloseEvent) => void) | null;
  onmessage: ((ev: MessageEvent) => void) | null;
  send(data: string): void;
  close(code?: number): void;
}

export interface LiveSocketOptions {
  createSocket?: (url: string) => SocketLike;
  /** Backoff for attempt n (0-based), in ms. */
  backoff?: (attempt: number) => number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

export function defaultBackoff(attempt: number): number {
  return Math.min(30_000, 500 * 2 ** attempt);
}

export function liveUrl(project: string, loc: Location = window.location): string {
  const scheme = loc.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${loc.host}/ws/projects/${encodeURIComponent(project)}/live/`;
}

const OPEN = 1;

export class LiveSocket {
  private socket: SocketLike | null = null;
  private handlers = new Map<string, Set<Handler>>();
  private statusListeners = new Set<(status: LiveStatus, code?: number) => void>();
  private attempt = 0;
  private timer: unknown = null;
  private stopped = false;
  status: LiveStatus = "connecting";
  closeCode: number | undefined;
  /** The server's reason for a fatal close (e.g. "Your session has ended ..."). */
  closeReason: string | undefined;

  private readonly createSocket: (url: string) => SocketLike;
  private readonly backoff: (attempt: number) => number;
  private readonly setTimer: (fn: () => void, ms: number) => unknown;
  private readonly clearTimer: (handle: unknown) => void;

  constructor(private readonly url: string, options: LiveSocketOptions = {}) {
    this.createSocket = options.createSocket ?? ((u) => new WebSocket(u) as unknown as SocketLike);
    this.backoff = options.backoff ?? defaultBackoff;
    this.setTimer = options.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.clearTimer = options.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>));
    this.connect();
  }

  /** Listen to `topic`; returns the function that stops listening. */
  subscribe(topic: string, handler: Handler): () => void {
    let set = this.handlers.get(topic);
    if (!set) {
      set = new Set();
      this.handlers.set(topic, set);
      this.send({ action: "subscribe", topic });
    }
    set.add(handler);
    return () => {
      const current = this.handlers.get(topic);
      if (!current) return;
      current.delete(handler);
      if (current.size === 0) {
        this.handlers.delete(topic);
        this.send({ action: "unsubscribe", topic });
      }
    };
  }

  onStatus(listener: (status: LiveStatus, code?: number) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  topics(): string[] {
    return [...this.handlers.keys()];
  }

  close(): void {
    this.stopped = true;
    if (this.timer !== null) this.clearTimer(this.timer);
    this.socket?.close(1000);
    this.setStatus("closed");
  }

  private connect(): void {
    const socket = this.createSocket(this.url);
    this.socket = socket;
    socket.onopen = () => {
      this.attempt = 0;
      this.setStatus("open");
      for (const topic of this.handlers.keys()) this.send({ action: "subscribe", topic });
    };
    socket.onmessage = (event) => this.dispatch(event.data);
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      if (this.stopped) return;
      if (FATAL_CODES.has(event.code)) {
        this.stopped = true;
        this.closeReason = event.reason || undefined;
        this.setStatus("closed", event.code);
        return;
      }
      this.setStatus("reconnecting", event.code);
      const delay = this.backoff(this.attempt++);
      this.timer = this.setTimer(() => {
        this.timer = null;
        if (!this.stopped) this.connect();
      }, delay);
    };
  }

  private dispatch(raw: unknown): void {
    if (typeof raw !== "string") return;
    let frame: LiveFrame;
    try {
      frame = JSON.parse(raw) as LiveFrame;
    } catch {
      return;
    }
    if (!frame || typeof frame.topic !== "string") return;
    for (const handler of this.handlers.get(frame.topic) ?? []) handler(frame);
  }

  private send(message: object): void {
    if (this.socket && this.socket.readyState === OPEN) this.socket.send(JSON.stringify(message));
  }

  private setStatus(status: LiveStatus, code?: number): void {
    this.status = status;
    this.closeCode = code;
    for (const listener of this.statusListeners) listener(status, code);
  }
}
