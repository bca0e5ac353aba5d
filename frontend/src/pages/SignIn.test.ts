import { describe, expect, it } from "vitest";
import { defaultProject } from "../session";
import { isServerPage, safeNext } from "./SignIn";

describe("sign-in", () => {
  it("follows only same-site paths after sign-in", () => {
    expect(safeNext("/projects/a/workloads")).toBe("/projects/a/workloads");
    expect(safeNext("//evil.example")).toBe("/");
    expect(safeNext("https://evil.example")).toBe("/");
    expect(safeNext(null)).toBe("/");
  });
  it("loads the API reference and the admin as pages, routes the rest", () => {
    expect(isServerPage("/api/docs/")).toBe(true);
    expect(isServerPage("/admin/")).toBe(true);
    expect(isServerPage("/nb/demo/7/lab")).toBe(true);
    expect(isServerPage("/projects/a/workloads")).toBe(false);
    expect(isServerPage("/apis")).toBe(false);
  });
  it("opens the last project if still allowed", () => {
    const me = { id: 1, username: "a", email: "", is_staff: false, projects: [
      { slug: "x", name: "X", role: "member" }, { slug: "y", name: "Y", role: "viewer" }] };
    expect(defaultProject(me, "y")).toBe("y");
    expect(defaultProject(me, "gone")).toBe("x");
    expect(defaultProject({ ...me, projects: [] }, null)).toBeNull();
  });
});
