"""Makes the development build usable from .venv: a .pth file puts python/ on
sys.path (the extension is built into python/kiln/), a kiln-<version>.dist-info
carries the package metadata and entry points (so that torch.compile finds
backend="kiln" through `torch_dynamo_backends` as for an installed wheel), and
.venv/bin/kiln points at the built driver. Idempotent; `make build` runs it."""
import os
import site
import sys
import tomllib
from pathlib import Path

# Marks dist-info directories this script wrote (never touch a real install's).
INSTALLER = "kiln-dev-build"


def _write_if_changed(path, text):
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def link_python_path(site_dir, repo):
    _write_if_changed(site_dir / "kiln-dev.pth", str(repo / "python") + "\n")


def _installer(info):
    path = info / "INSTALLER"
    return path.read_text().strip() if path.exists() else None


def _entry_points_text(project):
    lines = []
    for group, entries in project.get("entry-points", {}).items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in entries.items()]
        lines.append("")
    return "\n".join(lines)


def write_dist_info(site_dir, repo):
    """Writes <site_dir>/kiln-<version>.dist-info from pyproject.toml; returns its path."""
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    name, version = project["name"], project["version"]
    info = site_dir / f"{name}-{version}.dist-info"
    for old in site_dir.glob(f"{name}-*.dist-info"):
        if old != info and _installer(old) == INSTALLER:
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
    if info.exists() and _installer(info) != INSTALLER:
        return info  # a real install of this version: leave it alone
    info.mkdir(exist_ok=True)
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: {project.get('description', '')}\n",
        "INSTALLER": INSTALLER + "\n",
        "entry_points.txt": _entry_points_text(project),
    }
    for file_name, text in files.items():
        _write_if_changed(info / file_name, text)
    record = "".join(f"{info.name}/{f},,\n" for f in list(files) + ["RECORD"])
    _write_if_changed(info / "RECORD", record)
    return info


def link_driver(build):
    driver = build / "kiln"
    link = Path(sys.prefix) / "bin" / "kiln"
    if driver.exists() and (not link.is_symlink() or os.readlink(link) != str(driver)):
        if link.exists() or link.is_symlink():
            link.unlink()
        link.symlink_to(driver)


def main():
    repo = Path(__file__).resolve().parent.parent
    build = (repo / (sys.argv[1] if len(sys.argv) > 1 else "build")).resolve()
    site_dir = Path(site.getsitepackages()[0])
    link_python_path(site_dir, repo)
    write_dist_info(site_dir, repo)
    link_driver(build)


if __name__ == "__main__":
    main()
