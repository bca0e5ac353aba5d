import { describe, expect, it } from "vitest";
import { LiveSocket, type SocketLike } from "./socket";

class FakeSocket implements SocketLike {
  readyState = 0;
  sent: string[] = [];
  onopen: ((ev: Event) => void) | null = null;
  onclose: ((ev: CloseEvent) => void) | null = null;
  onmessage: ((ev: MessageEvent) => void) | null = null;
  send(data: string) {
    this.sent.push(data);
  }
  close() {
    this.readyState = 3;
  }
  open() {
    this.readyState = 1;
    this.onopen?.(new Event("open"));
  }
  drop(code: number, reason = "") {
    this.readyState = 3;
    this.onclose?.({ code, reason } as CloseEvent);
  }
  deliver(frame: object) {
    this.onmessage?.({ data: JSON.stringify(frame) } as MessageEvent);
  }
}

function harness() {
  const sockets: FakeSocket[] = [];
  const timers: Array<{ fn: () => void; ms: number }> = [];
  const live = new LiveSocket("ws://x/ws/projects/p/live/", {
    createSocket: () => {
      const s = new FakeSocket();
      sockets.push(s);
      return s;
    },
    setTimer: (fn, ms) => timers.push({ fn, ms }),
    clearTimer: () => {},
  });
  return { live, sockets, timers };
}

describe("LiveSocket", () => {
  it("subscribes once per topic when open and routes frames by topic", () => {
    const { live, sockets } = harness();
    const got: string[] = [];
    live.subscribe("run:1", (f) => got.push(`a${(f as unknown as { value: unknown }).value}`));
    live.subscribe("run:1", (f) => got.push(`b${(f as unknown as { value: unknown }).value}`));
    live.subscribe("workloads", () => got.push("w"));
    sockets[0].open();
    expect(sockets[0].sent.map((s) => JSON.parse(s))).toEqual([
      { action: "subscribe", topic: "run:1" },
      { action: "subscribe", topic: "workloads" },
    ]);
    sockets[0].deliver({ topic: "run:1", type: "points", value: 7 });
    sockets[0].deliver({ topic: "run:2", type: "points", value: 9 });
    expect(got).toEqual(["a7", "b7"]);
  });

  it("unsubscribes only when the last listener leaves", () => {
    const { live, sockets } = harness();
    sockets[0].open();
    const off1 = live.subscribe("t", () => {});
    const off2 = live.subscribe("t", () => {});
    off1();
    expect(sockets[0].sent).toHaveLength(1);
    off2();
    expect(JSON.parse(sockets[0].sent[1])).toEqual({ action: "unsubscribe", topic: "t" });
    expect(live.topics()).toEqual([]);
  });

  it("reconnects with growing backoff and re-subscribes", () => {
    const { live, sockets, timers } = harness();
    const statuses: string[] = [];
    live.onStatus((s) => statuses.push(s));
    live.subscribe("workloads", () => {});
    sockets[0].open();
    sockets[0].drop(1006);
    sockets[0].drop(1006); // a stale close of the same socket is ignored
    expect(timers).toHaveLength(1);
    timers[0].fn();
    sockets[1].drop(1006);
    expect(timers[1].ms).toBeGreaterThan(timers[0].ms);
    timers[1].fn();
    sockets[2].open();
    expect(JSON.parse(sockets[2].sent[0])).toEqual({ action: "subscribe", topic: "workloads" });
    expect(statuses).toEqual(["open", "reconnecting", "reconnecting", "open"]);
  });

  it("gives up on authentication and membership closes", () => {
    const { live, sockets, timers } = harness();
    sockets[0].drop(4404, "Project not found.");
    expect(timers).toHaveLength(0);
    expect(live.status).toBe("closed");
    expect(live.closeCode).toBe(4404);
    expect(live.closeReason).toBe("Project not found.");
  });

  it("stops after the server closes an open socket because access ended", () => {
    const { live, sockets, timers } = harness();
    sockets[0].open();
    sockets[0].drop(4401, "Your session has ended (signed out, expired or password changed).");
    expect(timers).toHaveLength(0);
    expect(live.status).toBe("closed");
    expect(live.closeReason).toContain("session has ended");
  });

  it("ignores malformed frames", () => {
    const { live, sockets } = harness();
    const got: unknown[] = [];
    live.subscribe("t", (f) => got.push(f));
    sockets[0].open();
    sockets[0].onmessage?.({ data: "not json" } as MessageEvent);
    sockets[0].onmessage?.({ data: JSON.stringify({ type: "x" }) } as MessageEvent);
    expect(got).toEqual([]);
  });
});
