"""A PEP 503 "simple" package index of wheels the tests build, served over HTTPS on 127.0.0.1
with the test CA's certificate. The wheels are pure-Python and written directly (zip +
METADATA/WHEEL/RECORD), so no build backend or internet is needed."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import zipfile
from pathlib import Path

from tests.services.tlsca import HTTPSFileServer, LocalCA


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def make_wheel(
    out_dir: Path, name: str, version: str, requires: tuple[str, ...] = (),
    tag: str = "py3-none-any",
) -> Path:
    """A wheel tagged ``tag`` (default ``py3-none-any``) whose module ``name`` holds
    ``VERSION``."""
    mod = name.replace("-", "_")
    dist = f"{mod}-{version}"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {
        f"{mod}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{dist}.dist-info/METADATA": meta.encode(),
        f"{dist}.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: cannery-tests\nRoot-Is-Purelib: true\n"
            f"Tag: {tag}\n"
        ).encode(),
    }
    record = ""
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{path},sha256={digest},{len(data)}\n"
    files[f"{dist}.dist-info/RECORD"] = (record + f"{dist}.dist-info/RECORD,,\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, data in files.items():
            zf.writestr(zipfile.ZipInfo(member, (2020, 1, 1, 0, 0, 0)), data)
    return path


class PackageIndex:
    """``root/files/*.whl`` published as ``url`` (``…/simple``); call ``publish()`` after
    adding or changing wheels."""

    def __init__(self, root: Path, ca: LocalCA) -> None:
        self.root = root
        self.files = root / "files"
        self.files.mkdir(parents=True, exist_ok=True)
        self.publish()
        self.server = HTTPSFileServer(root, ca)

    @property
    def url(self) -> str:
        return f"{self.server.url}/simple"

    def add(self, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
        path = make_wheel(self.files, name, version, requires)
        self.publish()
        return path

    def publish(self) -> None:
        projects: dict[str, list[Path]] = {}
        for whl in sorted(self.files.glob("*.whl")):
            projects.setdefault(_normalize(whl.name.split("-")[0]), []).append(whl)
        simple = self.root / "simple"
        simple.mkdir(exist_ok=True)
        links = "".join(f'<a href="{n}/">{n}</a>\n' for n in sorted(projects))
        (simple / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>")
        for name, wheels in projects.items():
            (simple / name).mkdir(exist_ok=True)
            rows = "".join(
                f'<a href="../../files/{html.escape(w.name)}#sha256='
                f'{hashlib.sha256(w.read_bytes()).hexdigest()}">{html.escape(w.name)}</a>\n'
                for w in wheels
            )
            (simple / name / "index.html").write_text(
                f"<!DOCTYPE html><html><body>\n{rows}</body></html>"
            )

    def stop(self) -> None:
        self.server.stop()
