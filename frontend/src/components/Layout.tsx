// The frame of every signed-in page: header (project switcher, theme, user menu) and navigation.
import { AppShell, Anchor, Burger, Group, Menu, NavLink, Select, Text } from "@mantine/core";
import { useDisclosure, useMediaQuery } from "@mantine/hooks";
import { useQueryClient } from "@tanstack/react-query";
import { useEffect, useRef } from "react";
import { Link, Outlet, useLocation, useNavigate, useParams } from "react-router";
import { config } from "../config";
import { kindLabel, useKinds } from "../lib/kinds";
import { takeSignedIn } from "../lib/landing";
import { titleFor } from "../lib/titles";
import { defaultProject, ME_KEY, rememberProject, signOut, useMe } from "../session";
import { ThemeToggle } from "./ThemeToggle";

const PROJECT_PAGES = [
  { path: "overview", label: "Overview" },
  { path: "workloads", label: "Workloads" },
  { path: "notebooks", label: "Notebooks" },
  { path: "deployments", label: "Deployments" },
  { path: "runs", label: "Runs & comparison" },
  { path: "sweeps", label: "Sweeps" },
  { path: "quotas", label: "Quotas" },
  { path: "storage", label: "Storage" },
] as const;

const MAIN_ID = "main-content";
const NAV_ID = "main-navigation";

/** Focus the page's main heading (made focusable for it), else the main region itself. Pages load
 * on demand, so the heading is looked for until it appears (up to 3 s). */
function focusMainHeading(main: HTMLElement | null): () => void {
  let tries = 0;
  let timer: number | undefined;
  const attempt = () => {
    if (!main) return;
    const heading = main.querySelector<HTMLElement>("h1");
    if (heading || tries >= 30) {
      const target = heading ?? main;
      if (!target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
      target.focus({ preventScroll: false });
      return;
    }
    tries += 1;
    timer = window.setTimeout(attempt, 100);
  };
  attempt();
  return () => window.clearTimeout(timer);
}

/** With nothing focused, make the next Tab go to the first control of the page (the skip link)
 * rather than to whatever followed an element that was removed. */
function restartTabAtTop() {
  const active = document.activeElement;
  if (active && active !== document.body) return;
  const body = document.body;
  const had = body.getAttribute("tabindex");
  body.setAttribute("tabindex", "-1");
  body.focus({ preventScroll: true });
  body.blur();
  if (had === null) body.removeAttribute("tabindex");
  else body.setAttribute("tabindex", had);
}

/** A route's title, and focus moved to its heading when the route changes (not on first load:
 * there the skip link is the first stop of Tab). */
function useRouteAnnouncement(main: React.RefObject<HTMLElement | null>) {
  const { pathname } = useLocation();
  const first = useRef(true);
  const kinds = useKinds(); // a workload page's title names its kind ("Training job 42")
  useEffect(() => {
    document.title = titleFor(pathname, (kind) => kindLabel(kinds, kind));
  }, [pathname, kinds]);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      // Signed in just now: focus goes to the page's heading, as on any navigation. On a page
      // load, Tab starts at the top (the skip link), not after some element that has gone.
      if (takeSignedIn()) return focusMainHeading(main.current);
      restartTabAtTop();
      return undefined;
    }
    return focusMainHeading(main.current);
  }, [pathname, main]);
}

export function Layout() {
  const me = useMe();
  const { project: routeProject } = useParams();
  // Pages outside a project (cluster, tokens) keep the last project in the switcher and nav.
  const project = routeProject ?? defaultProject(me) ?? undefined;
  const location = useLocation();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  if (routeProject) rememberProject(routeProject);
  const main = useRef<HTMLElement>(null);
  useRouteAnnouncement(main);
  // Below the "sm" breakpoint the navigation is collapsed behind a menu button (item 18).
  const [navOpened, nav] = useDisclosure(false);
  const closeNav = nav.close;
  useEffect(() => closeNav(), [location.pathname, closeNav]);
  // Collapsed off-screen, the navigation must take no Tab stop and be out of the accessibility
  // tree (inert) until the menu button opens it; Escape closes it and gives focus back.
  const wide = useMediaQuery("(min-width: 48em)", true, { getInitialValueInEffect: false });
  const navHidden = !wide && !navOpened;
  const burger = useRef<HTMLButtonElement>(null);
  const onNavKeyDown = (event: React.KeyboardEvent) => {
    if (event.key === "Escape" && !wide && navOpened) {
      closeNav();
      burger.current?.focus();
    }
  };

  const switchProject = (slug: string | null) => {
    if (!slug || slug === routeProject) return;
    const section = location.pathname.split("/")[3] ?? "workloads";
    const keep = PROJECT_PAGES.some((p) => p.path === section) ? section : "workloads";
    navigate(`/projects/${slug}/${keep}`);
  };

  const onSignOut = async () => {
    try {
      await signOut();
    } finally {
      queryClient.clear();
      await queryClient.invalidateQueries({ queryKey: ME_KEY });
      navigate("/signin");
    }
  };

  return (
    <AppShell
      header={{ height: 52 }}
      navbar={{ width: 200, breakpoint: "sm", collapsed: { mobile: !navOpened } }}
      padding="md"
    >
      <a
        className="skip-link"
        href={`#${MAIN_ID}`}
        data-testid="skip-link"
        onClick={(event) => {
          event.preventDefault();
          focusMainHeading(main.current);
        }}
      >
        Skip to content
      </a>
      <AppShell.Header>
        <Group h="100%" px={{ base: "xs", sm: "md" }} justify="space-between" wrap="nowrap" gap="xs">
          <Group gap="xs" wrap="nowrap">
            <Burger
              ref={burger}
              opened={navOpened}
              onClick={nav.toggle}
              hiddenFrom="sm"
              size="sm"
              aria-label="Navigation menu"
              aria-expanded={navOpened}
              aria-controls={NAV_ID}
              data-testid="nav-toggle"
            />
            <Anchor component={Link} to="/" underline="never">
              <Text component="span" fw={700} fz="h3">Cairn</Text>
            </Anchor>
            <Select
              aria-label="Project"
              data-testid="project-switcher"
              placeholder={me.projects.length ? "Choose a project" : "No projects yet"}
              data={me.projects.map((p) => ({ value: p.slug, label: `${p.name} (${p.role})` }))}
              value={project ?? null}
              onChange={switchProject}
              searchable
              w={{ base: 130, sm: 260 }}
              allowDeselect={false}
              nothingFoundMessage="No such project"
            />
          </Group>
          <Group gap="xs" wrap="nowrap">
            <ThemeToggle />
            {/* no focus placeholder in the menu: a presentational element with a tabindex (axe) */}
            <Menu position="bottom-end" withInitialFocusPlaceholder={false}>
              <Menu.Target>
                <Anchor component="button" data-testid="user-menu">
                  <Text size="sm">{me.username}</Text>
                </Anchor>
              </Menu.Target>
              <Menu.Dropdown>
                <Menu.Item component={Link} to="/tokens">API tokens</Menu.Item>
                <Menu.Item component="a" href={config.apiDocsUrl}>API reference</Menu.Item>
                {me.is_staff && <Menu.Item component="a" href={config.adminUrl}>Admin</Menu.Item>}
                <Menu.Divider />
                <Menu.Item color="var(--mantine-color-red-text)" onClick={onSignOut} data-testid="sign-out">Sign out</Menu.Item>
              </Menu.Dropdown>
            </Menu>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar
        p="xs"
        component="nav"
        aria-label="Main"
        id={NAV_ID}
        inert={navHidden}
        data-hidden={navHidden || undefined}
        onKeyDown={onNavKeyDown}
      >
        {project &&
          PROJECT_PAGES.map((page) => {
            const active = location.pathname.startsWith(`/projects/${project}/${page.path}`);
            return (
              <NavLink
                key={page.path}
                component={Link}
                to={`/projects/${project}/${page.path}`}
                label={page.label}
                active={active}
                aria-current={active ? "page" : undefined}
              />
            );
          })}
        {(["cluster", "tokens"] as const).map((path) => {
          const active = location.pathname.startsWith(`/${path}`);
          return (
            <NavLink
              key={path}
              component={Link}
              to={`/${path}`}
              label={path === "cluster" ? "Cluster" : "API tokens"}
              active={active}
              aria-current={active ? "page" : undefined}
            />
          );
        })}
      </AppShell.Navbar>
      <AppShell.Main id={MAIN_ID} ref={main}>
        <Outlet />
      </AppShell.Main>
    </AppShell>
  );
}
