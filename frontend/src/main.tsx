import "@mantine/core/styles.css";
import "@mantine/notifications/styles.css";
import "./styles.css";

import { localStorageColorSchemeManager, MantineProvider } from "@mantine/core";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { lazy, StrictMode, Suspense } from "react";
import { createRoot } from "react-dom/client";
import { BrowserRouter } from "react-router";
import { App } from "./App";
import { cssVariablesResolver, theme } from "./theme";

// The toasts' container (and its transition library) loads after the first paint: the sign-in page
// shows none, and `notifications.show` from any page reaches it through the shared store.
const Notifications = lazy(() => import("@mantine/notifications").then((m) => ({ default: m.Notifications })));

const queryClient = new QueryClient({
  defaultOptions: { queries: { staleTime: 5_000, refetchOnWindowFocus: false } },
});

const colorSchemeManager = localStorageColorSchemeManager({ key: "cairn.colorScheme" });

createRoot(document.getElementById("app")!).render(
  <StrictMode>
    <MantineProvider theme={theme} cssVariablesResolver={cssVariablesResolver} defaultColorScheme="auto" colorSchemeManager={colorSchemeManager}>
      <Suspense fallback={null}>
        <Notifications position="top-right" />
      </Suspense>
      <QueryClientProvider client={queryClient}>
        <BrowserRouter>
          <App />
        </BrowserRouter>
      </QueryClientProvider>
    </MantineProvider>
  </StrictMode>,
);
