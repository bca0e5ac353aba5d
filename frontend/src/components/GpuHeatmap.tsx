// Node × GPU utilisation heatmap: a CSS grid, one row per node, one cell per GPU, coloured by
// utilisation (lib/cluster.ts utilColour), with util / memory / temperature / power in a tooltip.
// An ARIA grid (issue 46, item 16): Tab reaches one GPU, the arrow keys (and Home / End) move
// between them, and the focused GPU shows the same details as hovering does; every cell is named
// by those details for screen readers.
import { Badge, Box, Group, Stack, Text, Tooltip, VisuallyHidden } from "@mantine/core";
import { memo, useRef, useState, type KeyboardEvent } from "react";
import {
  gpuTooltipLines, heatmapColumns, nodeKind, utilColour, utilGradient, utilTextColour, vendorLabel, type NodeRow,
} from "../lib/cluster";

const NAME_WIDTH = 170;

type Gpu = NodeRow["gpus"][number];

const Cell = memo(function Cell({ node, gpu, row, focusable }: { node: string; gpu: Gpu; row: number; focusable: boolean }) {
  const colour = utilColour(gpu.util_percent);
  const util = gpu.util_percent;
  const lines = gpuTooltipLines(node, gpu);
  return (
    <Tooltip
      label={
        <Stack gap={0}>
          {lines.map((line, i) => (
            <Text key={line} size="xs" fw={i === 0 ? 600 : 400}>
              {line}
            </Text>
          ))}
        </Stack>
      }
      withArrow
      openDelay={80}
      events={{ hover: true, focus: true, touch: true }}
    >
      <div
        role="gridcell"
        tabIndex={focusable ? 0 : -1}
        className="gpu-cell"
        data-testid="gpu-cell"
        data-node={node}
        data-gpu={gpu.index}
        data-row={row}
        data-util={util ?? ""}
        aria-label={lines.join(", ")}
        style={{
          height: 26,
          borderRadius: 3,
          background: colour ?? "transparent",
          border: colour ? "1px solid transparent" : "1px dashed var(--mantine-color-default-border)",
          boxShadow: gpu.allocated_milli > 0 ? "inset 0 0 0 2px var(--mantine-color-indigo-5)" : undefined,
          display: "flex",
          alignItems: "center",
          justifyContent: "center",
          fontSize: 10,
          fontVariantNumeric: "tabular-nums",
          color: utilTextColour(util),
          cursor: "default",
          userSelect: "none",
        }}
      >
        <span aria-hidden="true">{util === null || util === undefined ? "·" : Math.round(util)}</span>
      </div>
    </Tooltip>
  );
});

function blankGpu(index: number): Gpu {
  return { index, allocated_milli: 0, util_percent: null, memory_used_mb: null, memory_total_mb: null, temperature_c: null, power_w: null, time: null };
}

/** The GPUs of each row (by column), undefined where a node has no GPU of that index. */
function layout(nodes: NodeRow[], columns: number): (Gpu | undefined)[][] {
  return nodes.map((node) => {
    const byIndex = new Map(node.gpus.map((g) => [g.index, g]));
    return Array.from({ length: columns }, (_, i) => byIndex.get(i) ?? (i < node.gpu_count ? blankGpu(i) : undefined));
  });
}

export function GpuHeatmap({ nodes }: { nodes: NodeRow[] }) {
  const columns = heatmapColumns(nodes);
  const withGpus = nodes.filter((n) => n.gpus.length > 0 || n.gpu_count > 0);
  const cells = layout(withGpus, columns);
  const gridRef = useRef<HTMLDivElement>(null);
  const [active, setActive] = useState<[number, number]>([0, 0]);
  // the focusable cell: the active one while it exists, else the first GPU
  const exists = ([r, c]: [number, number]) => !!cells[r]?.[c];
  const first = (): [number, number] => {
    for (let r = 0; r < cells.length; r++) for (let c = 0; c < columns; c++) if (cells[r][c]) return [r, c];
    return [0, 0];
  };
  const current = exists(active) ? active : first();

  const onKeyDown = (event: KeyboardEvent<HTMLDivElement>) => {
    const moves: Record<string, [number, number]> = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0] };
    let next: [number, number] | null = null;
    const [r, c] = current;
    if (event.key in moves) {
      const [dr, dc] = moves[event.key];
      let [nr, nc] = [r + dr, c + dc];
      // skip the holes of nodes with fewer GPUs
      while (nr >= 0 && nr < cells.length && nc >= 0 && nc < columns && !cells[nr][nc]) [nr, nc] = [nr + dr, nc + dc];
      if (nr >= 0 && nr < cells.length && nc >= 0 && nc < columns) next = [nr, nc];
    } else if (event.key === "Home") {
      next = [r, cells[r].findIndex(Boolean)];
    } else if (event.key === "End") {
      const last = cells[r].map(Boolean).lastIndexOf(true);
      next = [r, last];
    }
    if (!next || next[1] < 0) return;
    event.preventDefault();
    setActive(next);
    gridRef.current?.querySelector<HTMLElement>(`[data-row="${next[0]}"][data-gpu="${next[1]}"]`)?.focus();
  };

  return (
    <Stack gap="xs" data-testid="gpu-heatmap">
      {withGpus.length === 0 ? (
        <Text size="sm" c="dimmed">
          No GPUs in the cluster yet. The heatmap fills in once nodes with GPUs register and report telemetry.
        </Text>
      ) : (
        <Box style={{ overflowX: "auto" }}>
          <div
            ref={gridRef}
            role="grid"
            aria-label="GPU utilisation by node (arrow keys move between GPUs)"
            aria-rowcount={withGpus.length + 1}
            aria-colcount={columns + 1}
            tabIndex={-1}
            onKeyDown={onKeyDown}
            data-testid="gpu-grid"
            style={{
              display: "grid",
              gridTemplateColumns: `${NAME_WIDTH}px repeat(${columns}, minmax(26px, 1fr))`,
              gap: 3,
              padding: 2,
              minWidth: NAME_WIDTH + columns * 29,
              maxWidth: NAME_WIDTH + columns * 72,
            }}
          >
            <div role="row" style={{ display: "contents" }}>
              <div role="columnheader">
                <VisuallyHidden>Node</VisuallyHidden>
              </div>
              {Array.from({ length: columns }, (_, i) => (
                <Text key={i} role="columnheader" size="10px" c="dimmed" ta="center">
                  <VisuallyHidden>GPU </VisuallyHidden>
                  {i}
                </Text>
              ))}
            </div>
            {withGpus.map((node, r) => (
              <div key={node.id} role="row" style={{ display: "contents" }} data-testid="gpu-row">
                <NodeName node={node} />
                {cells[r].map((gpu, c) =>
                  gpu ? (
                    <Cell key={c} node={node.name} gpu={gpu} row={r} focusable={current[0] === r && current[1] === c} />
                  ) : (
                    <div key={c} role="gridcell" aria-label={`${node.name} has no GPU ${c}`} />
                  ),
                )}
              </div>
            ))}
          </div>
        </Box>
      )}
      <Group gap="md" wrap="wrap">
        <Group gap={6} wrap="nowrap">
          <Text size="xs" c="dimmed">0%</Text>
          <div style={{ width: 160, height: 10, borderRadius: 2, background: utilGradient() }} />
          <Text size="xs" c="dimmed">100% utilisation</Text>
        </Group>
        <Group gap={6} wrap="nowrap">
          <div style={{ width: 14, height: 10, borderRadius: 2, border: "1px dashed var(--mantine-color-default-border)" }} />
          <Text size="xs" c="dimmed">no recent sample</Text>
        </Group>
        <Group gap={6} wrap="nowrap">
          <div style={{ width: 14, height: 10, borderRadius: 2, boxShadow: "inset 0 0 0 2px var(--mantine-color-indigo-5)" }} />
          <Text size="xs" c="dimmed">allocated to a workload</Text>
        </Group>
      </Group>
    </Stack>
  );
}

function NodeName({ node }: { node: NodeRow }) {
  return (
    <Group role="rowheader" gap={4} wrap="nowrap" style={{ minWidth: 0, overflow: "hidden" }}>
      <Text size="xs" truncate title={`${node.name}${node.poolName ? ` (${node.poolName})` : ""}: ${nodeKind(node)}`} style={{ minWidth: 0 }}>
        {node.name}
      </Text>
      {(node.accelerator_type && node.accelerator_type !== "none") || node.cpu_arch ? (
        <Badge size="xs" variant="outline" color="violet" style={{ flexShrink: 0 }} data-testid="heatmap-node-kind">
          {[vendorLabel(node.accelerator_type), node.cpu_arch].filter(Boolean).join(" · ")}
        </Badge>
      ) : null}
      {node.cordoned && (
        <Badge size="xs" color="red" variant="light" style={{ flexShrink: 0 }}>
          cordoned
        </Badge>
      )}
    </Group>
  );
}
