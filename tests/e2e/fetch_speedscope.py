"""Fetches speedscope's release (the npm package's dist/release: its index.html and bundle) into
build/speedscope for the test that opens a --speedscope file in it, checked against the digest
below. Without the registry the test skips, and this says why; it never fails the set-up."""
from __future__ import annotations

import hashlib
import io
import pathlib
import shutil
import sys
import tarfile
import urllib.request

VERSION = "1.25.0"
URL = f"https://registry.npmjs.org/speedscope/-/speedscope-{VERSION}.tgz"
SHA256 = "2831f1e0d26df914b477e522d78b8485511495a6af81a0b88158f8b48f9e0d03"
PREFIX = "package/dist/release/"


def main(dest: str) -> int:
    out = pathlib.Path(dest)
    if (out / "index.html").exists():
        return 0
    try:
        fetch(out)
    except Exception as e:      # offline, a cut download, a full disk: the test skips, the set-up goes on
        print(f"set-up: speedscope {VERSION} not fetched ({type(e).__name__}: {e}): its test skips", file=sys.stderr)
    return 0


def fetch(out: pathlib.Path) -> None:
    data = urllib.request.urlopen(URL, timeout=60).read()
    if hashlib.sha256(data).hexdigest() != SHA256:
        raise ValueError(f"{URL} does not match its digest")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            name = m.name[len(PREFIX):] if m.name.startswith(PREFIX) else ""
            if m.isfile() and name and "/" not in name and not name.startswith("."):
                (tmp / name).write_bytes(tar.extractfile(m).read())
    shutil.rmtree(out, ignore_errors=True)      # a folder an earlier, cut fetch left without index.html
    tmp.rename(out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
