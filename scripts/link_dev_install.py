"""Makes the development build usable from .venv: a .pth file puts python/ on
sys.path (the extension is built into python/kiln/) and .venv/bin/kiln points
at the built driver. Idempotent."""
import os
import site
import sys
from pathlib import Path

repo = Path(__file__).resolve().parent.parent
build = (repo / (sys.argv[1] if len(sys.argv) > 1 else "build")).resolve()

site_dir = Path(site.getsitepackages()[0])
pth = site_dir / "kiln-dev.pth"
want = str(repo / "python") + "\n"
if not pth.exists() or pth.read_text() != want:
    pth.write_text(want)

driver = build / "kiln"
link = Path(sys.prefix) / "bin" / "kiln"
if driver.exists() and (not link.is_symlink() or os.readlink(link) != str(driver)):
    if link.exists() or link.is_symlink():
        link.unlink()
    link.symlink_to(driver)
