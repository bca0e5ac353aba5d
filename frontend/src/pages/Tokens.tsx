// Placeholder: being built (see frontend/README in CONTRIBUTING.md).
import { Title } from "@mantine/core";

export function TokensPage() {
  return <Title order={2}>API tokens</Title>;
}
