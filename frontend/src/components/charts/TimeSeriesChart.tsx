// A uPlot line chart for metric series: several series, a legend with values under the cursor,
// log scale, EMA smoothing, drag-to-zoom that fetches the zoomed step range at full resolution
// (double-click or "Reset zoom" to go back), resizing with its container, and live points
// appended without re-creating the chart (uPlot's setData on the same instance).
// Accessible (issue 46, item 16): the plot is an image named by a summary of its series (range,
// latest, min and max), with its points as a table on demand and as a CSV download; legend
// entries are toggle buttons that say whether their series is shown (aria-pressed); "Zoom in" and
// "Reset zoom" buttons do from the keyboard what dragging does with a mouse.
import {
  Box, Button, Group, Loader, ScrollArea, Slider, Switch, Table, Text, Tooltip, UnstyledButton, useComputedColorScheme,
} from "@mantine/core";
import { useCallback, useEffect, useId, useMemo, useRef, useState, type ReactNode } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { chartCsv, chartRows, chartSummary, csvFileName, formatXValue } from "../../lib/chartText";
import { formatNumber } from "../../lib/format";
import {
  alignSeries, countPoints, mergeSeries, positiveOnly, sliceRange, type AlignedData, type SeriesData,
} from "../../lib/series";
import { emaSmooth } from "../../lib/smoothing";
import { xAxisLabel } from "../../lib/series";
import { chartChrome, withAlpha } from "./palette";

export interface ChartSeries {
  /** unique within the chart (e.g. "7:loss") */
  id: string;
  label: string;
  color: string;
  /** a dashed line (e.g. one that repeats another's points exactly, so both stay visible) */
  dash?: number[];
  /** sorted, unique steps; may be updated in place, then bump `revision` */
  data: SeriesData;
}

/** Full-resolution points of each series (by id) between two steps. */
export type RangeLoader = (lo: number, hi: number) => Promise<Record<string, SeriesData>>;

export interface TimeSeriesChartProps {
  /** what the chart shows ("Loss", "Requests per second"): its accessible name starts with it */
  title?: string;
  series: ChartSeries[];
  /** bump when series data changed in place (live points) */
  revision?: number;
  height?: number;
  /** x values are steps (default) or Unix seconds */
  xKind?: "step" | "time";
  /** the x axis's title (default: xAxisLabel(xKind)) */
  xLabel?: string;
  /** the container's data-testid */
  testId?: string;
  /** log-scale switch and smoothing slider */
  controls?: boolean;
  /** enables drag-to-zoom with a re-fetch of the range */
  loadRange?: RangeLoader;
  /** y axis always covers at least this range (e.g. [0, 100] for percentages) */
  yRange?: [number, number];
  formatValue?: (value: number) => string;
  /** labels of the y axis (default: compact numbers) */
  formatAxis?: (value: number) => string;
  /** shown over the chart while it holds no points */
  emptyMessage?: ReactNode;
  /** extra controls to the left of the chart's own */
  toolbar?: ReactNode;
}

interface Zoom {
  lo: number;
  hi: number;
  data: Record<string, SeriesData> | null;
  loading: boolean;
  error: string | null;
}

/** Rows of the data table shown in the page (the CSV has them all). */
export const TABLE_ROWS = 100;

/** 1, 2, 5 × 10^k: ticks of a step axis are whole steps. */
const STEP_INCRS = (() => {
  const out: number[] = [];
  for (let p = 0; p <= 15; p++) for (const m of [1, 2, 5]) out.push(m * 10 ** p);
  return out;
})();

export function compactNumber(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e9) return `${Number((value / 1e9).toPrecision(3))}G`;
  if (abs >= 1e6) return `${Number((value / 1e6).toPrecision(3))}M`;
  if (abs >= 1e4) return `${Number((value / 1e3).toPrecision(3))}k`;
  return formatNumber(value, 4);
}

function lastValue(data: SeriesData): number | null {
  return data.values.length ? data.values[data.values.length - 1] : null;
}

function formatX(value: number, kind: "step" | "time"): string {
  if (kind === "time") return new Date(value * 1000).toLocaleTimeString();
  return `step ${Math.round(value).toLocaleString()}`;
}

export function TimeSeriesChart({
  title,
  series,
  revision = 0,
  height = 280,
  xKind = "step",
  xLabel,
  testId = "metrics-chart",
  controls = true,
  loadRange,
  yRange,
  formatValue = (v) => formatNumber(v),
  formatAxis,
  emptyMessage,
  toolbar,
}: TimeSeriesChartProps) {
  const scheme = useComputedColorScheme("light");
  const [logScale, setLogScale] = useState(false);
  const [smoothing, setSmoothing] = useState(0);
  const [zoom, setZoom] = useState<Zoom | null>(null);
  const [hidden, setHidden] = useState<ReadonlySet<string>>(() => new Set());
  const [cursorIdx, setCursorIdx] = useState<number | null>(null);
  const [tableOpen, setTableOpen] = useState(false);
  const tableId = useId();

  const hostRef = useRef<HTMLDivElement>(null);
  const plotRef = useRef<uPlot | null>(null);
  const shownData = useRef<AlignedData | null>(null);
  const zoomToken = useRef(0);
  const formatAxisRef = useRef(formatAxis ?? compactNumber);
  formatAxisRef.current = formatAxis ?? compactNumber;
  const loadRangeRef = useRef(loadRange);
  loadRangeRef.current = loadRange;
  const hiddenRef = useRef(hidden);
  hiddenRef.current = hidden;

  // What is drawn: the held series, or when zoomed the fetched range merged with any newer held points.
  const view = useMemo(
    () =>
      series.map((s) => {
        if (!zoom) return s.data;
        const inRange = sliceRange(s.data, zoom.lo, zoom.hi);
        const full = zoom.data?.[s.id];
        return full ? mergeSeries(full, inRange) : inRange;
      }),
    // `revision` stands for in-place changes of the series' arrays.
    // eslint-disable-next-line react-hooks/exhaustive-deps -- revision: the arrays change in place
    [series, revision, zoom],
  );
  const pointCount = useMemo(() => countPoints(view), [view]);
  const smoothOn = smoothing > 0;
  const perSeries = smoothOn ? 2 : 1;

  const aligned = useMemo(() => {
    const base = alignSeries(view);
    const out: (number | null)[][] = [base[0]];
    for (let i = 1; i < base.length; i++) {
      const raw = logScale ? positiveOnly(base[i]) : base[i];
      if (smoothOn) {
        const smooth = emaSmooth(base[i], smoothing);
        out.push(logScale ? positiveOnly(smooth) : smooth, raw);
      } else out.push(raw);
    }
    return out as AlignedData;
  }, [view, smoothing, smoothOn, logScale]);

  const requestZoom = useCallback((lo: number, hi: number) => {
    const loader = loadRangeRef.current;
    if (!loader || !(hi > lo)) return;
    const token = ++zoomToken.current;
    setZoom({ lo, hi, data: null, loading: true, error: null });
    loader(lo, hi).then(
      (data) => {
        if (zoomToken.current === token) setZoom({ lo, hi, data, loading: false, error: null });
      },
      (error: unknown) => {
        if (zoomToken.current === token) {
          setZoom({ lo, hi, data: null, loading: false, error: error instanceof Error ? error.message : String(error) });
        }
      },
    );
  }, []);

  const resetZoom = useCallback(() => {
    zoomToken.current++;
    setZoom(null);
  }, []);

  /** The keyboard's drag: the middle half of the steps shown now. */
  const zoomIn = () => {
    const plot = plotRef.current;
    const min = plot?.scales.x.min;
    const max = plot?.scales.x.max;
    if (min === undefined || max === undefined || min === null || max === null) return;
    const quarter = (max - min) / 4;
    const lo = Math.max(0, Math.floor(min + quarter));
    const hi = Math.ceil(max - quarter);
    if (hi - lo >= 2) requestZoom(lo, hi);
  };

  // Whatever changes the chart's structure re-creates it; data changes only call setData.
  const structure = [
    scheme, logScale, smoothOn, height, xKind, xLabel ?? "", !!loadRange, yRange?.join("-") ?? "",
    ...series.map((s) => `${s.id}\u0000${s.label}\u0000${s.color}\u0000${s.dash?.join(",") ?? ""}`),
  ].join("\u0001");

  useEffect(() => {
    const host = hostRef.current;
    if (!host) return undefined;
    const chrome = chartChrome(scheme);
    const zoomable = !!loadRangeRef.current && xKind === "step";
    const uSeries: uPlot.Series[] = [{ label: xKind === "time" ? "time" : "step" }];
    for (const s of series) {
      const show = !hiddenRef.current.has(s.id);
      uSeries.push({
        label: s.label, stroke: s.color, width: s.dash ? 2.4 : 1.6, dash: s.dash, spanGaps: true, show, points: { size: 4 },
      });
      if (smoothOn) {
        uSeries.push({ label: `${s.label} (raw)`, stroke: withAlpha(s.color, 0.3), width: 1, spanGaps: true, show, points: { show: false } });
      }
    }
    const axis = (extra: Partial<uPlot.Axis>): uPlot.Axis => ({
      stroke: chrome.axis,
      font: chrome.font,
      grid: { stroke: chrome.grid, width: 1 },
      ticks: { stroke: chrome.grid, width: 1, size: 4 },
      ...extra,
    });
    const yScale: uPlot.Scale = logScale
      ? { distr: 3, log: 10 }
      : yRange
        ? { range: (_u, min, max) => [Math.min(yRange[0], min ?? yRange[0]), Math.max(yRange[1], max ?? yRange[1])] }
        : {};
    const opts: uPlot.Options = {
      width: Math.max(240, host.clientWidth),
      height,
      legend: { show: false },
      padding: [8, 12, 0, 0],
      cursor: {
        drag: { x: zoomable, y: false, setScale: false, dist: 6 },
        points: { size: 7 },
        bind: {
          dblclick: (_u, _target, handler) => (event) => {
            resetZoom();
            handler(event);
            return null;
          },
        },
      },
      scales: { x: { time: xKind === "time" }, y: yScale },
      axes: [
        axis({
          ...(xKind === "step" ? { incrs: STEP_INCRS, values: (_u, splits: number[]) => splits.map(compactNumber), size: 30 } : {}),
          label: xLabel ?? xAxisLabel(xKind),
          labelSize: 16,
          labelFont: chrome.font,
        }),
        axis({
          values: (_u, splits) => splits.map((v) => (v === null || v === undefined ? "" : formatAxisRef.current(v))),
          size: (_u, values) => Math.max(36, Math.max(0, ...(values ?? []).map((v) => v.length)) * 7 + 14),
        }),
      ],
      series: uSeries,
      hooks: {
        setSelect: [
          (u) => {
            if (!zoomable || u.select.width < 6) return;
            const lo = Math.max(0, Math.floor(u.posToVal(u.select.left, "x")));
            const hi = Math.ceil(u.posToVal(u.select.left + u.select.width, "x"));
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            requestZoom(lo, hi);
          },
        ],
        setCursor: [(u) => setCursorIdx(u.cursor.idx ?? null)],
      },
    };
    const plot = new uPlot(opts, aligned, host);
    const select = plot.root.querySelector<HTMLElement>(".u-select");
    if (select) select.style.background = chrome.selection;
    plotRef.current = plot;
    shownData.current = aligned;
    if (zoom) plot.setScale("x", { min: zoom.lo, max: zoom.hi });
    return () => {
      plot.destroy();
      if (plotRef.current === plot) plotRef.current = null;
    };
    // Re-created only when the structure changes; data goes through setData below.
    // eslint-disable-next-line react-hooks/exhaustive-deps -- `structure` keys every input the plot is built from
  }, [structure]);

  useEffect(() => {
    const plot = plotRef.current;
    if (!plot || shownData.current === aligned) return;
    shownData.current = aligned;
    plot.setData(aligned, true);
    if (zoom && aligned[0].length) plot.setScale("x", { min: zoom.lo, max: zoom.hi });
  }, [aligned, zoom]);

  useEffect(() => {
    const plot = plotRef.current;
    if (!plot) return;
    series.forEach((s, i) => {
      const show = !hidden.has(s.id);
      for (let k = 0; k < perSeries; k++) {
        const idx = 1 + i * perSeries + k;
        if (plot.series[idx] && plot.series[idx].show !== show) plot.setSeries(idx, { show });
      }
    });
  }, [hidden, series, perSeries, structure]);

  useEffect(() => {
    const host = hostRef.current;
    if (!host || typeof ResizeObserver === "undefined") return undefined;
    const observer = new ResizeObserver(() => {
      const plot = plotRef.current;
      const width = host.clientWidth;
      if (plot && width > 0 && Math.abs(plot.width - width) > 1) plot.setSize({ width, height });
    });
    observer.observe(host);
    return () => observer.disconnect();
  }, [height]);

  const toggle = (id: string) =>
    setHidden((prev) => {
      const next = new Set(prev);
      if (next.has(id)) next.delete(id);
      else next.add(id);
      return next;
    });

  const name = title ?? (series.length ? series.map((s) => s.label).join(", ") : "Chart");
  const labelled = useMemo(() => series.map((s, i) => ({ label: s.label, data: view[i] })), [series, view]);
  const shownX = xLabel ?? (xKind === "time" ? "time" : "steps");
  const summary = useMemo(
    () => chartSummary(name, labelled, xKind, formatValue, shownX),
    // formatValue is often an inline arrow: the summary follows the data, not its identity
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [name, labelled, xKind, shownX],
  );
  const downloadCsv = () => {
    const blob = new Blob([chartCsv(labelled, xKind, xLabel)], { type: "text/csv" });
    const url = URL.createObjectURL(blob);
    const link = document.createElement("a");
    link.href = url;
    link.download = csvFileName(name);
    document.body.appendChild(link);
    link.click();
    link.remove();
    window.setTimeout(() => URL.revokeObjectURL(url), 1000);
  };
  const zoomable = !!loadRange && xKind === "step";

  const atCursor = cursorIdx !== null && cursorIdx < aligned[0].length ? cursorIdx : null;
  const legendValue = (i: number): number | null => {
    if (atCursor === null) return lastValue(view[i]);
    const column = aligned[1 + i * perSeries];
    return (column?.[atCursor] as number | null | undefined) ?? null;
  };

  return (
    <Box>
      {(controls || toolbar || zoom) && (
        <Group justify="space-between" gap="xs" mb={6} wrap="wrap">
          <Group gap="sm" wrap="wrap">{toolbar}</Group>
          <Group gap="md" wrap="nowrap">
            {zoom && (
              <Group gap={6} wrap="nowrap" data-testid="chart-zoom">
                {zoom.loading && <Loader size={14} />}
                <Text size="xs" c={zoom.error ? "red" : "dimmed"}>
                  {zoom.error
                    ? `Full-resolution read failed (${zoom.error}); showing held points`
                    : `Steps ${zoom.lo.toLocaleString()}–${zoom.hi.toLocaleString()}`}
                </Text>
                <Button size="compact-xs" variant="light" onClick={resetZoom} data-testid="chart-reset-zoom">
                  Reset zoom
                </Button>
              </Group>
            )}
            {controls && (
              <>
                <Switch
                  size="xs"
                  label="Log scale"
                  checked={logScale}
                  onChange={(e) => setLogScale(e.currentTarget.checked)}
                  data-testid="chart-log-toggle"
                />
                <Group gap={6} wrap="nowrap" w={190}>
                  <Text size="xs" c="dimmed">
                    Smoothing
                  </Text>
                  <Slider
                    flex={1}
                    size="xs"
                    min={0}
                    max={0.99}
                    step={0.01}
                    value={smoothing}
                    onChange={setSmoothing}
                    label={(v) => v.toFixed(2)}
                    thumbLabel="Smoothing"
                    data-testid="chart-smoothing"
                  />
                </Group>
              </>
            )}
          </Group>
        </Group>
      )}
      <Box
        pos="relative"
        data-testid={testId}
        data-x-label={xLabel ?? xAxisLabel(xKind)}
        data-point-count={pointCount}
        data-zoomed={zoom ? "true" : "false"}
        style={{ width: "100%", minWidth: 0 }}
      >
        <div
          ref={hostRef}
          role="img"
          aria-label={summary}
          data-testid="chart-plot"
          style={{ width: "100%", minHeight: height, overflow: "hidden" }}
        />
        {pointCount === 0 && (
          <Box pos="absolute" top={0} left={0} right={0} h={height} style={{ display: "grid", placeItems: "center", pointerEvents: "none" }}>
            <Text size="sm" c="dimmed" ta="center" maw={420}>
              {emptyMessage ?? "No points yet."}
            </Text>
          </Box>
        )}
      </Box>
      {series.length > 0 && (
        <Group gap="md" mt={4} wrap="wrap" data-testid="chart-legend">
          <Text size="xs" c="dimmed" miw={80}>
            {atCursor !== null ? formatX(aligned[0][atCursor], xKind) : "latest"}
          </Text>
          {series.map((s, i) => {
            const value = legendValue(i);
            const off = hidden.has(s.id);
            return (
              <Tooltip key={s.id} label={off ? "Show" : "Hide"} openDelay={500}>
                <UnstyledButton
                  onClick={() => toggle(s.id)}
                  aria-pressed={!off}
                  data-testid="chart-legend-toggle"
                  className="chart-legend-toggle"
                  style={{ opacity: off ? 0.6 : 1 }}
                >
                  <Group gap={6} wrap="nowrap">
                    <Box w={12} h={3} style={{ background: s.color, borderRadius: 2 }} />
                    <Text size="xs" td={off ? "line-through" : undefined}>{s.label}</Text>
                    <Text size="xs" ff="monospace" fw={600}>
                      {value === null ? "—" : formatValue(value)}
                    </Text>
                  </Group>
                </UnstyledButton>
              </Tooltip>
            );
          })}
        </Group>
      )}
      {series.length > 0 && (
        <Group gap="xs" mt={4} wrap="wrap" data-testid="chart-tools">
          {zoomable && pointCount > 0 && (
            <Button size="compact-xs" variant="subtle" onClick={zoomIn} data-testid="chart-zoom-in">
              Zoom in
            </Button>
          )}
          <Button
            size="compact-xs"
            variant="subtle"
            aria-expanded={tableOpen}
            aria-controls={tableId}
            onClick={() => setTableOpen((open) => !open)}
            data-testid="chart-table-toggle"
          >
            {tableOpen ? "Hide data table" : "Data table"}
          </Button>
          <Button
            size="compact-xs"
            variant="subtle"
            onClick={downloadCsv}
            disabled={pointCount === 0}
            data-testid="chart-csv"
            aria-label={`Download the data of ${name} as CSV`}
          >
            CSV
          </Button>
        </Group>
      )}
      {tableOpen && <DataTable id={tableId} name={name} series={labelled} xKind={xKind} xLabel={xLabel} formatValue={formatValue} />}
    </Box>
  );
}

function DataTable({ id, name, series, xKind, xLabel, formatValue }: {
  id: string;
  name: string;
  series: { label: string; data: SeriesData }[];
  xKind: "step" | "time";
  xLabel?: string;
  formatValue: (value: number) => string;
}) {
  const rows = chartRows(series);
  const shown = rows.slice(-TABLE_ROWS);
  return (
    <ScrollArea.Autosize mah={260} mt={4} id={id} data-testid="chart-table" type="auto">
      <Table striped withTableBorder fz="xs" verticalSpacing={2}>
        <Table.Caption>
          {name}
          {rows.length > shown.length ? `: the last ${shown.length} of ${rows.length} points (the CSV has all)` : ""}
        </Table.Caption>
        <Table.Thead>
          <Table.Tr>
            <Table.Th scope="col">{xLabel ?? (xKind === "time" ? "Time" : "Step")}</Table.Th>
            {series.map((s, i) => (
              <Table.Th key={i} scope="col">{s.label}</Table.Th>
            ))}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {shown.map((row) => (
            <Table.Tr key={row[0]}>
              <Table.Th scope="row" fw={400}>{row[0] === null ? "" : formatXValue(row[0], xKind)}</Table.Th>
              {row.slice(1).map((v, i) => (
                <Table.Td key={i}>{v === null ? "—" : formatValue(v)}</Table.Td>
              ))}
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </ScrollArea.Autosize>
  );
}
