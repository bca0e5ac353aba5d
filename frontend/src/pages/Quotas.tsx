// Placeholder: being built (see frontend/README in CONTRIBUTING.md).
import { Title } from "@mantine/core";

export function QuotasPage() {
  return <Title order={2}>Quotas</Title>;
}
