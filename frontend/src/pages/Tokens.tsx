// Personal API tokens: list, create (the secret is shown once), revoke.
import {
  ActionIcon, Alert, Badge, Button, Card, Code, CopyButton, Group, Input, Modal, SegmentedControl, Select, Stack, Table,
  Text, TextInput, Title, Tooltip, VisuallyHidden,
} from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { api, ApiError, unwrap, type Schemas } from "../api/client";
import { useNow } from "../components/hooks";
import { EmptyState, ErrorState, errorAdvice, Loading } from "../components/States";
import { formatRelative } from "../lib/format";
import { retryTransient } from "../lib/retry";
import { formatAgo } from "../lib/time";
import {
  buildTokenBody, EXPIRY_OPTIONS, TOKEN_STATE_COLOUR, tokenState, type ExpiryChoice, type ScopeChoice, type TokenCreateBody, type TokenForm,
} from "../lib/tokens";

type Token = Schemas["ApiToken"];
type Created = Schemas["ApiTokenCreated"];

const TOKENS_KEY = ["tokens"] as const;

function scopesOf(token: Token): string[] {
  const raw = token.scopes as unknown;
  return Array.isArray(raw) ? raw.filter((s): s is string => typeof s === "string") : [];
}

function When({ iso, now, empty = "—", past = true }: { iso: string | null; now: number; empty?: string; past?: boolean }) {
  if (!iso) return <Text size="sm" c="dimmed">{empty}</Text>;
  return (
    <Tooltip label={new Date(iso).toLocaleString()} withArrow>
      <Text size="sm">{past ? formatAgo(iso, now) : formatRelative(iso, now)}</Text>
    </Tooltip>
  );
}

const EMPTY_FORM: TokenForm = { name: "", expiry: "server", date: "", scopes: "read,write" };

function CreateToken({ onCreated }: { onCreated: (token: Created) => void }) {
  const queryClient = useQueryClient();
  const [form, setForm] = useState<TokenForm>(EMPTY_FORM);
  const [errors, setErrors] = useState<Partial<Record<"name" | "date", string>>>({});
  const [general, setGeneral] = useState<string | null>(null);

  const create = useMutation({
    mutationFn: (body: TokenCreateBody) =>
      unwrap(api.POST("/api/v1/tokens/", { body: { never_expires: false, ...body } })),
    onSuccess: (token) => {
      setForm(EMPTY_FORM);
      void queryClient.invalidateQueries({ queryKey: TOKENS_KEY });
      onCreated(token);
    },
    onError: (error) => {
      if (error instanceof ApiError && Object.keys(error.fieldErrors).length) {
        const fe = error.fieldErrors;
        setErrors({ name: fe.name?.join(" "), date: fe.expires_at?.join(" ") });
        const rest = Object.entries(fe).filter(([k]) => k !== "name" && k !== "expires_at");
        setGeneral(rest.length ? rest.map(([k, v]) => `${k}: ${v.join(" ")}`).join(" ") : null);
      } else {
        setGeneral(errorAdvice(error).detail);
      }
    },
  });

  const submit = (event: FormEvent) => {
    event.preventDefault();
    setGeneral(null);
    const { body, errors: found } = buildTokenBody(form);
    setErrors(found);
    if (body) create.mutate(body);
  };

  return (
    <Card withBorder padding="md" component="form" onSubmit={submit} noValidate data-testid="token-create-form">
      <Stack gap="sm">
        <Title order={2} size="h4">New token</Title>
        <Group align="flex-start" gap="sm" wrap="wrap">
          <TextInput
            label="Name"
            name="name"
            placeholder="laptop, ci-runner…"
            value={form.name}
            onChange={(e) => {
              const name = e.currentTarget.value;
              setForm((f) => ({ ...f, name }));
              setErrors((er) => ({ ...er, name: undefined }));
            }}
            error={errors.name}
            w={260}
            data-testid="token-name"
          />
          <Select
            label="Expires"
            name="expiry"
            data={EXPIRY_OPTIONS}
            value={form.expiry}
            onChange={(value) => setForm((f) => ({ ...f, expiry: (value as ExpiryChoice | null) ?? "server" }))}
            allowDeselect={false}
            w={200}
            data-testid="token-expiry"
          />
          {form.expiry === "date" && (
            <TextInput
              label="Expiry date"
              type="date"
              value={form.date}
              onChange={(e) => {
                const date = e.currentTarget.value;
                setForm((f) => ({ ...f, date }));
                setErrors((er) => ({ ...er, date: undefined }));
              }}
              error={errors.date}
              w={180}
            />
          )}
          <Stack gap={4}>
            <Input.Label>Access</Input.Label>
            <SegmentedControl
              data={[
                { value: "read,write", label: "Read & write" },
                { value: "read", label: "Read only" },
              ]}
              value={form.scopes}
              onChange={(value) => setForm((f) => ({ ...f, scopes: value as ScopeChoice }))}
            />
          </Stack>
        </Group>
        {form.expiry === "never" && (
          <Text size="sm" c="orange">
            A token that never expires works until you revoke it. Prefer an expiry for tokens on shared machines.
          </Text>
        )}
        {errors.date && form.expiry !== "date" && <Text size="sm" c="red">{errors.date}</Text>}
        {general && (
          <Alert color="red" data-testid="token-create-error">
            {general}
          </Alert>
        )}
        <Group>
          <Button type="submit" loading={create.isPending} data-testid="token-create">
            Create token
          </Button>
        </Group>
      </Stack>
    </Card>
  );
}

function SecretModal({ token, onClose }: { token: Created | null; onClose: () => void }) {
  return (
    <Modal
      opened={token !== null}
      onClose={onClose}
      title={<Text fw={600}>Token “{token?.name}” created</Text>}
      size="lg"
      closeOnClickOutside={false}
      data-testid="token-secret-modal"
    >
      {token && (
        <Stack gap="md">
          <Alert color="orange" title="Copy it now: it is shown only once">
            Cairn keeps only a hash of this secret. If you lose it, revoke the token and create a new one. Anyone with the
            secret can act as you, so keep it out of code and chat.
          </Alert>
          <Group gap="xs" wrap="nowrap" align="center">
            <Code block data-testid="token-secret" style={{ flex: 1, wordBreak: "break-all", whiteSpace: "pre-wrap" }}>
              {token.token}
            </Code>
            <CopyButton value={token.token}>
              {({ copied, copy }) => (
                <Button color={copied ? "teal" : undefined} onClick={copy} data-testid="token-copy" w={100}>
                  {copied ? "Copied" : "Copy"}
                </Button>
              )}
            </CopyButton>
          </Group>
          <Text size="sm" c="dimmed">
            The cairn CLI and Python SDK read it from <Code>CAIRN_TOKEN</Code>; other programs send it as the header{" "}
            <Code>Authorization: Bearer cairn_…</Code>.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose} data-testid="token-secret-close">
              I have copied it
            </Button>
          </Group>
        </Stack>
      )}
    </Modal>
  );
}

export function TokensPage() {
  const queryClient = useQueryClient();
  const now = useNow();
  const [created, setCreated] = useState<Created | null>(null);
  const [revoking, setRevoking] = useState<Token | null>(null);

  const tokens = useQuery({
    queryKey: TOKENS_KEY,
    queryFn: () => unwrap(api.GET("/api/v1/tokens/", { params: { query: { page_size: 500, ordering: "-created_at" } } })),
    retry: retryTransient,
  });

  const revoke = useMutation({
    mutationFn: (id: number) => unwrap(api.DELETE("/api/v1/tokens/{id}/", { params: { path: { id } } })),
    onSuccess: () => {
      notifications.show({ color: "green", title: "Token revoked", message: `${revoking?.name ?? "The token"} no longer works.` });
      setRevoking(null);
      void queryClient.invalidateQueries({ queryKey: TOKENS_KEY });
    },
    onError: (error) => {
      notifications.show({ color: "red", title: "Not revoked", message: errorAdvice(error).detail });
      setRevoking(null);
      void queryClient.invalidateQueries({ queryKey: TOKENS_KEY });
    },
  });

  const rows = tokens.data?.results ?? [];

  return (
    <Stack gap="md" maw={1100}>
      <Stack gap={2}>
        <Title order={1} size="h2">API tokens</Title>
        <Text c="dimmed" size="sm">
          Tokens let the cairn CLI, the Python SDK and scripts act as you. Create one per machine or program, so you can revoke
          it alone.
        </Text>
      </Stack>

      <CreateToken onCreated={setCreated} />

      {tokens.isPending ? (
        <Loading label="Loading tokens…" />
      ) : tokens.error ? (
        <ErrorState error={tokens.error} onRetry={() => tokens.refetch()} />
      ) : rows.length === 0 ? (
        <EmptyState title="No tokens yet">
          Create one above, then set <Code>CAIRN_TOKEN</Code> to its secret on the machine that will use it.
        </EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={820}>
          <Table verticalSpacing="xs" data-testid="tokens-table">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Prefix</Table.Th>
                <Table.Th>Access</Table.Th>
                <Table.Th>Created</Table.Th>
                <Table.Th>Last used</Table.Th>
                <Table.Th>Expires</Table.Th>
                <Table.Th>State</Table.Th>
                <Table.Th>
                  <VisuallyHidden>Actions</VisuallyHidden>
                </Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.map((token) => {
                const state = tokenState(token, now);
                return (
                  <Table.Tr key={token.id} data-testid="token-row" data-token-id={token.id} data-state={state}>
                    <Table.Td>
                      <Text size="sm" fw={500}>
                        {token.name}
                      </Text>
                    </Table.Td>
                    <Table.Td>
                      <Code>{token.display || token.prefix}</Code>
                    </Table.Td>
                    <Table.Td>
                      <Text size="sm">{scopesOf(token).join(", ") || "—"}</Text>
                    </Table.Td>
                    <Table.Td>
                      <When iso={token.created_at} now={now} />
                    </Table.Td>
                    <Table.Td>
                      <When iso={token.last_used_at} now={now} empty="Never" />
                    </Table.Td>
                    <Table.Td>
                      {state === "revoked" ? (
                        <Text size="sm" c="dimmed">—</Text>
                      ) : (
                        <When iso={token.expires_at} now={now} empty="Never" past={false} />
                      )}
                    </Table.Td>
                    <Table.Td>
                      <Badge color={TOKEN_STATE_COLOUR[state]} variant="light">
                        {state}
                      </Badge>
                    </Table.Td>
                    <Table.Td ta="right">
                      {state !== "revoked" && (
                        <Tooltip label="Revoke: programs using it stop working at once">
                          <ActionIcon
                            variant="subtle"
                            color="red"
                            aria-label={`Revoke ${token.name}`}
                            data-testid="token-revoke"
                            onClick={() => setRevoking(token)}
                          >
                            ✕
                          </ActionIcon>
                        </Tooltip>
                      )}
                    </Table.Td>
                  </Table.Tr>
                );
              })}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}

      <SecretModal token={created} onClose={() => setCreated(null)} />

      <Modal opened={revoking !== null} onClose={() => setRevoking(null)} title={<Text fw={600}>Revoke “{revoking?.name}”?</Text>}>
        <Stack gap="md">
          <Text size="sm">
            Scripts and machines using <Code>{revoking?.display || revoking?.prefix}</Code> will be refused from now on. This
            cannot be undone; create a new token if you need one again.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setRevoking(null)}>
              Keep it
            </Button>
            <Button
              color="red"
              loading={revoke.isPending}
              onClick={() => revoking && revoke.mutate(revoking.id)}
              data-testid="token-revoke-confirm"
            >
              Revoke token
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}
