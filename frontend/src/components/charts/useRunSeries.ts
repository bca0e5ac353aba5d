// Metric series of tracking runs for a TimeSeriesChart: a downsampled first read from the
// series endpoint, then live points from the `run:<id>` topics merged in place (render
// <LiveTopics topics={topics} onFrame={handleFrame} /> next to the chart), and a range loader
// for drag-to-zoom that reads the zoomed steps at full resolution.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, unwrap } from "../../api/client";
import type { LiveFrame } from "../../live/socket";
import { appendPoints, emptySeries, fromPoints, mergeSeries, sliceRange, type SeriesData } from "../../lib/series";
import type { ChartSeries } from "./TimeSeriesChart";

export interface RunSeriesSpec {
  run: number;
  key: string;
  label: string;
  color: string;
}

/** The first read of a series: enough points for a chart of any width. */
export const OVERVIEW_POINTS = 1000;
/** A zoomed range at most this many points is answered raw (the endpoint allows 20,000). */
export const ZOOM_POINTS = 5000;
/** Live points held per series before the older ones are swapped for a downsampled read. */
export const MAX_HELD_POINTS = 50_000;

interface SeriesAnswer {
  key?: string;
  points?: unknown[];
  downsampled?: boolean;
  count?: number;
}

export async function fetchSeries(
  project: string,
  run: number,
  key: string,
  range: { maxPoints?: number; stepMin?: number; stepMax?: number } = {},
): Promise<SeriesData> {
  const answer = await unwrap(
    api.GET("/api/v1/projects/{project}/runs/{id}/series/", {
      params: {
        path: { project, id: run },
        query: {
          key,
          max_points: range.maxPoints ?? OVERVIEW_POINTS,
          ...(range.stepMin !== undefined ? { step_min: Math.max(0, Math.floor(range.stepMin)) } : {}),
          ...(range.stepMax !== undefined ? { step_max: Math.max(0, Math.ceil(range.stepMax)) } : {}),
        },
      },
    }),
  );
  return fromPoints((answer as SeriesAnswer).points ?? []);
}

const idOf = (run: number, key: string) => `${run}:${key}`;

export interface RunSeriesState {
  series: ChartSeries[];
  revision: number;
  loading: boolean;
  error: unknown;
  retry: () => void;
  loadRange: (lo: number, hi: number) => Promise<Record<string, SeriesData>>;
  /** topics to listen to: run:<id> of every run in the specs */
  topics: string[];
  handleFrame: (frame: LiveFrame) => void;
  /** metric keys seen in live frames, per run (keys logged after the page loaded) */
  liveKeys: Record<number, string[]>;
}

export interface RunSeriesOptions {
  /** runs to listen to even when none of their keys is shown (to learn of new keys) */
  runs?: readonly number[];
  onRunStatus?: (run: number, status: string) => void;
}

export function useRunSeries(
  project: string,
  specs: readonly RunSeriesSpec[],
  { runs = [], onRunStatus }: RunSeriesOptions = {},
): RunSeriesState {
  const store = useRef(new Map<string, SeriesData>());
  const requested = useRef(new Set<string>());
  const acks = useRef(new Map<number, number>());
  const knownKeys = useRef(new Set<string>());
  const compacting = useRef(new Set<string>());
  const [revision, setRevision] = useState(0);
  const [pending, setPending] = useState(0);
  const [error, setError] = useState<unknown>(null);
  const [liveKeys, setLiveKeys] = useState<Record<number, string[]>>({});
  const specsRef = useRef(specs);
  specsRef.current = specs;
  const statusRef = useRef(onRunStatus);
  statusRef.current = onRunStatus;
  const specKey = specs.map((s) => idOf(s.run, s.key)).join(",");

  const load = useCallback(
    (wanted: readonly { run: number; key: string }[]) => {
      for (const { run, key } of wanted) {
        const id = idOf(run, key);
        requested.current.add(id);
        setPending((n) => n + 1);
        fetchSeries(project, run, key)
          .then((data) => {
            if (!requested.current.has(id)) return; // no longer shown
            const held = store.current.get(id);
            // Points that came live while reading are kept; on equal steps they win.
            store.current.set(id, held ? mergeSeries(data, held) : data);
            setRevision((r) => r + 1);
          })
          .catch((e: unknown) => {
            requested.current.delete(id);
            setError(e);
          })
          .finally(() => setPending((n) => n - 1));
      }
    },
    [project],
  );

  useEffect(() => {
    const wanted = new Set(specsRef.current.map((s) => idOf(s.run, s.key)));
    for (const id of [...store.current.keys()]) if (!wanted.has(id)) store.current.delete(id);
    for (const id of [...requested.current]) if (!wanted.has(id)) requested.current.delete(id);
    const missing = specsRef.current.filter((s) => !requested.current.has(idOf(s.run, s.key)));
    if (missing.length) load(missing);
  }, [specKey, load]);

  const refetchRun = useCallback(
    (run: number) => {
      const mine = specsRef.current.filter((s) => s.run === run && requested.current.has(idOf(s.run, s.key)));
      if (mine.length) load(mine);
    },
    [load],
  );

  // A long live session would hold every point: past MAX_HELD_POINTS, the points up to the
  // newest step the server has are replaced by its downsampled series (spikes kept), newer ones stay.
  const compact = useCallback(
    (run: number, key: string) => {
      const id = idOf(run, key);
      if (compacting.current.has(id)) return;
      compacting.current.add(id);
      fetchSeries(project, run, key)
        .then((overview) => {
          const held = store.current.get(id);
          if (!held || !requested.current.has(id) || !overview.steps.length) return;
          const last = overview.steps[overview.steps.length - 1];
          const newer = sliceRange(held, last + 1, Number.MAX_SAFE_INTEGER);
          store.current.set(id, mergeSeries(overview, newer));
          setRevision((r) => r + 1);
        })
        .catch(() => undefined)
        .finally(() => compacting.current.delete(id));
    },
    [project],
  );

  const retry = useCallback(() => {
    setError(null);
    load(specsRef.current.filter((s) => !requested.current.has(idOf(s.run, s.key))));
  }, [load]);

  const handleFrame = useCallback(
    (frame: LiveFrame) => {
      if (frame.type === "subscribed") {
        // A second acknowledgement means the socket re-connected: read again what may have been missed.
        const run = Number((frame.topic ?? "").split(":")[1]);
        const count = (acks.current.get(run) ?? 0) + 1;
        acks.current.set(run, count);
        if (count > 1) refetchRun(run);
        return;
      }
      if (frame.type === "run.status") {
        statusRef.current?.(Number(frame.run), String(frame.status));
        return;
      }
      if (frame.type !== "run.metrics") return;
      const run = Number(frame.run);
      const points = (frame.points ?? {}) as Record<string, unknown>;
      const wanted = new Set(specsRef.current.map((s) => idOf(s.run, s.key)));
      let changed = false;
      const fresh: string[] = [];
      for (const [key, list] of Object.entries(points)) {
        const id = idOf(run, key);
        if (!knownKeys.current.has(id)) {
          knownKeys.current.add(id);
          fresh.push(key);
        }
        if (!wanted.has(id) || !Array.isArray(list) || !list.length) continue;
        let target = store.current.get(id);
        if (!target) {
          target = emptySeries();
          store.current.set(id, target);
        }
        appendPoints(target, list);
        changed = true;
        if (target.steps.length > MAX_HELD_POINTS) compact(run, key);
      }
      if (fresh.length) {
        setLiveKeys((prev) => ({ ...prev, [run]: [...new Set([...(prev[run] ?? []), ...fresh])].sort() }));
      }
      if (changed) setRevision((r) => r + 1);
      if (typeof frame.dropped === "number" && frame.dropped > 0) refetchRun(run);
    },
    [refetchRun, compact],
  );

  const loadRange = useCallback(
    async (lo: number, hi: number) => {
      const entries = await Promise.all(
        specsRef.current.map(async (s) => {
          const data = await fetchSeries(project, s.run, s.key, { maxPoints: ZOOM_POINTS, stepMin: lo, stepMax: hi });
          return [idOf(s.run, s.key), data] as const;
        }),
      );
      return Object.fromEntries(entries);
    },
    [project],
  );

  const labels = specs.map((s) => `${s.label}\u0000${s.color}`).join("\u0001");
  const series = useMemo<ChartSeries[]>(
    () =>
      specsRef.current.map((s) => ({
        id: idOf(s.run, s.key),
        label: s.label,
        color: s.color,
        data: store.current.get(idOf(s.run, s.key)) ?? emptySeries(),
      })),
    // revision: the store changed
    // eslint-disable-next-line react-hooks/exhaustive-deps -- specKey/labels/revision stand for specsRef and the store, mutated in place
    [specKey, labels, revision],
  );
  const runKey = runs.join(",");
  const topics = useMemo(
    () => [...new Set([...specsRef.current.map((s) => s.run), ...runKey.split(",").filter(Boolean).map(Number)])].map((r) => `run:${r}`),
    // eslint-disable-next-line react-hooks/exhaustive-deps -- specKey stands for specsRef's content
    [specKey, runKey],
  );

  return { series, revision, loading: pending > 0, error, retry, loadRange, topics, handleFrame, liveKeys };
}
