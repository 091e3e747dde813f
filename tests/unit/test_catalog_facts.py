"""Python, the toolkit and the SoC are facts of an image, and builder stages are typed: each
misuse is one line naming file:line and the field, exit 2 (issue 19, items 1 and 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.catalogs import line_of, minimal

GOOD = minimal()

# An image with no Python, no toolkit and no SoC, and one that builds Python from source in a
# builder stage: the good shapes the cases below break.
PLAIN = GOOD + """
[bases.os]
image = "registry.example.com/ubuntu:22.04"
os = "ubuntu"
os_version = "22.04"
chip = "910b"

[toolkits.host]
version = "8.5.2"
provided = "host"

# a plain OS base: no chip (only an image with no toolkit and no soc can use it)
[bases.bare]
image = "registry.example.com/debian:12"
os = "debian"
os_version = "12"

[images.plain]
base = "bare"
platforms = ["linux/amd64"]
tag = "plain-{os}{os_version}"

[images.built]
base = "os"
toolkit = "host"
platforms = ["linux/amd64", "linux/arm64"]
tag = "built-py{python}-cann{cann}"
smoke_imports = ["json"]
python = { version = "3.11.10", install = "source", url = "https://f.example.com/Py-{version}.tgz" }

[[images.built.stages]]
name = "tools"
packages = ["gcc", "make"]
steps = [{ run = "make -C /src install PREFIX=/opt/tools" }]
outputs = ["/opt/tools"]
"""

CASES = [
    (
        "chip-needed-by-a-toolkit",
        lambda t: t.replace('os_version = "22.04"\nchip = "910b"\n\n[toolkits.host]',
                            'os_version = "22.04"\n\n[toolkits.host]'),
        'toolkit = "host"',
        "images.built.toolkit: a toolkit needs the chip of the image's base, and "
        "bases.os.chip is not set",
    ),
    (
        "chip-tag-field-on-a-plain-base",
        lambda t: t.replace('tag = "plain-{os}{os_version}"', 'tag = "plain-{chip}"'),
        'tag = "plain-{chip}"',
        "images.plain.tag: tag field {chip}: the image has no chip (its base sets none)",
    ),
    (
        "python-needed",
        lambda t: t.replace('smoke_imports = ["json"]\npython = {', 'smoke_imports = ["json"]\n#')
        .replace("built-py{python}", "built-"),
        'smoke_imports = ["json"]',
        "images.built.smoke_imports: needs Python, and neither base 'os' ships one",
    ),
    (
        "python-source-without-url",
        lambda t: t.replace(', url = "https://f.example.com/Py-{version}.tgz"', ""),
        "python = {",
        'images.built.python: install = "source" takes url',
    ),
    (
        "python-packages-with-url",
        lambda t: t.replace('install = "source"', 'install = "packages"'),
        "python = {",
        'images.built.python: install = "packages" takes packages',
    ),
    (
        "python-packages-with-build-packages",
        lambda t: t.replace(', url = "https://f.example.com/Py-{version}.tgz"',
                            ', packages = ["python3"], build_packages = ["gcc"]')
        .replace('install = "source"', 'install = "packages"'),
        "python = {",
        'images.built.python: install = "packages" takes packages (and no url or build_packages)',
    ),
    (
        "python-url-field",
        lambda t: t.replace("Py-{version}.tgz", "Py-{arch}.tgz"),
        "python = {",
        "images.built.python.url: unknown template field {arch} (known: version)",
    ),
    (
        "python-url-http",
        lambda t: t.replace("https://f.example.com/Py", "http://f.example.com/Py"),
        "python = {",
        "images.built.python.url: download URL must be https://",
    ),
    (
        "python-short-version",
        lambda t: t.replace('version = "3.11.10"', 'version = "3.11"'),
        "python = {",
        "images.built.python.version: python.version must look like 3.11.10, got '3.11'",
    ),
    (
        "host-toolkit-packages",
        lambda t: t.replace('provided = "host"', 'provided = "host"\npackages = []'),
        "packages = []",
        "toolkits.host.packages: packages has no effect on a toolkit the host provides",
    ),
    (
        "host-toolkit-env",
        lambda t: t.replace('provided = "host"', 'provided = "host"\nenv = "cann"  # host'),
        'env = "cann"  # host',
        "toolkits.host.env: env has no effect on a toolkit the host provides",
    ),
    (
        "toolkit-without-env",
        lambda t: t.replace('version = "8.5.2"\nenv = "cann"', 'version = "8.5.2"'),
        "[toolkits.cann852]",
        "toolkits.cann852: missing required key 'env'",
    ),
    (
        "uv-installer-without-uv",
        lambda t: t.replace('soc = "ascend910b1"\n', 'soc = "ascend910b1"\ninstaller = "uv"\n', 1),
        'installer = "uv"',
        'images.one.installer: installer = "uv" needs uv in this image\'s pip_tools',
    ),
    (
        "uv-installer-pip-only-arg",
        lambda t: t.replace('soc = "ascend910b1"\n', 'soc = "ascend910b1"\ninstaller = "uv"\n'
                            'pip_tools = ["setuptools", "UV==0.13.9"]\n', 1)
        .replace('install = "editable"\n', 'install = "editable"\npip_args = ["--use-pep517"]\n'),
        "components = [",
        "images.one.components[1]: installer = \"uv\": component 'vllm' has pip_args "
        "'--use-pep517', which the rendered uv pip install cannot take as pip does",
    ),
    (
        "uv-installer-marker",
        lambda t: t.replace('soc = "ascend910b1"\n', 'soc = "ascend910b1"\ninstaller = "uv"\n'
                            'pip_tools = ["uv==0.13.9; platform_machine == \'x86_64\'"]\n', 1),
        'installer = "uv"',
        'images.one.installer: installer = "uv" needs uv on every platform of the image',
    ),
    (
        "uv-installer-index-url-twice",
        lambda t: t.replace('soc = "ascend910b1"\n', 'soc = "ascend910b1"\ninstaller = "uv"\n'
                            'pip_tools = ["uv==0.13.9"]\n', 1)
        .replace('install = "editable"\n',
                 'install = "editable"\npip_args = ["--index-url=https://m.example.com/s"]\n'),
        "components = [",
        "images.one.components[1]: installer = \"uv\": component 'vllm' has pip_args "
        "'--index-url=https://m.example.com/s', which the rendered uv pip install cannot take",
    ),
    (
        "toolkit-build-without-soc",
        lambda t: t.replace('soc = "ascend910b1"\n', ""),
        "components = [",
        "images.one.components[2]: component 'vllm-ascend' has toolkit_build = true, which "
        "needs the image's soc",
    ),
    (
        "toolkit-build-host-toolkit",
        lambda t: t.replace('toolkit = "cann852"', 'toolkit = "host"'),
        "components = [",
        "images.one.components[2]: component 'vllm-ascend' has toolkit_build = true, but the "
        "image gets its toolkit from the host",
    ),
    (
        "toolkit-build-no-toolkit",
        lambda t: t.replace('toolkit = "cann852"\n', "").replace("t-{cann}", "t-")
        .replace('acknowledge = ["compat-cann", ', "acknowledge = ["),
        "components = [",
        "images.one.components[2]: component 'vllm-ascend' has toolkit_build = true, but the "
        "image has no toolkit",
    ),
    (
        "tag-names-missing-soc",
        lambda t: t.replace('tag = "plain-{os}{os_version}"', 'tag = "plain-{soc}"'),
        'tag = "plain-{soc}"',
        "images.plain.tag: tag field {soc}: the image has no soc",
    ),
    (
        "tag-names-missing-python",
        lambda t: t.replace('tag = "plain-{os}{os_version}"', 'tag = "plain-{python}"'),
        'tag = "plain-{python}"',
        "images.plain.tag: tag field {python}: the image has no python",
    ),
    (
        "stage-unknown-base",
        lambda t: t.replace('name = "tools"', 'name = "tools"\nbase = "oss"'),
        'base = "oss"',
        "images.built.stages[0].base: unknown base 'oss' (did you mean 'os'?)",
    ),
    (
        "stage-reserved-name",
        lambda t: t.replace('name = "tools"', 'name = "arch-amd64"'),
        'name = "arch-amd64"',
        "images.built.stages[0].name: stage name 'arch-amd64' is reserved",
    ),
    (
        "stage-twice",
        lambda t: t + '\n[[images.built.stages]]\nname = "tools"\noutputs = ["/x"]\n',
        '\nname = "tools"\noutputs = ["/x"]',
        "images.built.stages[1].name: stage 'tools' is defined twice",
    ),
    (
        "stage-relative-output",
        lambda t: t.replace('outputs = ["/opt/tools"]', 'outputs = ["opt/tools"]'),
        'outputs = ["opt/tools"]',
        "images.built.stages[0].outputs: output 'opt/tools': give an absolute path",
    ),
    (
        "stage-root-output",
        lambda t: t.replace('outputs = ["/opt/tools"]', 'outputs = ["/"]'),
        'outputs = ["/"]',
        "images.built.stages[0].outputs: output '/': give an absolute path below /",
    ),
    (
        "stage-no-outputs",
        lambda t: t.replace('outputs = ["/opt/tools"]', "outputs = []"),
        "outputs = []",
        "images.built.stages[0].outputs: List should have at least 1 item",
    ),
    (
        "stage-uninstall-without-python",
        lambda t: t.replace('steps = [{ run', 'steps = [{ uninstall = ["x"] }, { run'),
        "steps = [",
        "images.built.stages[0].steps[0].uninstall: pip uninstall needs Python",
    ),
]


@pytest.mark.parametrize(
    ("edit", "needle", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_misused_fact_is_one_line(tmp_path: Path, cli, edit, needle: str, words: str) -> None:  # type: ignore[no-untyped-def]
    text = edit(PLAIN)
    assert text != PLAIN, "the edit did not apply"
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("catalog", "validate", "--catalog", str(path))
    assert res.code == 2, res.err
    if needle.startswith("\n"):  # the second occurrence is the one reported
        line = text[: text.rindex(needle) + 1].count("\n") + 1
    else:
        line = line_of(text, needle)
    errors = [x for x in res.err.splitlines() if ": warning[" not in x and x.strip()]
    assert len(errors) == 1 and f"{path}:{line}: {words}" in errors[0], res.err
    assert "Traceback" not in res.err


def test_plain_images_validate_and_state_their_facts(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    from cannery.catalog.load import load_catalog

    path = tmp_path / "catalog.toml"
    path.write_text(PLAIN)
    res = cli("catalog", "validate", "--catalog", str(path))
    assert res.code == 0, res.err
    cat = load_catalog(path).catalog
    assert cat.python_of("plain") is None and cat.python_of("built") == "3.11"
    assert cat.python_of("one") == "3.11"  # the base's
    assert cat.toolkit_of("plain") is None
    host = cat.toolkit_of("built")
    assert host is not None and host.provided == "host"
    assert cat.images["plain"].soc is None
