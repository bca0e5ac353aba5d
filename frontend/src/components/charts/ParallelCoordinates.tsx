// Parallel coordinates in plain SVG: one axis per param and a last axis for the chosen metric,
// one polyline per run, in the run's own colour when the page gives one (as its curve), else by the
// metric. Geometry comes from lib/parcoords.ts.
import { Box, Group, Text, useComputedColorScheme } from "@mantine/core";
import { useElementSize } from "@mantine/hooks";
import { useMemo, useState } from "react";
import { formatNumber } from "../../lib/format";
import { axisTitleX, layoutParcoords, linePath, rampColour, titleWidth, type ParcoordsRun } from "../../lib/parcoords";
import { chartChrome } from "./palette";

export interface ParallelCoordinatesProps {
  runs: ParcoordsRun[];
  paramKeys: string[];
  metricLabel: string;
  height?: number;
}

const MARGINS = { top: 34, right: 56, bottom: 20, left: 56 };
const MAX_LABEL = 14;

function shorten(text: string, max = MAX_LABEL): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function ParallelCoordinates({ runs, paramKeys, metricLabel, height = 320 }: ParallelCoordinatesProps) {
  const { ref, width } = useElementSize();
  const scheme = useComputedColorScheme("light");
  const chrome = chartChrome(scheme);
  const [hover, setHover] = useState<number | null>(null);
  const plotWidth = Math.max(320, width);
  const layout = useMemo(
    () => layoutParcoords(runs, paramKeys, metricLabel, plotWidth, height, MARGINS),
    [runs, paramKeys, metricLabel, plotWidth, height],
  );
  const halo = scheme === "dark" ? "var(--mantine-color-dark-6)" : "var(--mantine-color-white)";
  const hovered = layout.lines.find((l) => l.runId === hover) ?? null;

  return (
    <Box ref={ref} data-testid="parallel-coordinates" data-axes={layout.axes.length} data-lines={layout.lines.length}>
      <svg width={plotWidth} height={height} role="img" aria-label={`Parallel coordinates of ${runs.length} runs`} style={{ display: "block" }}>
        {layout.axes.map((axis) => (
          <line
            key={axis.key}
            x1={axis.x}
            x2={axis.x}
            y1={MARGINS.top}
            y2={height - MARGINS.bottom}
            stroke={chrome.axis}
            strokeWidth={1}
          />
        ))}
        {layout.lines.map((line) => {
          const dim = hover !== null && hover !== line.runId;
          return (
            <g
              key={line.runId}
              data-run-id={line.runId}
              onMouseEnter={() => setHover(line.runId)}
              onMouseLeave={() => setHover(null)}
              style={{ cursor: "default" }}
            >
              <path d={linePath(line.points)} fill="none" stroke="transparent" strokeWidth={10} />
              <path
                d={linePath(line.points)}
                fill="none"
                stroke={line.color}
                data-colour={line.color}
                strokeWidth={hover === line.runId ? 3.2 : 2}
                strokeOpacity={dim ? 0.18 : 0.9}
                data-testid="parcoords-line"
              />
              {line.points.map((p, i) =>
                p ? <circle key={i} cx={p.x} cy={p.y} r={hover === line.runId ? 3.5 : 2.5} fill={line.color} fillOpacity={dim ? 0.2 : 1} /> : null,
              )}
            </g>
          );
        })}
        {layout.axes.map((axis) => (
          <g key={axis.key} data-axis={axis.key} data-axis-source={axis.source} pointerEvents="none" paintOrder="stroke" stroke={halo} strokeWidth={3} strokeLinejoin="round">
            <text
              x={axisTitleX(axis.x, titleWidth(shorten(axis.label, 18)) + (axis.kind === "log" ? 22 : 0), plotWidth)}
              y={MARGINS.top - 16}
              textAnchor="middle"
              fontSize={12}
              fontWeight={axis.source === "metric" ? 700 : 600}
              fill={chrome.axis}
            >
              <title>{axis.label}</title>
              {shorten(axis.label, 18)}
              {axis.kind === "log" && (
                <tspan fontSize={9} fontWeight={400} dx={4}>
                  log
                </tspan>
              )}
            </text>
            {axis.ticks.map((tick) => (
              <g key={`${tick.label}-${tick.y}`}>
                <line x1={axis.x - 4} x2={axis.x} y1={tick.y} y2={tick.y} stroke={chrome.axis} strokeWidth={1} />
                <text x={axis.x - 6} y={tick.y + 3.5} textAnchor="end" fontSize={10} fill={chrome.axis}>
                  <title>{tick.label}</title>
                  {shorten(tick.label)}
                </text>
              </g>
            ))}
          </g>
        ))}
      </svg>
      <Group justify="space-between" mt={4} gap="md" wrap="wrap">
        <Text size="xs" c="dimmed" mih={18}>
          {hovered
            ? `${hovered.name}: ${metricLabel} ${formatNumber(hovered.metric)}`
            : "Hover a line to see its run. Gaps mean the run has no value for that axis."}
        </Text>
        {layout.colourBy === "run" && (
          <Group gap="sm" wrap="wrap" data-testid="parcoords-legend" data-colour-by="run">
            <Text size="xs" c="dimmed">Colour: one per run, as on the curves</Text>
            {layout.lines.map((line) => (
              <Group key={line.runId} gap={4} wrap="nowrap" data-testid="parcoords-legend-item" data-run-id={line.runId} data-colour={line.color}>
                <Box w={10} h={10} style={{ borderRadius: 5, background: line.color, flex: "none" }} />
                <Text size="xs">{line.name}</Text>
              </Group>
            ))}
          </Group>
        )}
        {layout.colourBy === "metric" && layout.metricRange && (
          <Group gap={6} wrap="nowrap" data-testid="parcoords-legend" data-colour-by="metric">
            <Text size="xs" c="dimmed">Colour: {metricLabel}</Text>
            <Text size="xs" c="dimmed">
              {formatNumber(layout.metricRange[0])}
            </Text>
            <Box
              w={120}
              h={8}
              style={{
                borderRadius: 4,
                background: `linear-gradient(to right, ${[0, 0.25, 0.5, 0.75, 1].map((t) => rampColour(t, 0, 1)).join(", ")})`,
              }}
            />
            <Text size="xs" c="dimmed">
              {formatNumber(layout.metricRange[1])}
            </Text>
          </Group>
        )}
      </Group>
    </Box>
  );
}
