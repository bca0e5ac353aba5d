// A usage bar with an accessible name and value: one progressbar (the whole use, named and
// described in words) over its coloured sections (within the quota, borrowed beyond it), which
// are drawing only. Mantine's Progress makes every section a progressbar of its own, unnamed.
import { Progress, type MantineSize } from "@mantine/core";

export interface UsageSection {
  /** percent of the bar */
  value: number;
  color: string;
  striped?: boolean;
}

export interface UsageProgressProps {
  /** what the bar measures, e.g. "GPUs used in pool local" */
  label: string;
  /** the value in words, e.g. "3 of 8 GPUs (1 borrowed)" */
  valueText: string;
  sections: UsageSection[];
  size?: MantineSize;
  testId?: string;
}

export function UsageProgress({ label, valueText, sections, size = "sm", testId }: UsageProgressProps) {
  const total = Math.min(100, Math.max(0, sections.reduce((sum, s) => sum + s.value, 0)));
  return (
    <Progress.Root
      size={size}
      role="progressbar"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={Math.round(total)}
      aria-valuetext={valueText}
      data-testid={testId}
    >
      {sections
        .filter((s, i) => i === 0 || s.value > 0)
        .map((s, i) => (
          <Progress.Section key={i} value={s.value} color={s.color} striped={s.striped} withAria={false} />
        ))}
    </Progress.Root>
  );
}
