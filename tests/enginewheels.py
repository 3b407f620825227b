"""Small real engine distributions for the tests: a wheel written as PEP 427 says (with a
RECORD of sha256 hashes that pip and installers check), an sdist, an installed
distribution (a `.dist-info` folder on a path importlib.metadata reads)."""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _metadata(name: str, version: str) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"


def build_wheel(folder: Path, name: str, version: str, files: dict[str, str], tag: str = "py3-none-any") -> Path:
    """`folder/NAME-VERSION-TAG.whl` holding `files` (paths inside the wheel)."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    members = {rel: text.encode() for rel, text in files.items()}
    members[f"{info}/METADATA"] = _metadata(name, version).encode()
    members[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    record = "".join(f"{rel},{_record_hash(data)},{len(data)}\n" for rel, data in members.items())
    record += f"{info}/RECORD,,\n"
    members[f"{info}/RECORD"] = record.encode()
    path = folder / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in members.items():
            zf.writestr(rel, data)
    return path


def build_sdist(folder: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """`folder/NAME-VERSION.tar.gz` with `files` under its top folder and a PKG-INFO."""
    folder.mkdir(parents=True, exist_ok=True)
    top = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{top}.tar.gz"
    with tarfile.open(path, "w:gz") as tf:
        for rel, text in {**files, "PKG-INFO": _metadata(name, version)}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def install_dist(site: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """An installed distribution in `site` (a folder to put on sys.path): the files and a
    `.dist-info` whose RECORD lists them, as pip leaves them."""
    site.mkdir(parents=True, exist_ok=True)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    lines = []
    for rel, text in files.items():
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        lines.append(f"{rel},{_record_hash(text.encode())},{len(text.encode())}")
    (info / "METADATA").write_text(_metadata(name, version))
    (info / "RECORD").write_text("\n".join(lines + [f"{info.name}/RECORD,,"]) + "\n")
    return site
