// A deployment's replicas (issue 46, item 6): desired vs ready, the autoscaling settings, and a
// header line that says what serves now rather than how many replicas it started with.
import { MantineProvider } from "@mantine/core";
import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { ScalingPanel, servingLine, type Deployment } from "./ScalingPanel";

afterEach(cleanup);

const auto = { min_replicas: 1, max_replicas: 4, target_concurrency: 10, stable_window_seconds: 60, panic_window_seconds: 6 };

describe("servingLine", () => {
  it("says how many of the desired replicas are ready", () => {
    expect(servingLine({ desired: 3, admitted: 3, ready: 3, autoscaling: auto })).toBe("Serving: 3 of 3 replicas ready");
    expect(servingLine({ desired: 1, admitted: 1, ready: 0, autoscaling: null })).toBe("Serving: 0 of 1 replica ready · the others are starting");
    expect(servingLine({ desired: 4, admitted: 3, ready: 3, autoscaling: auto })).toBe(
      "Serving: 3 of 4 replicas ready · scaling up from 3, waiting for the scheduler");
    expect(servingLine({ desired: 2, admitted: 3, ready: 3, autoscaling: auto })).toBe("Serving: 3 ready · scaling down to 2 replicas");
    expect(servingLine({ desired: 0, admitted: 0, ready: 0, autoscaling: { ...auto, min_replicas: 0 } })).toMatch(/Scaled to zero/);
  });
});

describe("ScalingPanel", () => {
  it("shows desired, admitted and ready replicas, the autoscaling settings and the gateway", () => {
    const deployment = {
      id: 4, gateway_url: "http://127.0.0.1:8000/serve/demo/digits/", spec: { public: true },
      scale: { desired: 3, admitted: 3, ready: 2, autoscaling: auto },
    } as unknown as Deployment;
    render(
      <MantineProvider>
        <ScalingPanel deployment={deployment} />
      </MantineProvider>,
    );
    expect(screen.getByTestId("scaling-mode").textContent).toBe("Autoscaling");
    expect(screen.getByTestId("replicas-desired").textContent).toBe("3");
    expect(screen.getByTestId("replicas-ready").textContent).toBe("2");
    expect(screen.getByTestId("autoscaling-max").textContent).toBe("4");
    expect(screen.getByTestId("autoscaling-target").textContent).toBe("10 / replica");
    expect(screen.getByTestId("gateway-url").textContent).toBe("http://127.0.0.1:8000/serve/demo/digits/");
  });
});
