import { describe, expect, it } from "vitest";
import { ApiError, csrfToken, flattenFieldErrors, parseErrorBody } from "./client";

describe("API errors", () => {
  it("keeps the detail and flattens nested field errors to dotted paths", () => {
    const error = new ApiError(400, {
      detail: "resources: gpu: Must be at most 64.",
      errors: { resources: { gpu: ["Must be at most 64."] }, name: ["Required."], command: [{ 0: ["bad"] }] },
    });
    expect(error.detail).toBe("resources: gpu: Must be at most 64.");
    expect(error.fieldErrors["resources.gpu"]).toEqual(["Must be at most 64."]);
    expect(error.fieldErrors.name).toEqual(["Required."]);
    expect(error.fieldErrors["command.0.0"]).toEqual(["bad"]);
  });

  it("explains an unreachable server and non-JSON bodies", () => {
    expect(parseErrorBody(0, null).detail).toMatch(/not reachable/);
    expect(parseErrorBody(502, "Bad gateway").detail).toBe("Bad gateway");
    expect(parseErrorBody(500, undefined).detail).toBe("Request failed (500).");
  });

  it("flattens plain strings and lists", () => {
    expect(flattenFieldErrors(["one", "two"])).toEqual({ non_field_errors: ["one", "two"] });
    expect(flattenFieldErrors("oops")).toEqual({ non_field_errors: ["oops"] });
  });

  it("reads the CSRF cookie", () => {
    expect(csrfToken("a=1; csrftoken=abc%3D; b=2")).toBe("abc=");
    expect(csrfToken("a=1")).toBeUndefined();
  });
});
