// GPU telemetry attributed to one workload: a first read per metric from
// GET /api/v1/projects/<p>/workload-telemetry/<id>/?metric=..., then live samples from the
// `workload.telemetry` frames of topic workload:<id>, appended in place (x = Unix seconds).
import { useQuery } from "@tanstack/react-query";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, unwrap } from "../../api/client";
import { appendPoints, emptySeries, mergeSeries, type SeriesData } from "../../lib/series";
import { seriesColour } from "./palette";
import type { ChartSeries } from "./TimeSeriesChart";

export interface GpuMetric {
  metric: string;
  title: string;
  unit: string;
  /** the same quantity as logged by the SDK: system/gpu<i>/<runKey> */
  runKey: string;
  yRange?: [number, number];
}

export const GPU_METRICS: readonly GpuMetric[] = [
  { metric: "gpu.util_percent", title: "GPU utilisation", unit: "%", runKey: "util_percent", yRange: [0, 100] },
  { metric: "gpu.memory_used_mb", title: "GPU memory used", unit: "MiB", runKey: "memory_used_mb", yRange: [0, 1] },
  { metric: "gpu.temperature_c", title: "GPU temperature", unit: "°C", runKey: "temperature_c", yRange: [20, 90] },
  { metric: "gpu.power_w", title: "GPU power", unit: "W", runKey: "power_w", yRange: [0, 1] },
];

interface TelemetryAnswer {
  metric?: string;
  series?: { gpu: number | null; points: [number, number, number, number][] }[];
}

export interface TelemetrySample {
  node?: string;
  gpu: number | null;
  metric: string;
  value: number;
  time: number;
}

const MAX_POINTS = 400;
const gpuLabel = (gpu: string) => (gpu === "node" ? "node" : `GPU ${gpu}`);

export function useWorkloadTelemetry(project: string, workloadId: number, since: string | null, until: string | null) {
  const store = useRef(new Map<string, Map<string, SeriesData>>());
  const [revision, setRevision] = useState(0);
  const [liveMetrics, setLiveMetrics] = useState<ReadonlySet<string>>(() => new Set());

  const metricsQuery = useQuery({
    queryKey: ["workload-telemetry-metrics", project, workloadId],
    queryFn: async () =>
      ((await unwrap(
        api.GET("/api/v1/projects/{project}/workload-telemetry/{id}/", { params: { path: { project, id: workloadId } } }),
      )) as { metrics?: string[] }).metrics ?? [],
  });
  const known = useMemo(
    () => new Set([...(metricsQuery.data ?? []), ...liveMetrics]),
    [metricsQuery.data, liveMetrics],
  );
  const wanted = GPU_METRICS.filter((m) => (metricsQuery.data ?? []).includes(m.metric)).map((m) => m.metric);

  const seriesQuery = useQuery({
    queryKey: ["workload-telemetry", project, workloadId, wanted.join(","), since, until],
    enabled: wanted.length > 0,
    queryFn: async () => {
      const answers = await Promise.all(
        wanted.map(async (metric) => {
          const answer = (await unwrap(
            api.GET("/api/v1/projects/{project}/workload-telemetry/{id}/", {
              params: {
                path: { project, id: workloadId },
                query: { metric, max_points: MAX_POINTS, ...(since ? { since } : {}), ...(until ? { until } : {}) },
              },
            }),
          )) as TelemetryAnswer;
          return [metric, answer] as const;
        }),
      );
      return answers;
    },
    staleTime: Infinity,
  });

  useEffect(() => {
    if (!seriesQuery.data) return;
    for (const [metric, answer] of seriesQuery.data) {
      const byGpu = store.current.get(metric) ?? new Map<string, SeriesData>();
      for (const line of answer.series ?? []) {
        const key = line.gpu === null ? "node" : String(line.gpu);
        const fetched: SeriesData = { steps: line.points.map((p) => p[0]), values: line.points.map((p) => p[1]) };
        const held = byGpu.get(key);
        byGpu.set(key, held ? mergeSeries(fetched, held) : fetched);
      }
      store.current.set(metric, byGpu);
    }
    setRevision((r) => r + 1);
  }, [seriesQuery.data]);

  const handleSamples = useCallback((samples: readonly TelemetrySample[]) => {
    const fresh: string[] = [];
    let changed = false;
    for (const s of samples) {
      if (typeof s.value !== "number" || typeof s.time !== "number" || typeof s.metric !== "string") continue;
      let byGpu = store.current.get(s.metric);
      if (!byGpu) {
        byGpu = new Map();
        store.current.set(s.metric, byGpu);
        fresh.push(s.metric);
      }
      const key = s.gpu === null || s.gpu === undefined ? "node" : String(s.gpu);
      let target = byGpu.get(key);
      if (!target) {
        target = emptySeries();
        byGpu.set(key, target);
      }
      appendPoints(target, [[s.time, s.value]]);
      changed = true;
    }
    if (fresh.length) setLiveMetrics((prev) => new Set([...prev, ...fresh]));
    if (changed) setRevision((r) => r + 1);
  }, []);

  const panels = useMemo(
    () =>
      GPU_METRICS.map((m) => {
        const byGpu = store.current.get(m.metric);
        const keys = [...(byGpu?.keys() ?? [])].sort((a, b) => Number(a) - Number(b));
        const series: ChartSeries[] = keys.map((gpu, i) => ({
          id: `${m.metric}:${gpu}`,
          label: gpuLabel(gpu),
          color: seriesColour(i),
          data: byGpu?.get(gpu) ?? emptySeries(),
        }));
        return { ...m, series };
      }),
    // eslint-disable-next-line react-hooks/exhaustive-deps -- revision: the store is mutated in place
    [revision],
  );
  const hasData = panels.some((p) => p.series.some((s) => s.data.steps.length > 0)) || GPU_METRICS.some((m) => known.has(m.metric));

  return {
    panels,
    revision,
    hasData,
    loading: metricsQuery.isPending || (wanted.length > 0 && seriesQuery.isPending),
    error: metricsQuery.error ?? seriesQuery.error,
    retry: () => {
      void metricsQuery.refetch();
      void seriesQuery.refetch();
    },
    handleSamples,
  };
}
