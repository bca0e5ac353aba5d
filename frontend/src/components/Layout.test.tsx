// The frame's navigation (issue 46, items 16-18): it marks the current page, each route has its
// own document title, the first Tab stop is a skip link, and below the "sm" breakpoint the
// collapsed navigation is inert (no Tab stop, out of the accessibility tree) until the menu
// button opens it; Escape closes it and gives focus back to the button.
import { MantineProvider } from "@mantine/core";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { act, cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { MemoryRouter, Route, Routes } from "react-router";
import { afterEach, describe, expect, it, vi } from "vitest";

vi.mock("../session", () => ({
  useMe: () => ({ username: "erin", is_staff: false, projects: [{ slug: "vision", name: "Vision", role: "owner" }] }),
  defaultProject: () => "vision",
  rememberProject: () => {},
  signOut: async () => {},
  ME_KEY: ["me"],
}));

const { Layout } = await import("./Layout");
const { markSignedIn } = await import("../lib/landing");

const original = window.matchMedia;
afterEach(() => {
  cleanup();
  window.matchMedia = original;
});

/** A window `width` px wide, as far as media queries go. */
function viewport(width: number) {
  window.matchMedia = ((query: string) => {
    const min = /min-width:\s*([\d.]+)em/.exec(query);
    const matches = min ? width >= Number(min[1]) * 16 : false;
    return { matches, media: query, onchange: null, addListener() {}, removeListener() {}, addEventListener() {},
      removeEventListener() {}, dispatchEvent: () => false } as MediaQueryList;
  }) as typeof window.matchMedia;
}

function frame(path: string) {
  return render(
    <MantineProvider>
      <QueryClientProvider client={new QueryClient()}>
        <MemoryRouter initialEntries={[path]}>
          <Routes>
            <Route element={<Layout />}>
              <Route path="/projects/:project/:section" element={<h1>Page</h1>} />
              <Route path="/cluster" element={<h1>Cluster</h1>} />
            </Route>
          </Routes>
        </MemoryRouter>
      </QueryClientProvider>
    </MantineProvider>,
  );
}

describe("Layout", () => {
  it("marks the current page, titles the route and starts with a skip link", () => {
    viewport(1366);
    frame("/projects/vision/storage");
    const nav = screen.getByRole("navigation", { name: "Main" });
    const current = within(nav).getAllByRole("link").filter((a) => a.getAttribute("aria-current") === "page");
    expect(current.map((a) => a.textContent)).toEqual(["Storage"]);
    expect(document.title).toBe("Storage · vision · Cairn");
    const links = screen.getAllByRole("link");
    expect(links[0].textContent).toBe("Skip to content");
    expect(links[0].getAttribute("href")).toBe("#main-content");
    expect(screen.getByRole("main").id).toBe("main-content");
    expect(nav.hasAttribute("inert")).toBe(false);
  });

  it("after signing in focus is on the first page's heading; on a page load nothing takes it", () => {
    viewport(1366);
    frame("/projects/vision/storage");
    expect(document.activeElement).toBe(document.body);
    cleanup();
    markSignedIn();
    frame("/projects/vision/storage");
    const h1 = screen.getByRole("heading", { level: 1 });
    expect(document.activeElement).toBe(h1);
    expect(h1.getAttribute("tabindex")).toBe("-1");
  });

  it("lists every project page, the overview and the kind pages included", () => {
    viewport(1366);
    frame("/projects/vision/notebooks");
    const nav = screen.getByRole("navigation", { name: "Main" });
    expect(within(nav).getAllByRole("link").map((a) => a.textContent)).toEqual([
      "Overview", "Workloads", "Notebooks", "Deployments", "Runs & comparison", "Sweeps", "Quotas", "Storage",
      "Cluster", "API tokens",
    ]);
    expect(within(nav).getByRole("link", { name: "Notebooks" }).getAttribute("aria-current")).toBe("page");
    expect(within(nav).getByRole("link", { name: "Deployments" }).getAttribute("href")).toBe("/projects/vision/deployments");
  });

  it("moves to another page: the navigation follows", () => {
    viewport(1366);
    frame("/projects/vision/storage");
    const nav = screen.getByRole("navigation", { name: "Main" });
    fireEvent.click(within(nav).getByRole("link", { name: "Cluster" }));
    expect(within(nav).getByRole("link", { name: "Cluster" }).getAttribute("aria-current")).toBe("page");
    expect(within(nav).getByRole("link", { name: "Storage" }).getAttribute("aria-current")).toBeNull();
    expect(document.title).toBe("Cluster · Cairn");
  });

  it("at 390 px the collapsed navigation is inert until the menu button opens it", () => {
    viewport(390);
    frame("/projects/vision/workloads");
    const nav = document.getElementById("main-navigation")!;
    expect(nav.hasAttribute("inert")).toBe(true);
    const menu = screen.getByRole("button", { name: "Navigation menu" });
    expect(menu.getAttribute("aria-expanded")).toBe("false");
    expect(menu.getAttribute("aria-controls")).toBe("main-navigation");
    fireEvent.click(menu);
    expect(menu.getAttribute("aria-expanded")).toBe("true");
    expect(nav.hasAttribute("inert")).toBe(false);
    const storage = within(nav).getByRole("link", { name: "Storage" });
    act(() => storage.focus());
    fireEvent.keyDown(storage, { key: "Escape" });
    expect(menu.getAttribute("aria-expanded")).toBe("false");
    expect(nav.hasAttribute("inert")).toBe(true);
    expect(document.activeElement).toBe(menu);
  });
});
