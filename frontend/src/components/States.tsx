// Empty, error and loading states that tell the user what to do next.
import { Alert, Button, Center, Group, Loader, Stack, Text, Title } from "@mantine/core";
import type { ReactNode } from "react";
import { ApiError } from "../api/client";

export function Loading({ label = "Loading…" }: { label?: string }) {
  return (
    <Center py="xl" data-testid="loading">
      <Group gap="sm">
        <Loader size="sm" />
        <Text c="dimmed">{label}</Text>
      </Group>
    </Center>
  );
}

/** `page`: the state is the whole page (not found, no project), so its title is the page's h1;
 * otherwise it is an h3, under the h2 of the section it is in. */
export function EmptyState({ title, children, action, page = false }: { title: string; children?: ReactNode; action?: ReactNode; page?: boolean }) {
  return (
    <Center py="xl" data-testid="empty-state">
      <Stack align="center" gap="xs" maw={520}>
        <Title order={page ? 1 : 3} size={page ? "h3" : "h4"}>{title}</Title>
        {children && (
          <Text c="dimmed" ta="center">
            {children}
          </Text>
        )}
        {action}
      </Stack>
    </Center>
  );
}

/** What went wrong and what to try, from an ApiError's status and detail. */
export function errorAdvice(error: unknown): { title: string; detail: string } {
  if (error instanceof ApiError) {
    if (error.status === 0) return { title: "Cairn is not reachable", detail: "Check your connection or that the server is running, then retry." };
    if (error.status === 401) return { title: "You are signed out", detail: "Sign in again to continue." };
    if (error.status === 403) return { title: "Not allowed", detail: `${error.detail} Ask a project maintainer for a higher role.` };
    if (error.status === 404) return { title: "Not found", detail: `${error.detail} It may have been deleted, or you are not a member of its project.` };
    if (error.status === 429) return { title: "Too many requests", detail: `${error.detail} Wait a moment and retry.` };
    if (error.status >= 500) return { title: "Cairn had a problem", detail: "The server failed to answer. Retry; if it keeps failing, tell your administrator." };
    return { title: "Request refused", detail: error.detail };
  }
  return { title: "Something went wrong", detail: error instanceof Error ? error.message : String(error) };
}

export function ErrorState({ error, onRetry }: { error: unknown; onRetry?: () => void }) {
  const { title, detail } = errorAdvice(error);
  return (
    <Alert color="red" title={title} data-testid="error-state" my="md">
      <Stack gap="xs" align="flex-start">
        <Text size="sm">{detail}</Text>
        {onRetry && (
          <Button size="xs" variant="light" color="red" onClick={onRetry}>
            Retry
          </Button>
        )}
      </Stack>
    </Alert>
  );
}
