// The document title of each route ("Workloads · dash · Cairn"), so a tab, the history and a
// screen reader's announcement say which page this is.

const PROJECT_PAGES: Record<string, string> = {
  workloads: "Workloads",
  overview: "Overview",
  notebooks: "Notebooks",
  deployments: "Deployments",
  runs: "Runs & comparison",
  compare: "Compare runs",
  sweeps: "Sweeps",
  quotas: "Quotas",
  storage: "Storage",
};

/** `kindLabel` names a kind for people (lib/kinds.ts, from the server); its name by default. */
export function titleFor(pathname: string, kindLabel: (kind: string) => string = (kind) => kind): string {
  const parts = pathname.split("/").filter(Boolean).map((p) => decodeURIComponent(p));
  let page = "Page not found";
  if (parts.length === 0) page = "Home";
  else if (parts[0] === "signin") return "Sign in · Cairn";
  else if (parts[0] === "cluster") page = "Cluster";
  else if (parts[0] === "tokens") page = "API tokens";
  else if (parts[0] === "projects" && parts[1]) {
    const [, project, section, ...rest] = parts;
    if (!section) page = "Workloads";
    else if (section === "workloads" && rest[0] === "new") page = "Submit work";
    else if (section === "workloads" && rest.length === 2) {
      page = `${kindLabel(rest[0])} ${rest[1]}`;
    } else if (section === "sweeps" && rest[0] === "new") page = "New sweep";
    else if (section === "sweeps" && rest.length === 1) page = `Sweep ${rest[0]}`;
    else page = PROJECT_PAGES[section] ?? page;
    return `${page} · ${project} · Cairn`;
  }
  return `${page} · Cairn`;
}
