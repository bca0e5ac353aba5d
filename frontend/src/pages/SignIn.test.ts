import { describe, expect, it } from "vitest";
import { defaultProject } from "../session";
import { safeNext } from "./SignIn";

describe("sign-in", () => {
  it("follows only same-site paths after sign-in", () => {
    expect(safeNext("/projects/a/workloads")).toBe("/projects/a/workloads");
    expect(safeNext("//evil.example")).toBe("/");
    expect(safeNext("https://evil.example")).toBe("/");
    expect(safeNext(null)).toBe("/");
  });
  it("opens the last project if still allowed", () => {
    const me = { id: 1, username: "a", email: "", is_staff: false, projects: [
      { slug: "x", name: "X", role: "member" }, { slug: "y", name: "Y", role: "viewer" }] };
    expect(defaultProject(me, "y")).toBe("y");
    expect(defaultProject(me, "gone")).toBe("x");
    expect(defaultProject({ ...me, projects: [] }, null)).toBeNull();
  });
});
