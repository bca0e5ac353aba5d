import { describe, expect, it } from "vitest";
import { appendLog, appendNote, attemptSeparator, emptyLog, logText, resolveCarriageReturns } from "./logbuffer";

describe("appendLog", () => {
  it("splits complete lines and keeps the unfinished one", () => {
    let buf = appendLog(emptyLog(), "epoch 1 loss 0.5\nepoch 2 lo", 1);
    expect(buf.lines).toEqual(["epoch 1 loss 0.5"]);
    expect(buf.partial).toBe("epoch 2 lo");
    buf = appendLog(buf, "ss 0.4\n", 1);
    expect(buf.lines).toEqual(["epoch 1 loss 0.5", "epoch 2 loss 0.4"]);
    expect(buf.partial).toBe("");
  });

  it("does not mutate the previous buffer", () => {
    const first = appendLog(emptyLog(), "a\n", 1);
    const second = appendLog(first, "b\n", 1);
    expect(first.lines).toEqual(["a"]);
    expect(second.lines).toEqual(["a", "b"]);
  });

  it("keeps only the last `cap` lines and counts the dropped ones", () => {
    let buf = emptyLog();
    for (let i = 0; i < 10; i++) buf = appendLog(buf, `line ${i}\n`, 1, 4);
    expect(buf.lines).toEqual(["line 6", "line 7", "line 8", "line 9"]);
    expect(buf.dropped).toBe(6);
  });

  it("puts a separator when a new attempt starts", () => {
    let buf = appendLog(emptyLog(), "first try\npartial", 1);
    buf = appendLog(buf, "second try\n", 2);
    expect(buf.lines).toEqual(["first try", "partial", attemptSeparator(2), "second try"]);
    expect(buf.attempt).toBe(2);
  });

  it("handles CRLF and progress bars", () => {
    const buf = appendLog(emptyLog(), "a\r\n 10%\r 50%\r100%\nnext", 1);
    expect(buf.lines).toEqual(["a", "100%"]);
    expect(logText(buf)).toBe("a\n100%\nnext");
  });

  it("returns the same buffer when nothing changes", () => {
    const buf = appendLog(emptyLog(), "a\n", 1);
    expect(appendLog(buf, "", 1)).toBe(buf);
  });
});

describe("helpers", () => {
  it("resolves carriage returns like a terminal", () => {
    expect(resolveCarriageReturns("plain")).toBe("plain");
    expect(resolveCarriageReturns("1/3\r2/3\r3/3")).toBe("3/3");
    expect(resolveCarriageReturns("done\r")).toBe("done");
  });

  it("appends a note on a line of its own", () => {
    const buf = appendNote(appendLog(emptyLog(), "x\ny", 1), "— log ended —");
    expect(buf.lines).toEqual(["x", "y", "— log ended —"]);
    expect(logText(buf)).toBe("x\ny\n— log ended —");
  });

  it("shows an empty buffer as empty text", () => {
    expect(logText(emptyLog())).toBe("");
  });
});
