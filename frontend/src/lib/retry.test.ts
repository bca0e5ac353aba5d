import { describe, expect, it } from "vitest";
import { ApiError } from "../api/client";
import { retryTransient } from "./retry";

describe("retryTransient", () => {
  it("does not retry refusals", () => {
    for (const status of [400, 401, 403, 404, 409]) expect(retryTransient(0, new ApiError(status, { detail: "no" }))).toBe(false);
  });
  it("retries network failures, server errors and throttling twice", () => {
    for (const error of [new ApiError(0, null), new ApiError(502, "bad gateway"), new ApiError(429, {}), new Error("x")]) {
      expect(retryTransient(0, error)).toBe(true);
      expect(retryTransient(1, error)).toBe(true);
      expect(retryTransient(2, error)).toBe(false);
    }
  });
});
