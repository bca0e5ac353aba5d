"""The image builds from a clean checkout (issue 25, item 1).

There is no Docker engine on our machines (the client only: `docker info` cannot reach a
daemon), so the build itself runs only where `docker info` works. What runs everywhere: the
frontend stage's inputs are derived from the build's own configuration (package.json's build
script and the scripts it runs, tsconfig.json's include, vite.config.ts and the modules it
imports, index.html's scripts, the config files Vite and PostCSS look for) and every one must be
copied into that stage and not excluded by the Dockerfile's .dockerignore.
"""
import fnmatch
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "platform" / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / "platform" / "docker" / "Dockerfile.dockerignore"
FRONTEND = ROOT / "frontend"

# Files Vite and PostCSS load on their own when present (vite's config loading, postcss-load-config).
AUTO_LOADED = [".env", ".env.production", ".env.local", ".env.production.local", "postcss.config.js",
               "postcss.config.cjs", "postcss.config.mjs", "postcss.config.ts", ".postcssrc", ".postcssrc.json",
               "tailwind.config.js", "tailwind.config.cjs", "tailwind.config.ts", "public", ".browserslistrc",
               ".npmrc"]


def _scripts_run_by(name: str, scripts: dict) -> list[str]:
    """The shell commands `npm run <name>` runs, `npm run x` expanded (pre/post scripts too)."""
    commands = []
    for part in (f"pre{name}", name, f"post{name}"):
        for command in re.split(r"&&|\|\||;", scripts.get(part, "")):
            words = shlex.split(command)
            if words[:2] == ["npm", "run"] and len(words) > 2:
                commands += _scripts_run_by(words[2], scripts)
            elif words:
                commands.append(words)
    return commands


def _relative_imports(path: Path) -> list[Path]:
    found = []
    for spec in re.findall(r"""(?:import|from)\s*\(?\s*["'](\.{1,2}/[^"']+)["']""", path.read_text()):
        target = (path.parent / spec).resolve()
        candidates = [target, *(target.with_name(target.name + ext) for ext in (".ts", ".js", ".mjs", ".cjs"))]
        found += [c for c in candidates if c.is_file()]
    return found


def frontend_build_inputs() -> set[str]:
    """Every file or directory (relative to the repository root) `npm ci && npm run build` reads."""
    package = json.loads((FRONTEND / "package.json").read_text())
    needed = {FRONTEND / "package.json", FRONTEND / "package-lock.json"}
    for words in _scripts_run_by("build", package["scripts"]):
        # Arguments naming a file of the frontend (e.g. openapi-typescript's input): read by the
        # command, unless it is the output (--output / -o).
        for i, word in enumerate(words):
            if i and words[i - 1] in ("--output", "-o"):
                continue
            candidate = FRONTEND / word
            if not word.startswith("-") and candidate.exists() and candidate != FRONTEND:
                needed.add(candidate)
        if words[0] == "tsc":
            tsconfig = json.loads((FRONTEND / "tsconfig.json").read_text())
            needed.add(FRONTEND / "tsconfig.json")
            needed |= {FRONTEND / entry for entry in tsconfig.get("include", [])}
            if tsconfig.get("extends"):
                needed.add(FRONTEND / tsconfig["extends"])
        if words[0] == "vite":
            config = next(FRONTEND / n for n in ("vite.config.ts", "vite.config.js", "vite.config.mjs")
                          if (FRONTEND / n).exists())
            needed |= {config, *_relative_imports(config)}
            html = FRONTEND / "index.html"
            needed.add(html)
            needed |= {FRONTEND / src.lstrip("/") for src in re.findall(r'src="(/[^"]+)"', html.read_text())}
    needed |= {FRONTEND / name for name in AUTO_LOADED if (FRONTEND / name).exists()}
    return {str(path.relative_to(ROOT)) for path in needed}


def frontend_stage_copies(dockerfile: str) -> set[str]:
    """The repository paths the `frontend` stage COPYs (relative to the build context)."""
    stage, copies = None, set()
    workdir = "/"
    for line in re.sub(r"\\\n", " ", dockerfile).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0].upper() == "FROM":
            stage = words[-1] if len(words) >= 4 and words[-2].upper() == "AS" else None
        elif stage == "frontend" and words[0].upper() == "COPY":
            sources = [w for w in words[1:-1] if not w.startswith("--")]
            copies |= {s.rstrip("/") for s in sources}
        elif stage == "frontend" and words[0].upper() == "WORKDIR":
            workdir = words[1]
    assert workdir, "the frontend stage has a WORKDIR"
    return copies


def _covered(path: str, copies: set[str]) -> bool:
    return any(path == c or path.startswith(c + "/") or c == "." for c in copies)


def _ignored(path: str) -> bool:
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p.removeprefix("**/"))
               or path.startswith(p.rstrip("/") + "/") for p in patterns if not p.startswith("!"))


def test_the_build_reads_what_we_think_it_reads():
    # The derivation above must find the inputs that broke the image before (issue 25).
    inputs = frontend_build_inputs()
    assert {"frontend/openapi.json", "frontend/postcss.config.cjs", "frontend/src", "frontend/index.html",
            "frontend/vite.config.ts", "frontend/tsconfig.json"} <= inputs


def test_the_frontend_stage_copies_every_file_npm_run_build_reads():
    copies = frontend_stage_copies(DOCKERFILE.read_text())
    missing = sorted(path for path in frontend_build_inputs() if not _covered(path, copies))
    assert not missing, f"the Dockerfile's frontend stage does not COPY {missing}: `npm run build` reads them"


def test_no_build_input_is_excluded_by_the_dockerignore():
    excluded = sorted(path for path in frontend_build_inputs() if _ignored(path))
    assert not excluded, f"Dockerfile.dockerignore excludes {excluded}, which the image build reads"


def test_the_check_fails_on_the_dockerfile_before_the_fix():
    """The check is not vacuous: the frontend stage as it was (no openapi.json, no PostCSS
    config) is caught."""
    before = """
FROM node:20-bookworm-slim AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error
COPY frontend/index.html frontend/vite.config.ts frontend/tsconfig.json ./
COPY frontend/src/ ./src/
RUN npm run build
FROM python:3.12-slim AS app
COPY frontend/openapi.json ./
"""
    copies = frontend_stage_copies(before)
    missing = {path for path in frontend_build_inputs() if not _covered(path, copies)}
    assert missing == {"frontend/openapi.json", "frontend/postcss.config.cjs"}


def _frontend_stage(dockerfile: str) -> list[list[str]]:
    """The frontend stage's instructions, as word lists (continuation lines joined)."""
    stage, steps = None, []
    for line in re.sub(r"\\\n", " ", dockerfile).splitlines():
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0].upper() == "FROM":
            stage = words[-1] if len(words) >= 4 and words[-2].upper() == "AS" else None
        elif stage == "frontend":
            steps.append(words)
    return steps


@pytest.mark.e2e
@pytest.mark.timeout(600)
def test_the_frontend_stage_builds_from_only_what_it_copies(tmp_path):
    """Replays the frontend stage without Docker: a directory holding only what its COPY lines
    copy (node_modules linked in place of `npm ci`, which needs the network), then its RUN
    steps. A file the build reads but the stage does not copy fails here as it would in Docker."""
    workdir = tmp_path / "stage"
    for words in _frontend_stage(DOCKERFILE.read_text()):
        op = words[0].upper()
        if op == "WORKDIR":
            workdir = tmp_path / "stage" / words[1].lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        elif op == "COPY":
            *sources, dest = [w for w in words[1:] if not w.startswith("--")]
            target = workdir / dest
            for source in sources:
                path = ROOT / source
                if path.is_dir():
                    shutil.copytree(path, target, dirs_exist_ok=True,
                                    ignore=shutil.ignore_patterns("node_modules", "dist"))
                else:
                    target.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, target / path.name)
        elif op == "RUN":
            command = " ".join(words[1:])
            if command.startswith("npm ci"):
                (workdir / "node_modules").symlink_to((FRONTEND / "node_modules").resolve())
                continue
            result = subprocess.run(command, shell=True, cwd=workdir, capture_output=True, text=True, timeout=500)
            assert result.returncode == 0, f"`{command}` failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert (workdir / "dist" / ".vite" / "manifest.json").is_file()


def _docker_works() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


@pytest.mark.e2e
@pytest.mark.timeout(3600)
def test_docker_build(tmp_path):
    """The real build, from a clean checkout of HEAD, where a Docker engine is reachable."""
    if not _docker_works():
        pytest.skip("no Docker engine here (`docker info` fails): the build is checked by the tests above")
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(checkout)], check=True)
    result = subprocess.run(["docker", "build", "-f", "platform/docker/Dockerfile", "-t", "cairn:test", "."],
                            cwd=checkout, capture_output=True, text=True, timeout=3500)
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-5000:]
