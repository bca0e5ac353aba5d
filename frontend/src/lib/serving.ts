// The gateway's request metrics of a deployment (apps/deployments/metrics.py): telemetry
// samples named serve.<stat> (the whole deployment) and serve.<stat>.r<n> (replica n).

export interface ServeLine {
  metric: string;
  label: string;
}

export interface ServePanel {
  title: string;
  unit: string;
  lines: ServeLine[];
}

const PATTERN = /^serve\.([a-z0-9_]+?)(?:\.r(\d+))?$/;

export function parseServeMetric(name: string): { stat: string; replica: number | null } | null {
  const m = PATTERN.exec(name);
  if (!m) return null;
  return { stat: m[1], replica: m[2] === undefined ? null : Number(m[2]) };
}

/** The panels to draw from the metric names known for the deployment. */
export function servingPanels(names: Iterable<string>): ServePanel[] {
  const replicas = new Set<number>();
  const known = new Set<string>();
  for (const name of names) {
    const parsed = parseServeMetric(name);
    if (!parsed) continue;
    known.add(name);
    if (parsed.replica !== null) replicas.add(parsed.replica);
  }
  const ordered = [...replicas].sort((a, b) => a - b);
  const perReplica = (stat: string): ServeLine[] =>
    [
      { metric: `serve.${stat}`, label: "all replicas" },
      ...ordered.map((r) => ({ metric: `serve.${stat}.r${r}`, label: `replica ${r}` })),
    ].filter((l) => known.has(l.metric));
  const panels: ServePanel[] = [
    {
      title: "Requests per second",
      unit: "req/s",
      // The gateway's own answers (no replica took them: none ready, or all refused) apart.
      lines: [
        ...perReplica("rps"),
        ...(known.has("serve.gateway_rps") ? [{ metric: "serve.gateway_rps", label: "gateway (no replica)" }] : []),
      ],
    },
    {
      title: "Latency",
      unit: "ms",
      lines: ["p50", "p95", "p99"].map((q) => ({ metric: `serve.${q}_ms`, label: q })).filter((l) => known.has(l.metric)),
    },
    { title: "Requests in flight (average)", unit: "", lines: perReplica("concurrency") },
    {
      title: "Answers by status",
      unit: "req/s",
      lines: ["2xx", "3xx", "4xx", "5xx"].map((c) => ({ metric: `serve.s${c}`, label: c })).filter((l) => known.has(l.metric)),
    },
  ];
  return panels.filter((p) => p.lines.length > 0);
}
