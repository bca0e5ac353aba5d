// Server-provided settings: templates/index.html renders them with `json_script`.
// The defaults match Django's URLs, so `npm run dev` works without the template.

export interface Config {
  apiRoot: string;
  loginUrl: string;
  logoutUrl: string;
  adminUrl: string;
  apiDocsUrl: string;
}

const defaults: Config = {
  apiRoot: "/api/v1/",
  loginUrl: "/admin/login/?next=/",
  logoutUrl: "/admin/logout/",
  adminUrl: "/admin/",
  apiDocsUrl: "/api/docs/",
};

function read(): Config {
  const element = document.getElementById("cairn-config");
  if (!element?.textContent) return defaults;
  try {
    return { ...defaults, ...(JSON.parse(element.textContent) as Partial<Config>) };
  } catch {
    return defaults;
  }
}

export const config: Config = read();
