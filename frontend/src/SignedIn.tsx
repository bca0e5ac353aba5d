// The signed-in dashboard's routes (loaded after the sign-in page, see App.tsx). Every page needs
// a session; project pages share one live socket. Each page is a chunk of its own (React.lazy):
// uPlot comes only with the pages that draw charts.
import { lazy, Suspense } from "react";
import { Navigate, Outlet, Route, Routes, useLocation, useParams } from "react-router";
import { Layout } from "./components/Layout";
import { EmptyState, ErrorState, Loading } from "./components/States";
import { LiveProvider } from "./live/LiveProvider";
import { defaultProject, isSignedOut, MeProvider, useMe, useMeQuery } from "./session";

const ClusterPage = lazy(() => import("./pages/Cluster").then((m) => ({ default: m.ClusterPage })));
const ComparePage = lazy(() => import("./pages/Compare").then((m) => ({ default: m.ComparePage })));
const QuotasPage = lazy(() => import("./pages/Quotas").then((m) => ({ default: m.QuotasPage })));
const DeploymentsPage = lazy(() => import("./pages/Workloads").then((m) => ({ default: m.DeploymentsPage })));
const NotebooksPage = lazy(() => import("./pages/Workloads").then((m) => ({ default: m.NotebooksPage })));
const OverviewPage = lazy(() => import("./pages/Overview").then((m) => ({ default: m.OverviewPage })));
const RunsPage = lazy(() => import("./pages/Runs").then((m) => ({ default: m.RunsPage })));
const StoragePage = lazy(() => import("./pages/Storage").then((m) => ({ default: m.StoragePage })));
const SubmitPage = lazy(() => import("./pages/Submit").then((m) => ({ default: m.SubmitPage })));
const SweepDetailPage = lazy(() => import("./pages/SweepDetail").then((m) => ({ default: m.SweepDetailPage })));
const SweepNewPage = lazy(() => import("./pages/SweepNew").then((m) => ({ default: m.SweepNewPage })));
const SweepsPage = lazy(() => import("./pages/Sweeps").then((m) => ({ default: m.SweepsPage })));
const TokensPage = lazy(() => import("./pages/Tokens").then((m) => ({ default: m.TokensPage })));
const WorkloadDetailPage = lazy(() => import("./pages/WorkloadDetail").then((m) => ({ default: m.WorkloadDetailPage })));
const WorkloadsPage = lazy(() => import("./pages/Workloads").then((m) => ({ default: m.WorkloadsPage })));

/** A page's chunk loading: the frame stays, the content area says so. */
function Page() {
  return (
    <Suspense fallback={<Loading label="Loading the page…" />}>
      <Outlet />
    </Suspense>
  );
}

function RequireSession() {
  const query = useMeQuery();
  const location = useLocation();
  if (query.isPending) return <Loading label="Signing in…" />;
  if (query.error) {
    if (isSignedOut(query.error)) {
      const next = encodeURIComponent(location.pathname + location.search);
      return <Navigate to={`/signin?next=${next}`} replace />;
    }
    return <ErrorState error={query.error} onRetry={() => query.refetch()} />;
  }
  return (
    <MeProvider me={query.data}>
      <Outlet />
    </MeProvider>
  );
}

function Home() {
  const me = useMe();
  const slug = defaultProject(me);
  if (!slug) {
    return (
      <EmptyState page title="You are not in any project yet">
        Ask a project owner or your administrator to add you to a project; it will appear here.
      </EmptyState>
    );
  }
  return <Navigate to={`/projects/${slug}/workloads`} replace />;
}

/** Project pages: only the caller's projects; one websocket for the page. */
function ProjectScope() {
  const me = useMe();
  const { project = "" } = useParams();
  if (!me.projects.some((p) => p.slug === project)) {
    return (
      <EmptyState page title="Project not found">
        There is no project “{project}”, or you are not a member of it. Pick one of yours in the project switcher.
      </EmptyState>
    );
  }
  return (
    <LiveProvider project={project}>
      <Outlet />
    </LiveProvider>
  );
}

/** Pages outside a project still get a socket, through the caller's default project. */
function GlobalLive() {
  const me = useMe();
  const slug = defaultProject(me);
  return slug ? (
    <LiveProvider project={slug}>
      <Outlet />
    </LiveProvider>
  ) : (
    <Outlet />
  );
}

export function SignedInApp() {
  return (
    <Routes>
      <Route element={<RequireSession />}>
        <Route element={<Layout />}>
         <Route element={<Page />}>
          <Route index element={<Home />} />
          <Route path="projects/:project" element={<ProjectScope />}>
            <Route index element={<Navigate to="workloads" replace />} />
            <Route path="workloads" element={<WorkloadsPage />} />
            <Route path="workloads/new" element={<SubmitPage />} />
            <Route path="workloads/:kind/:id" element={<WorkloadDetailPage />} />
            <Route path="overview" element={<OverviewPage />} />
            <Route path="notebooks" element={<NotebooksPage />} />
            <Route path="deployments" element={<DeploymentsPage />} />
            <Route path="runs" element={<RunsPage />} />
            <Route path="compare" element={<ComparePage />} />
            <Route path="sweeps" element={<SweepsPage />} />
            <Route path="sweeps/new" element={<SweepNewPage />} />
            <Route path="sweeps/:id" element={<SweepDetailPage />} />
            <Route path="quotas" element={<QuotasPage />} />
            <Route path="storage" element={<StoragePage />} />
          </Route>
          <Route element={<GlobalLive />}>
            <Route path="cluster" element={<ClusterPage />} />
            <Route path="tokens" element={<TokensPage />} />
          </Route>
          <Route path="*" element={<EmptyState page title="Page not found">Use the navigation on the left.</EmptyState>} />
         </Route>
        </Route>
      </Route>
    </Routes>
  );
}
