"""Local accelerator probes besides NVML: AMD's `rocm-smi` and Ascend's `npu-smi`.

Each runs the vendor's tool when it is on PATH (a short timeout; never raises) and parses what it
prints. The parsers are pure and tested on recorded output (tests/clusters/samples/)."""
from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
from dataclasses import dataclass

logger = logging.getLogger(__name__)
PROBE_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class AcceleratorInventory:
    type: str = "none"  # an AcceleratorType value
    count: int = 0
    model: str = ""
    memory_mb: int = 0


def parse_rocm_smi(text: str) -> AcceleratorInventory:
    """`rocm-smi --showproductname --showmeminfo vram --json` -> the GPUs (model and memory of the first).

    The tool prints one object per card ("card0", "card1", ...) with "Card series" (the product),
    "Card model" and "VRAM Total Memory (B)"."""
    data = json.loads(text)
    cards = [v for k, v in sorted(data.items()) if re.fullmatch(r"card\d+", k) and isinstance(v, dict)]
    if not cards:
        return AcceleratorInventory()
    first = cards[0]
    model = str(first.get("Card series") or first.get("Card SKU") or first.get("Card model") or "").strip()
    total = str(first.get("VRAM Total Memory (B)", "0")).strip()
    memory_mb = int(total) // (1024 * 1024) if total.isdigit() else 0
    return AcceleratorInventory(type="amd", count=len(cards), model=model[:100], memory_mb=memory_mb)


_NPU_ROW = re.compile(r"^\|\s*(\d+)\s+(\S+)\s*\|\s*(\S+)\s*\|")
_HBM = re.compile(r"(\d+)\s*/\s*(\d+)\s*\|?\s*$")


def parse_npu_smi(text: str) -> AcceleratorInventory:
    """`npu-smi info` (its table) -> the NPUs: per NPU a row "| <id> <name> | <health> | ..." then a
    row whose last column is "<used> / <total>" MiB of HBM."""
    count = 0
    model = ""
    memory_mb = 0
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = _NPU_ROW.match(line)
        if not match or match.group(2) in ("Name", "Chip"):
            continue
        count += 1
        if not model:
            model = match.group(2)
            following = lines[i + 1] if i + 1 < len(lines) else ""
            hbm = _HBM.search(following.rstrip().rstrip("|").rstrip())
            if hbm:
                memory_mb = int(hbm.group(2))
    if not count:
        return AcceleratorInventory()
    return AcceleratorInventory(type="ascend", count=count, model=model[:100], memory_mb=memory_mb)


def _run(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        logger.warning("%s could not run: %s", argv[0], exc)
        return None
    if done.returncode != 0:
        logger.warning("%s exited %s: %s", argv[0], done.returncode, done.stderr.strip()[:200])
        return None
    return done.stdout


def probe_rocm_smi() -> AcceleratorInventory:
    text = _run(["rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json"])
    try:
        return parse_rocm_smi(text) if text else AcceleratorInventory()
    except (ValueError, AttributeError) as exc:
        logger.warning("rocm-smi printed what Cairn cannot read: %s", exc)
        return AcceleratorInventory()


def probe_npu_smi() -> AcceleratorInventory:
    text = _run(["npu-smi", "info"])
    return parse_npu_smi(text) if text else AcceleratorInventory()
