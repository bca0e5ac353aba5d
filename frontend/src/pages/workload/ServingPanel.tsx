// A deployment's request metrics, measured by Cairn's gateway (apps/deployments/metrics.py):
// requests/s, latency p50/p95/p99, requests in flight and answers by status class, for the whole
// deployment and per replica. A first read per metric from GET .../workload-telemetry/<id>/,
// then live samples from the `workload.telemetry` frames of topic workload:<id>.
import { Alert, Box, Card, SimpleGrid, Text, Title } from "@mantine/core";
import { useQuery } from "@tanstack/react-query";
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api, unwrap } from "../../api/client";
import { seriesColour } from "../../components/charts/palette";
import { TimeSeriesChart, type ChartSeries } from "../../components/charts/TimeSeriesChart";
import { ErrorState } from "../../components/States";
import { useTopic } from "../../live/LiveProvider";
import { formatNumber } from "../../lib/format";
import { appendPoints, emptySeries, mergeSeries, type SeriesData } from "../../lib/series";
import { parseServeMetric, servingPanels } from "../../lib/serving";
import type { Workload } from "./api";

interface TelemetryAnswer {
  series?: { gpu: number | null; points: [number, number, number, number][] }[];
}

const MAX_POINTS = 300;

export function ServingPanel({ project, workload: w }: { project: string; workload: Workload }) {
  const store = useRef(new Map<string, SeriesData>());
  const [revision, setRevision] = useState(0);
  const [liveNames, setLiveNames] = useState<ReadonlySet<string>>(() => new Set());
  const since = w.started_at ?? w.created_at;

  const namesQuery = useQuery({
    queryKey: ["workload-telemetry-metrics", project, w.id],
    queryFn: async () =>
      ((await unwrap(
        api.GET("/api/v1/projects/{project}/workload-telemetry/{id}/", { params: { path: { project, id: w.id } } }),
      )) as { metrics?: string[] }).metrics ?? [],
  });
  const stored = useMemo(() => (namesQuery.data ?? []).filter((n) => parseServeMetric(n)), [namesQuery.data]);
  const seriesQuery = useQuery({
    queryKey: ["serving-series", project, w.id, stored.join(","), since],
    enabled: stored.length > 0,
    staleTime: Infinity,
    queryFn: async () =>
      Promise.all(
        stored.map(async (metric) => {
          const answer = (await unwrap(
            api.GET("/api/v1/projects/{project}/workload-telemetry/{id}/", {
              params: { path: { project, id: w.id }, query: { metric, max_points: MAX_POINTS, ...(since ? { since } : {}) } },
            }),
          )) as TelemetryAnswer;
          return [metric, answer] as const;
        }),
      ),
  });
  useEffect(() => {
    if (!seriesQuery.data) return;
    for (const [metric, answer] of seriesQuery.data) {
      const points = (answer.series ?? []).flatMap((line) => line.points);
      points.sort((a, b) => a[0] - b[0]);
      const fetched: SeriesData = { steps: points.map((p) => p[0]), values: points.map((p) => p[1]) };
      const held = store.current.get(metric);
      store.current.set(metric, held ? mergeSeries(fetched, held) : fetched);
    }
    setRevision((r) => r + 1);
  }, [seriesQuery.data]);

  const onSamples = useCallback((samples: { metric?: unknown; value?: unknown; time?: unknown }[]) => {
    const fresh: string[] = [];
    for (const s of samples) {
      if (typeof s.metric !== "string" || typeof s.value !== "number" || typeof s.time !== "number") continue;
      if (!parseServeMetric(s.metric)) continue;
      let target = store.current.get(s.metric);
      if (!target) {
        target = emptySeries();
        store.current.set(s.metric, target);
        fresh.push(s.metric);
      }
      appendPoints(target, [[s.time, s.value]]);
    }
    if (fresh.length) setLiveNames((prev) => new Set([...prev, ...fresh]));
    setRevision((r) => r + 1);
  }, []);
  useTopic(`workload:${w.id}`, (frame) => {
    if (frame.type === "workload.telemetry" && Array.isArray(frame.samples)) onSamples(frame.samples);
  });

  const panels = useMemo(() => servingPanels([...stored, ...liveNames]), [stored, liveNames]);
  const chartSeries = (lines: { metric: string; label: string }[]): ChartSeries[] =>
    lines.map((l, i) => ({ id: l.metric, label: l.label, color: seriesColour(i), data: store.current.get(l.metric) ?? emptySeries() }));

  return (
    <Card withBorder padding="sm" data-testid="serving-panel">
      <Title order={2} size="h4" mb="xs">
        Requests
      </Title>
      {namesQuery.error ? <ErrorState error={namesQuery.error} onRetry={() => namesQuery.refetch()} /> : null}
      {panels.length === 0 ? (
        <Alert color="gray" variant="light" title="No requests yet" data-testid="serving-empty">
          Requests through the gateway ({w.endpoint ?? "its URL above"}) are counted here: requests per second,
          latency, requests in flight and answers by status, live.
        </Alert>
      ) : (
        <SimpleGrid cols={{ base: 1, md: 2 }} spacing="md">
          {panels.map((p) => (
            <Box key={p.title}>
              <Text size="sm" fw={600} mb={2}>
                {p.title}
              </Text>
              <TimeSeriesChart
                title={p.title}
                testId="serving-chart"
                series={chartSeries(p.lines)}
                revision={revision}
                height={150}
                xKind="time"
                controls={false}
                yRange={[0, 1]}
                formatValue={(v) => `${formatNumber(v, 3)}${p.unit ? ` ${p.unit}` : ""}`}
                emptyMessage="No samples in this range."
              />
            </Box>
          ))}
        </SimpleGrid>
      )}
    </Card>
  );
}
