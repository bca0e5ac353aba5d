// The log panel after "Start again" (issue 46, item 2): the server ended the log's topic when the
// notebook stopped; once it leaves a final status the panel subscribes afresh and drops the
// "ended" badge, without a reload.
import { MantineProvider } from "@mantine/core";
import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { LiveFrame } from "../../live/socket";
import type { Workload } from "./api";

type Handler = (frame: LiveFrame) => void;
const subscriptions: { topic: string; handler: { current: Handler }; active: boolean }[] = [];

vi.mock("../../live/LiveProvider", async () => {
  const { useEffect, useRef } = await import("react");
  return {
    useTopic(topic: string | null, handler: Handler) {
      const latest = useRef(handler);
      latest.current = handler;
      useEffect(() => {
        if (!topic) return undefined;
        const sub = { topic, handler: latest, active: true };
        subscriptions.push(sub);
        return () => {
          sub.active = false;
        };
      }, [topic]);
    },
  };
});

const { LogPanel } = await import("./LogPanel");

function send(frame: LiveFrame) {
  const live = subscriptions.filter((s) => s.active);
  act(() => live.forEach((s) => s.handler.current(frame)));
}

function notebook(status: string, attempt: number, replicas = 1): Workload {
  return { id: 7, name: "scratch", replicas, status, attempt, kind: "notebook" } as unknown as Workload;
}

function panel(w: Workload) {
  return (
    <MantineProvider>
      <LogPanel workload={w} project="vision" />
    </MantineProvider>
  );
}

afterEach(() => {
  cleanup();
  subscriptions.length = 0;
});

describe("LogPanel", () => {
  it("follows the new attempt after Start again, without the old 'ended' badge", () => {
    const view = render(panel(notebook("stopped", 1)));
    send({ topic: "logs:7:0", type: "subscribed" });
    send({ topic: "logs:7:0", type: "logs", attempt: 1, text: "attempt one\n" });
    send({ topic: "logs:7:0", type: "logs.end", status: "stopped" });
    expect(screen.getByText(/ended: stopped/i)).toBeTruthy();
    expect(subscriptions.filter((s) => s.active)).toHaveLength(1);

    view.rerender(panel(notebook("queued", 1)));
    const live = subscriptions.filter((s) => s.active);
    expect(live).toHaveLength(1);
    expect(subscriptions).toHaveLength(2); // a fresh subscription: the server ended the old one
    expect(screen.queryByText(/ended: stopped/i)).toBeNull();

    view.rerender(panel(notebook("running", 2)));
    send({ topic: "logs:7:0", type: "subscribed" });
    send({ topic: "logs:7:0", type: "logs", attempt: 2, text: "attempt two\n" });
    expect(screen.getByTestId("log-view").textContent).toContain("attempt two");
    expect(screen.queryByText(/ended:/i)).toBeNull();
    expect(subscriptions).toHaveLength(2); // running on: the same subscription follows it
  });

  it("is a named log region that takes focus, so the keyboard scrolls it (issue 46, item 16)", () => {
    const view = render(panel(notebook("running", 1)));
    const log = screen.getByRole("log", { name: "Log of scratch" });
    expect(log).toBe(screen.getByTestId("log-view"));
    expect(log.tabIndex).toBe(0);
    expect(log.getAttribute("aria-live")).toBe("off"); // a stream: not read out line by line
    log.focus();
    expect(document.activeElement).toBe(log);
    view.rerender(panel(notebook("running", 1, 2)));
    expect(screen.getByRole("log").getAttribute("aria-label")).toBe("Log of scratch, replica 0");
  });

  it("keeps its subscription when the workload finishes", () => {
    const view = render(panel(notebook("running", 1)));
    view.rerender(panel(notebook("stopped", 1)));
    expect(subscriptions).toHaveLength(1);
  });
});
