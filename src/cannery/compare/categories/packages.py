"""packages: OS packages per manager family (apt, dnf — yum and microdnf included — and apk),
with the install flags that change what gets installed (recommends, suggests, weak deps).

Items: ``apt:wget`` (a package), ``apt:manager`` (apt-get against apt, yum against dnf) and
``apt:--no-install-recommends`` (a flag one side installs the packages both have with)."""

from __future__ import annotations

from cannery.compare.image import Cmd, ImageView
from cannery.compare.model import ADDED, CHANGED, REMOVED, Difference

NAME = "packages"
FAMILY = {"apt-get": "apt", "apt": "apt", "aptitude": "apt", "dnf": "dnf", "yum": "dnf",
          "microdnf": "dnf", "tdnf": "dnf", "apk": "apk"}
INSTALL = {"apt": ("install",), "dnf": ("install", "groupinstall"), "apk": ("add",)}
REMOVE = {"apt": ("remove", "purge"), "dnf": ("remove", "erase"), "apk": ("del",)}
# Options whose value is a separate word (not a package).
VALUE_OPTS = {"-o", "--option", "-t", "--target-release", "-c", "--config", "--setopt",
              "--repo", "--enablerepo", "--disablerepo", "--releasever", "--installroot",
              "-X", "--repository", "--virtual", "--root", "--arch", "-p"}


def set_flags(family: str, argv: list[str], env: dict[str, str]) -> list[str]:
    """The options of an install that change the set of packages installed."""
    flags: list[str] = []
    joined = " ".join(argv)
    if family == "apt":
        if "--no-install-recommends" in argv or "APT::Install-Recommends=false" in joined \
                or "APT::Install-Recommends=0" in joined:
            flags.append("--no-install-recommends")
        if "--install-suggests" in argv:
            flags.append("--install-suggests")
    elif family == "dnf":
        for i, a in enumerate(argv):
            v = a.split("=", 1)[1] if a.startswith("--setopt=") else (
                argv[i + 1] if a == "--setopt" and i + 1 < len(argv) else "")
            if v.replace(" ", "").lower() in ("install_weak_deps=false", "install_weak_deps=0",
                                              "install_weak_deps=no"):
                flags.append("install_weak_deps=False")
        if "--nobest" in argv:
            flags.append("--nobest")
    return flags


class Installed:
    __slots__ = ("flags", "manager", "version")

    def __init__(self, manager: str, version: str, flags: list[str]) -> None:
        self.manager = manager
        self.version = version
        self.flags = flags


def packages(view: ImageView) -> dict[str, Installed]:
    """``family:name`` → how it was installed; a package removed later is dropped."""
    out: dict[str, Installed] = {}
    for c in view.commands:
        family = FAMILY.get(c.name)
        if family is None:
            continue
        sub, names = _operands(c)
        if sub in INSTALL[family]:
            flags = set_flags(family, c.argv, {})
            for name in names:
                pkg, version = _split(family, name)
                out[f"{family}:{pkg}"] = Installed(c.name, version, flags)
        elif sub in REMOVE[family]:
            for name in names:
                out.pop(f"{family}:{_split(family, name)[0]}", None)
    return out


def _operands(c: Cmd) -> tuple[str, list[str]]:
    sub = ""
    names: list[str] = []
    argv = c.argv
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in VALUE_OPTS:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        if not sub:
            sub = a
        elif sub == "group" and not names and a == "install":
            sub = "groupinstall"
        else:
            names.append(a)
        i += 1
    return sub, names


def _split(family: str, name: str) -> tuple[str, str]:
    if family == "apt" and "=" in name:
        pkg, _, version = name.partition("=")
        return pkg, "=" + version
    if family == "apk" and "=" in name:
        pkg, _, version = name.partition("=")
        return pkg, "=" + version
    return name, ""


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    a, b = packages(original), packages(new)
    out: list[Difference] = []
    for key, got in a.items():
        if key not in b:
            out.append(Difference(NAME, key, REMOVED, got.version or "installed", None))
        elif got.version != b[key].version:
            out.append(Difference(NAME, key, CHANGED, got.version or "any version",
                                  b[key].version or "any version"))
    out += [Difference(NAME, key, ADDED, None, got.version or "installed")
            for key, got in b.items() if key not in a]
    families = sorted({k.split(":", 1)[0] for k in a} & {k.split(":", 1)[0] for k in b})
    for family in families:
        common = [k for k in a if k.startswith(family + ":") and k in b]
        managers_a = sorted({a[k].manager for k in a if k.startswith(family + ":")})
        managers_b = sorted({b[k].manager for k in b if k.startswith(family + ":")})
        if managers_a != managers_b:
            out.append(Difference(NAME, f"{family}:manager", CHANGED, " ".join(managers_a),
                                  " ".join(managers_b)))
        flags = sorted({f for k in common for f in a[k].flags + b[k].flags})
        for flag in flags:
            only_a = [k.split(":", 1)[1] for k in common if flag in a[k].flags
                      and flag not in b[k].flags]
            only_b = [k.split(":", 1)[1] for k in common if flag in b[k].flags
                      and flag not in a[k].flags]
            if only_a:
                out.append(Difference(NAME, f"{family}:{flag}", REMOVED, flag, None,
                                      "installs " + " ".join(sorted(only_a)) + " without it"))
            if only_b:
                out.append(Difference(NAME, f"{family}:{flag}", ADDED, None, flag,
                                      "installs " + " ".join(sorted(only_b)) + " with it"))
    return out
