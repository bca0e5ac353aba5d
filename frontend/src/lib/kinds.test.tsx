// The dashboard reads the workload kinds from the server (GET /api/v1/kinds/) instead of keeping
// a list: a kind the server adds is labelled and offered without a dashboard change.
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { cleanup, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";

const KINDS = [
  { kind: "training", label: "Training job", route: "training-jobs", runs_to_completion: true, serves_port: false,
    independent_replicas: false },
  { kind: "batch-eval", label: "Batch evaluation", route: "batch-evals", runs_to_completion: true, serves_port: false,
    independent_replicas: false },
];
const GET = vi.fn(async (path: string) => ({ data: path === "/api/v1/kinds/" ? KINDS : undefined, response: { ok: true } }));
vi.mock("../api/client", () => ({
  api: { GET: (path: string) => GET(path) },
  unwrap: async (p: Promise<{ data: unknown }>) => (await p).data,
}));

const { isKnownKind, kindLabel, useKindLabel, useKinds } = await import("./kinds");

afterEach(cleanup);

function Probe() {
  const kinds = useKinds();
  const label = useKindLabel();
  return (
    <ul>
      {kinds.map((k) => <li key={k.kind}>{label(k.kind)}</li>)}
      <li>{label("unknown-kind")}</li>
    </ul>
  );
}

describe("kinds from the server", () => {
  it("lists and labels every kind GET /api/v1/kinds/ answers, a new one included", async () => {
    render(<QueryClientProvider client={new QueryClient()}><Probe /></QueryClientProvider>);
    await waitFor(() => expect(screen.getByText("Batch evaluation")).toBeTruthy());
    expect(screen.getByText("Training job")).toBeTruthy();
    expect(screen.getByText("unknown-kind")).toBeTruthy(); // not listed: its name
    expect(GET).toHaveBeenCalledWith("/api/v1/kinds/");
  });

  it("knows a kind only when the server lists it (once read)", () => {
    expect(isKnownKind(KINDS, "batch-eval")).toBe(true);
    expect(isKnownKind(KINDS, "notebook")).toBe(false);
    expect(isKnownKind([], "notebook")).toBe(true); // not read yet: undecided
    expect(isKnownKind([], "../etc")).toBe(false);
    expect(kindLabel(KINDS, "training")).toBe("Training job");
  });
});
