// Node × GPU utilisation heatmap: a CSS grid, one row per node, one cell per GPU, coloured by
// utilisation (lib/cluster.ts utilColour), with util / memory / temperature / power on hover.
import { Badge, Box, Group, Stack, Text, Tooltip } from "@mantine/core";
import { memo } from "react";
import {
  gpuTooltipLines, heatmapColumns, nodeKind, utilColour, utilGradient, utilTextColour, vendorLabel, type NodeRow,
} from "../lib/cluster";

const NAME_WIDTH = 170;

const Cell = memo(function Cell({ node, gpu }: { node: string; gpu: NodeRow["gpus"][number] }) {
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
    >
      <div
        data-testid="gpu-cell"
        data-node={node}
        data-gpu={gpu.index}
        data-util={util ?? ""}
        aria-label={lines.join(", ")}
        style={{
          height: 26,
          borderRadius: 3,
          background: colour ?? "transparent",
          border: colour ? "1px solid transparent" : "1px dashed var(--mantine-color-default-border)",
          outline: gpu.allocated_milli > 0 ? "2px solid var(--mantine-color-indigo-5)" : undefined,
          outlineOffset: -2,
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
        {util === null || util === undefined ? "·" : Math.round(util)}
      </div>
    </Tooltip>
  );
});

export function GpuHeatmap({ nodes }: { nodes: NodeRow[] }) {
  const columns = heatmapColumns(nodes);
  const withGpus = nodes.filter((n) => n.gpus.length > 0 || n.gpu_count > 0);

  return (
    <Stack gap="xs" data-testid="gpu-heatmap">
      {withGpus.length === 0 ? (
        <Text size="sm" c="dimmed">
          No GPUs in the cluster yet. The heatmap fills in once nodes with GPUs register and report telemetry.
        </Text>
      ) : (
        <Box style={{ overflowX: "auto" }}>
          <div
            style={{
              display: "grid",
              gridTemplateColumns: `${NAME_WIDTH}px repeat(${columns}, minmax(26px, 1fr))`,
              gap: 3,
              minWidth: NAME_WIDTH + columns * 29,
              maxWidth: NAME_WIDTH + columns * 72,
            }}
          >
            <div />
            {Array.from({ length: columns }, (_, i) => (
              <Text key={i} size="10px" c="dimmed" ta="center">
                {i}
              </Text>
            ))}
            {withGpus.map((node) => {
              const byIndex = new Map(node.gpus.map((g) => [g.index, g]));
              return (
                <Row key={node.id} node={node} columns={columns} byIndex={byIndex} />
              );
            })}
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
          <div style={{ width: 14, height: 10, borderRadius: 2, outline: "2px solid var(--mantine-color-indigo-5)", outlineOffset: -2 }} />
          <Text size="xs" c="dimmed">allocated to a workload</Text>
        </Group>
      </Group>
    </Stack>
  );
}

function Row({ node, columns, byIndex }: { node: NodeRow; columns: number; byIndex: Map<number, NodeRow["gpus"][number]> }) {
  return (
    <>
      <Group gap={4} wrap="nowrap" style={{ minWidth: 0, overflow: "hidden" }}>
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
      {Array.from({ length: columns }, (_, i) => {
        const gpu = byIndex.get(i);
        if (gpu) return <Cell key={i} node={node.name} gpu={gpu} />;
        return i < node.gpu_count ? (
          <Cell
            key={i}
            node={node.name}
            gpu={{ index: i, allocated_milli: 0, util_percent: null, memory_used_mb: null, memory_total_mb: null, temperature_c: null, power_w: null, time: null }}
          />
        ) : (
          <div key={i} />
        );
      })}
    </>
  );
}
