// The light/dark switch, in the header and on the sign-in page (its own module: the sign-in page
// loads without the frame's code). A native title, not a Mantine Tooltip: the tooltip's
// positioning library (floating-ui) would be the sign-in page's largest dependency.
import { ActionIcon, useMantineColorScheme } from "@mantine/core";

export function ThemeToggle() {
  const { colorScheme, setColorScheme } = useMantineColorScheme();
  const dark = colorScheme === "dark";
  const label = dark ? "Switch to the light theme" : "Switch to the dark theme";
  return (
    <ActionIcon
      variant="default"
      aria-label={label}
      title={label}
      data-testid="theme-toggle"
      onClick={() => setColorScheme(dark ? "light" : "dark")}
    >
      <span aria-hidden="true">{dark ? "☀" : "☾"}</span>
    </ActionIcon>
  );
}
