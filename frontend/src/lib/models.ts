// The model a workload serves (spec.model as Cairn resolved it at submit) and where its lineage is.
export interface ServedModel {
  ref: string; // name@version
  mount: string;
  run: number | null; // the run that produced the version
  workload: number | null; // that run's workload
}

export function servedModel(spec: unknown): ServedModel | null {
  if (!spec || typeof spec !== "object") return null;
  const model = (spec as Record<string, unknown>).model;
  if (!model || typeof model !== "object") return null;
  const m = model as Record<string, unknown>;
  if (typeof m.name !== "string" || typeof m.version !== "number") return null;
  return {
    ref: `${m.name}@${m.version}`,
    mount: typeof m.mount === "string" ? m.mount : "/model",
    run: typeof m.run === "number" ? m.run : null,
    workload: typeof m.workload === "number" ? m.workload : null,
  };
}

/** Where the producing run is shown: the compare page of that run (it opens its params and curves). */
export function lineageLink(project: string, model: ServedModel): string | null {
  return model.run === null ? null : `/projects/${encodeURIComponent(project)}/compare?runs=${model.run}`;
}
