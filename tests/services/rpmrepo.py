"""A signed RPM repository for the openEuler stand-in base (no openEuler mirror is reachable).

Small noarch stand-in packages are built with ``rpmbuild`` at test time, signed with a test GPG
key (``rpmsign``), and indexed with ``createrepo_c``; the tests serve the directory over HTTPS
with the test CA. The base's repository file keeps ``gpgcheck=1`` and names the key's public
half, as an openEuler base's ``openEuler.repo`` does, so dnf installs only what the key signed.
``base_rpmdb`` records the packages the stand-in base already "has" (ca-certificates, curl: in
the Debian root filesystem underneath, as files) in an rpm database, as a real openEuler base
has them installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

KEY_NAME = "cannery stand-in RPM signing <rpm@cannery.invalid>"
KEY_PATH = "/etc/pki/rpm-gpg/RPM-GPG-KEY-standin"

# name -> (summary, requires, files {path: text})
PACKAGES: dict[str, tuple[str, list[str], dict[str, str]]] = {
    "standin-hello": (
        "stand-in tool installed from the signed repository",
        ["standin-data"],
        {"/usr/bin/standin-hello": "#!/bin/sh\ncat /usr/share/standin-data/greeting\n"},
    ),
    "standin-data": (
        "stand-in data that standin-hello requires",
        [],
        {"/usr/share/standin-data/greeting": "hello from a signed rpm\n"},
    ),
}
UNSIGNED = "standin-unsigned"
BASE_PACKAGES = ("ca-certificates", "curl")


@dataclass(frozen=True)
class RpmRepo:
    root: Path  # createrepo_c's directory (serve it)
    public_key: Path  # ASCII-armoured public half of the signing key

    def repo_file(self, url: str) -> str:
        """The base's ``/etc/yum.repos.d`` entry for this repository served at ``url``."""
        return (
            "[standin]\n"
            "name=openEuler stand-in packages\n"
            f"baseurl={url}\n"
            "enabled=1\n"
            "gpgcheck=1\n"
            f"gpgkey=file://{KEY_PATH}\n"
        )


def _run(*args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(
        args, check=True, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL
    ).stdout


def _spec(name: str, summary: str, requires: list[str], files: dict[str, str]) -> str:
    lines = [
        f"Name: {name}", "Version: 1.0", "Release: 1", f"Summary: {summary}",
        "License: MIT", "BuildArch: noarch",
        # no automatic /bin/sh requirement: the stand-in base's shell is Debian's, not an rpm
        "AutoReqProv: no",
    ]  # fmt: skip
    lines += [f"Requires: {r}" for r in requires]
    lines += ["", "%description", summary, "", "%install"]
    for path, text in files.items():
        lines.append(f"mkdir -p %{{buildroot}}{os.path.dirname(path)}")
        lines.append(f"cat > %{{buildroot}}{path} <<'EOF'\n{text}EOF")
        if path.startswith("/usr/bin/"):
            lines.append(f"chmod 755 %{{buildroot}}{path}")
    lines += ["", "%files", *files, ""]
    return "\n".join(lines)


def build_rpm(
    name: str, summary: str, requires: list[str], files: dict[str, str], out: Path
) -> Path:
    """``rpmbuild -bb`` one noarch package into ``out``; returns the .rpm."""
    top = out / f".build-{name}"
    (top / "SPECS").mkdir(parents=True, exist_ok=True)
    spec = top / "SPECS" / f"{name}.spec"
    spec.write_text(_spec(name, summary, requires, files))
    _run(
        "rpmbuild", "-bb", "--quiet", "--define", f"_topdir {top}",
        "--define", "__os_install_post %{nil}", "--define", "debug_package %{nil}",
        "--define", "_build_id_links none", str(spec),
    )  # fmt: skip
    built = next((top / "RPMS" / "noarch").glob(f"{name}-1.0-1*.rpm"))
    dest = out / built.name
    shutil.move(str(built), dest)
    shutil.rmtree(top)
    return dest


def make_rpm_repo(root: Path) -> RpmRepo:
    """Build, sign and index the stand-in packages under ``root``, plus ``UNSIGNED`` (in the
    same repository, not signed: dnf must refuse it)."""
    root.mkdir(parents=True, exist_ok=True)
    rpms = [build_rpm(n, s, r, f, root) for n, (s, r, f) in PACKAGES.items()]
    unsigned = build_rpm(
        UNSIGNED, "stand-in package nobody signed", [], {"/usr/share/standin-unsigned": "x\n"}, root
    )
    # gpg-agent's socket lives in the home directory: keep its path short.
    home = Path(tempfile.mkdtemp(prefix="cannery-gpg-"))
    env = {**os.environ, "GNUPGHOME": str(home)}
    try:
        _run(
            "gpg", "--batch", "--pinentry-mode", "loopback", "--passphrase", "",
            "--quick-gen-key", KEY_NAME, "rsa2048", "sign", "never", env=env,
        )  # fmt: skip
        public = root / "RPM-GPG-KEY-standin"
        public.write_text(_run("gpg", "--batch", "--armor", "--export", KEY_NAME, env=env))
        _run(
            "rpmsign", "--addsign", "--define", f"_gpg_name {KEY_NAME}",
            "--define", f"_gpg_path {home}", "--define", f"__gpg {shutil.which('gpg')}",
            *map(str, rpms), env=env,
        )  # fmt: skip
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, capture_output=True,
                       check=False)
        shutil.rmtree(home, ignore_errors=True)
    for rpm in [*rpms, unsigned]:
        out = _run("rpm", "-qp", "--nosignature", "--qf", "%{RSAHEADER:pgpsig}", str(rpm))
        assert (out == "(none)") == (rpm == unsigned), (rpm.name, out)
    _run("createrepo_c", "--quiet", str(root))
    return RpmRepo(root, public)


def base_rpmdb(root: Path) -> Path:
    """An rpm database (``root/var/lib/rpm``) recording ``BASE_PACKAGES`` as installed: empty
    stand-ins for what the Debian root filesystem already holds as files."""
    stubs = root.parent / f"{root.name}-stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    rpms = [
        build_rpm(n, f"stand-in record of the base's {n}", [], {f"/usr/share/standin-base/{n}":
                  "provided by the stand-in base's Debian root filesystem\n"}, stubs)
        for n in BASE_PACKAGES
    ]
    db = ("--root", str(root), "--dbpath", "/var/lib/rpm")
    (root / "var" / "lib" / "rpm").mkdir(parents=True, exist_ok=True)
    _run("rpm", *db, "--initdb")
    _run("rpm", *db, "-i", "--justdb", "--nodeps", "--noscripts", *map(str, rpms))
    return root / "var" / "lib" / "rpm"
