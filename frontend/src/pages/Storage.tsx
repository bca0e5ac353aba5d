// The project's storage: volumes (create, usage against the quota, delete), datasets (every
// version, where each is cached) and models (versions with the run that produced each).
import { Anchor, Button, Card, Group, NumberInput, Stack, Table, Text, TextInput, Title, VisuallyHidden } from "@mantine/core";
import { notifications } from "@mantine/notifications";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { Link, useParams } from "react-router";
import { api, ApiError, unwrap } from "../api/client";
import { EmptyState, ErrorState, errorAdvice, Loading } from "../components/States";
import { formatBytes } from "../lib/bytes";
import { formatRelative } from "../lib/format";
import { retryTransient } from "../lib/retry";

function CreateVolume({ project }: { project: string }) {
  const queryClient = useQueryClient();
  const [name, setName] = useState("");
  const [size, setSize] = useState<number | string>(10);
  const [error, setError] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST("/api/v1/projects/{project}/volumes/", {
        params: { path: { project } },
        body: { name, size_gb: Number(size), description: "" },
      })),
    onSuccess: () => {
      setName("");
      setError(null);
      void queryClient.invalidateQueries({ queryKey: ["volumes", project] });
    },
    onError: (e) => setError(e instanceof ApiError ? e.detail : errorAdvice(e).detail),
  });
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate();
  };
  return (
    <Card withBorder padding="md" component="form" onSubmit={submit} noValidate data-testid="volume-create-form">
      <Group align="flex-end" gap="sm">
        <TextInput label="Name" placeholder="images" value={name} onChange={(e) => setName(e.currentTarget.value)}
          w={220} data-testid="volume-name" />
        <NumberInput label="Size (GiB)" min={1} value={size} onChange={setSize} w={140} data-testid="volume-size" />
        <Button type="submit" loading={create.isPending} data-testid="volume-create">Create volume</Button>
      </Group>
      {error && <Text c="red" size="sm" mt="xs" data-testid="volume-error">{error}</Text>}
    </Card>
  );
}

function ModelVersions({ project, name }: { project: string; name: string }) {
  const detail = useQuery({
    queryKey: ["models", project, name],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/models/{name}/", { params: { path: { project, name } } })),
    retry: retryTransient,
  });
  if (detail.isPending) return <Loading />;
  if (detail.isError) return <ErrorState error={detail.error} onRetry={() => void detail.refetch()} />;
  return (
    <Table data-testid="model-versions">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Version</Table.Th>
          <Table.Th>Produced by</Table.Th>
          <Table.Th>Metrics (last)</Table.Th>
          <Table.Th>Params</Table.Th>
          <Table.Th>Size</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {detail.data.versions.map((v) => (
          <Table.Tr key={v.id}>
            <Table.Td><code>{v.ref}</code></Table.Td>
            <Table.Td>
              {v.run ? (
                <Anchor component={Link} to={`/projects/${project}/compare?runs=${v.run}`} size="sm">run {v.run}</Anchor>
              ) : "—"}
            </Table.Td>
            <Table.Td>
              {Object.entries((v.metrics ?? {}) as Record<string, { last?: number }>)
                .map(([k, m]) => `${k}=${m.last ?? "?"}`)
                .join(", ") || "—"}
            </Table.Td>
            <Table.Td>
              {Object.entries((v.params ?? {}) as Record<string, unknown>).map(([k, p]) => `${k}=${String(p)}`).join(", ") || "—"}
            </Table.Td>
            <Table.Td>{formatBytes(v.total_bytes)}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

type DatasetVersionRow = { id: number; version: number; files: number; total_bytes: number; cached_on: string[];
  created_at: string };

function DatasetVersions({ name, versions }: { name: string; versions: DatasetVersionRow[] }) {
  return (
    <Table data-testid="dataset-versions" data-dataset={name}>
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Version of {name}</Table.Th>
          <Table.Th>Files</Table.Th>
          <Table.Th>Size</Table.Th>
          <Table.Th>Taken</Table.Th>
          <Table.Th>Cached on</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {versions.map((v) => (
          <Table.Tr key={v.id} data-testid="dataset-version-row">
            <Table.Td><code>{name}@{v.version}</code></Table.Td>
            <Table.Td>{v.files}</Table.Td>
            <Table.Td>{formatBytes(v.total_bytes)}</Table.Td>
            <Table.Td>{formatRelative(v.created_at)}</Table.Td>
            <Table.Td>{v.cached_on.length ? v.cached_on.join(", ") : "—"}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

function Datasets({ project }: { project: string }) {
  const [open, setOpen] = useState<string | null>(null);
  const datasets = useQuery({
    queryKey: ["datasets", project],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/datasets/", { params: { path: { project } } })),
    retry: retryTransient,
  });
  if (datasets.isPending) return <Loading />;
  if (datasets.isError) return <ErrorState error={datasets.error} onRetry={() => void datasets.refetch()} />;
  if (datasets.data.results.length === 0) {
    return (
      <EmptyState title="No datasets yet">
        Register one with <code>cairn dataset register NAME --s3 s3://bucket/prefix</code>; workloads mount it with{" "}
        <code>datasets: [{"{"}name: NAME{"}"}]</code>.
      </EmptyState>
    );
  }
  const shown = datasets.data.results.find((d) => d.name === open);
  return (
    <Stack gap="sm">
      <Table data-testid="datasets-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Dataset</Table.Th>
            <Table.Th>Source</Table.Th>
            <Table.Th>Versions</Table.Th>
            <Table.Th>Files</Table.Th>
            <Table.Th>Size</Table.Th>
            <Table.Th>Cached on</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {datasets.data.results.map((d) => {
            const latest = d.versions[0];
            return (
              <Table.Tr key={d.id} data-testid="dataset-row">
                <Table.Td>
                  <Anchor component="button" onClick={() => setOpen(open === d.name ? null : d.name)}>{d.name}</Anchor>
                </Table.Td>
                <Table.Td>{d.source}</Table.Td>
                <Table.Td>{latest ? `${d.versions.length} (latest @${latest.version})` : "—"}</Table.Td>
                <Table.Td>{latest?.files ?? "—"}</Table.Td>
                <Table.Td>{formatBytes(latest?.total_bytes)}</Table.Td>
                <Table.Td>{latest?.cached_on.length ? latest.cached_on.join(", ") : "—"}</Table.Td>
              </Table.Tr>
            );
          })}
        </Table.Tbody>
      </Table>
      {shown && <DatasetVersions name={shown.name} versions={shown.versions as DatasetVersionRow[]} />}
    </Stack>
  );
}

function Models({ project }: { project: string }) {
  const [open, setOpen] = useState<string | null>(null);
  const models = useQuery({
    queryKey: ["models", project],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/models/", { params: { path: { project } } })),
    retry: retryTransient,
  });
  if (models.isPending) return <Loading />;
  if (models.isError) return <ErrorState error={models.error} onRetry={() => void models.refetch()} />;
  if (models.data.results.length === 0) {
    return (
      <EmptyState title="No models yet">
        Register one from a job with <code>cairn.register_model(name, path)</code>; deployments serve it with{" "}
        <code>model: name@version</code>.
      </EmptyState>
    );
  }
  return (
    <Stack gap="sm">
      <Table data-testid="models-table">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Model</Table.Th>
            <Table.Th>Latest</Table.Th>
            <Table.Th>Versions</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {models.data.results.map((m) => (
            <Table.Tr key={m.id} data-testid="model-row">
              <Table.Td>
                <Anchor component="button" onClick={() => setOpen(open === m.name ? null : m.name)}>{m.name}</Anchor>
              </Table.Td>
              <Table.Td>{m.latest ? `@${m.latest}` : "—"}</Table.Td>
              <Table.Td>{m.versions}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
      {open && <ModelVersions project={project} name={open} />}
    </Stack>
  );
}

export function StoragePage() {
  const { project = "" } = useParams();
  const queryClient = useQueryClient();
  const volumes = useQuery({
    queryKey: ["volumes", project],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/volumes/", { params: { path: { project } } })),
    retry: retryTransient,
  });
  const usage = useQuery({
    queryKey: ["volumes", project, "usage"],
    queryFn: () => unwrap(api.GET("/api/v1/projects/{project}/volumes/usage/", { params: { path: { project } } })),
    retry: retryTransient,
  });
  const remove = useMutation({
    mutationFn: (name: string) =>
      unwrap(api.DELETE("/api/v1/projects/{project}/volumes/{name}/", { params: { path: { project, name } } })),
    onSuccess: () => void queryClient.invalidateQueries({ queryKey: ["volumes", project] }),
    onError: (e) => notifications.show({ color: "red", title: "Not deleted", message: errorAdvice(e).detail }),
  });

  return (
    <Stack gap="md">
      <Title order={1} size="h2">Storage</Title>
      <Text c="dimmed" size="sm">
        Volumes are shared folders of the project. A workload mounts one with{" "}
        <code>volumes: [{"{"}name: images{"}"}]</code> at <code>/data/&lt;name&gt;</code> (or a path it gives),
        read-write or read-only.
      </Text>
      {usage.data && (
        <Text size="sm" data-testid="storage-usage">
          {usage.data.declared_gb} of {usage.data.quota_gb} GiB declared · {formatBytes(usage.data.used_bytes)} used
        </Text>
      )}
      <CreateVolume project={project} />
      {volumes.isPending ? (
        <Loading />
      ) : volumes.isError ? (
        <ErrorState error={volumes.error} onRetry={() => void volumes.refetch()} />
      ) : volumes.data.length === 0 ? (
        <EmptyState title="No volumes yet">Create one above, then mount it from a workload spec.</EmptyState>
      ) : (
        <Table data-testid="volumes-table">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Name</Table.Th>
              <Table.Th>Size</Table.Th>
              <Table.Th>Used</Table.Th>
              <Table.Th>Default mount</Table.Th>
              <Table.Th>
                <VisuallyHidden>Actions</VisuallyHidden>
              </Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {volumes.data.map((v) => (
              <Table.Tr key={v.id} data-testid="volume-row">
                <Table.Td>{v.name}</Table.Td>
                <Table.Td>{v.size_gb} GiB</Table.Td>
                <Table.Td>{formatBytes(v.used_bytes)}</Table.Td>
                <Table.Td><code>{v.default_mount}</code></Table.Td>
                <Table.Td>
                  <Button size="xs" variant="subtle" color="red" loading={remove.isPending && remove.variables === v.name}
                    onClick={() => {
                      // Its files go with it: ask first.
                      if (window.confirm(`Delete volume ${v.name} and all its files?`)) remove.mutate(v.name);
                    }}>
                    Delete
                  </Button>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
      <Title order={2} size="h3">Datasets</Title>
      <Datasets project={project} />
      <Title order={2} size="h3">Models</Title>
      <Models project={project} />
    </Stack>
  );
}
