// Which IDE a notebook runs, so JupyterLab and VS Code notebooks tell apart in lists and headers.
import { Badge } from "@mantine/core";
import { IDE_LABEL, notebookIde } from "../lib/notebooks";

export function IdeBadge({ workload }: { workload: { kind: string; spec?: unknown } }) {
  const ide = notebookIde(workload);
  if (!ide) return null;
  return (
    <Badge
      size="sm"
      variant="outline"
      color={ide === "vscode" ? "blue" : "orange"}
      leftSection={<span aria-hidden="true">{ide === "vscode" ? "⌨" : "◉"}</span>}
      data-testid="ide-badge"
      data-ide={ide}
    >
      {IDE_LABEL[ide]}
    </Badge>
  );
}
