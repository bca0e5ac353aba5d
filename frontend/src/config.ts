// Settings Django renders into the page (templates/index.html, `cairn-config`).
export interface CairnConfig {
  apiRoot: string;
  adminUrl: string;
  apiDocsUrl: string;
}

const DEFAULTS: CairnConfig = { apiRoot: "/api/v1/", adminUrl: "/admin/", apiDocsUrl: "/api/docs/" };

export function readConfig(doc: Document = document): CairnConfig {
  const node = doc.getElementById("cairn-config");
  if (!node?.textContent) return DEFAULTS;
  try {
    return { ...DEFAULTS, ...(JSON.parse(node.textContent) as Partial<CairnConfig>) };
  } catch {
    return DEFAULTS;
  }
}

export const config = readConfig();
