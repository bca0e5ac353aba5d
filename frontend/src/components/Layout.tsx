// The frame of every signed-in page: header (project switcher, theme, user menu) and navigation.
import {
  ActionIcon, AppShell, Anchor, Group, Menu, NavLink, Select, Text, Title, Tooltip, useMantineColorScheme,
} from "@mantine/core";
import { useQueryClient } from "@tanstack/react-query";
import { Link, Outlet, useLocation, useNavigate, useParams } from "react-router";
import { config } from "../config";
import { defaultProject, ME_KEY, rememberProject, signOut, useMe } from "../session";

const PROJECT_PAGES = [
  { path: "workloads", label: "Workloads" },
  { path: "runs", label: "Runs & comparison" },
  { path: "sweeps", label: "Sweeps" },
  { path: "quotas", label: "Quotas" },
  { path: "storage", label: "Storage" },
] as const;

export function ThemeToggle() {
  const { colorScheme, setColorScheme } = useMantineColorScheme();
  const dark = colorScheme === "dark";
  return (
    <Tooltip label={dark ? "Light theme" : "Dark theme"}>
      <ActionIcon
        variant="default"
        aria-label="Toggle colour theme"
        data-testid="theme-toggle"
        onClick={() => setColorScheme(dark ? "light" : "dark")}
      >
        {dark ? "☀" : "☾"}
      </ActionIcon>
    </Tooltip>
  );
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
    <AppShell header={{ height: 52 }} navbar={{ width: 200, breakpoint: "sm" }} padding="md">
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group gap="md" wrap="nowrap">
            <Anchor component={Link} to="/" underline="never">
              <Title order={3}>Cairn</Title>
            </Anchor>
            <Select
              aria-label="Project"
              data-testid="project-switcher"
              placeholder={me.projects.length ? "Choose a project" : "No projects yet"}
              data={me.projects.map((p) => ({ value: p.slug, label: `${p.name} (${p.role})` }))}
              value={project ?? null}
              onChange={switchProject}
              searchable
              w={260}
              allowDeselect={false}
              nothingFoundMessage="No such project"
            />
          </Group>
          <Group gap="sm" wrap="nowrap">
            <ThemeToggle />
            <Menu position="bottom-end">
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
                <Menu.Item color="red" onClick={onSignOut} data-testid="sign-out">Sign out</Menu.Item>
              </Menu.Dropdown>
            </Menu>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs">
        {project &&
          PROJECT_PAGES.map((page) => (
            <NavLink
              key={page.path}
              component={Link}
              to={`/projects/${project}/${page.path}`}
              label={page.label}
              active={location.pathname.startsWith(`/projects/${project}/${page.path}`)}
            />
          ))}
        <NavLink component={Link} to="/cluster" label="Cluster" active={location.pathname.startsWith("/cluster")} />
        <NavLink component={Link} to="/tokens" label="API tokens" active={location.pathname.startsWith("/tokens")} />
      </AppShell.Navbar>
      <AppShell.Main>
        <Outlet />
      </AppShell.Main>
    </AppShell>
  );
}
