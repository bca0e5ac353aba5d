// Placeholder: being built (see frontend/README in CONTRIBUTING.md).
import { Title } from "@mantine/core";

export function SubmitPage() {
  return <Title order={2}>Submit work</Title>;
}
