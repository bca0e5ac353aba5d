// The live log view's memory: complete lines (the last `cap` of them), the unfinished line
// the stream ended on, and the attempt the text belongs to. Pure; tested in logbuffer.test.ts.

export const DEFAULT_LOG_CAP = 5000;

export interface LogBuffer {
  lines: string[];
  /** text after the last newline (the stream may end mid-line) */
  partial: string;
  attempt: number | null;
  /** lines dropped from the front to stay under the cap */
  dropped: number;
}

export function emptyLog(): LogBuffer {
  return { lines: [], partial: "", attempt: null, dropped: 0 };
}

export function attemptSeparator(attempt: number): string {
  return `──────── attempt ${attempt} ────────`;
}

/** What a terminal shows for a line with carriage returns (progress bars): the last overwrite. */
export function resolveCarriageReturns(line: string): string {
  if (!line.includes("\r")) return line;
  const parts = line.split("\r");
  for (let i = parts.length - 1; i >= 0; i--) if (parts[i] !== "") return parts[i];
  return "";
}

/** The buffer after a `logs` frame: a new object, the input is left as it was. */
export function appendLog(buffer: LogBuffer, text: string, attempt: number | null, cap = DEFAULT_LOG_CAP): LogBuffer {
  let lines = buffer.lines;
  let partial = buffer.partial;
  const added: string[] = [];
  if (attempt !== null && buffer.attempt !== null && attempt !== buffer.attempt) {
    if (partial) added.push(resolveCarriageReturns(partial));
    partial = "";
    added.push(attemptSeparator(attempt));
  }
  const pieces = (partial + text).replace(/\r\n/g, "\n").split("\n");
  partial = pieces.pop() ?? "";
  for (const piece of pieces) added.push(resolveCarriageReturns(piece));
  if (!added.length && partial === buffer.partial && attempt === buffer.attempt) return buffer;
  lines = added.length ? lines.concat(added) : lines;
  let dropped = buffer.dropped;
  if (lines.length > cap) {
    dropped += lines.length - cap;
    lines = lines.slice(lines.length - cap);
  }
  return { lines, partial, attempt: attempt ?? buffer.attempt, dropped };
}

/** A line of its own at the end (e.g. "log ended: succeeded"). */
export function appendNote(buffer: LogBuffer, note: string, cap = DEFAULT_LOG_CAP): LogBuffer {
  const flushed = buffer.partial ? [resolveCarriageReturns(buffer.partial)] : [];
  return appendLog({ ...buffer, lines: buffer.lines.concat(flushed), partial: "" }, `${note}\n`, buffer.attempt, cap);
}

/** The text to show: complete lines plus the unfinished one. */
export function logText(buffer: LogBuffer): string {
  const tail = buffer.partial ? resolveCarriageReturns(buffer.partial) : "";
  if (!buffer.lines.length) return tail;
  return tail ? `${buffer.lines.join("\n")}\n${tail}` : buffer.lines.join("\n");
}
