"""OS families and Python inputs as written: an openEuler base gets dnf steps (no apt), and a
component's extra indexes reach its pip calls and the lock's resolution whatever `pin` says.

The package managers and pip are stand-ins on PATH (a real dnf or pip install needs a root file
system and the network); the steps themselves are the rendered text, run by bash.
"""

from __future__ import annotations

import re
from pathlib import Path

import dockerfile
import pytest

from cannery.catalog.load import load_catalog
from cannery.errors import FatalError
from cannery.lock import Lock
from cannery.plan import ImageSpec, plan
from cannery.pydeps import python_requests
from cannery.render.dockerfile import render_dockerfile
from tests.catalogs import minimal, only_components
from tests.unit.test_render_steps import _bash, _tool

OPENEULER = minimal().replace('os = "ubuntu"\nos_version = "22.04"',
                              'os = "openeuler"\nos_version = "24.03"')
INDEXES = minimal().replace(
    'components = ["torch", "vllm", "vllm-ascend"]',
    'components = ["torch", "extras", "vllm", "vllm-ascend"]',
) + """
[components.extras]
pip = ["accelerate==1.13.0"]
extra_index.amd64 = ["https://a.example.com/simple", "https://b.example.com/simple"]
extra_index.arm64 = "https://c.example.com/simple"
"""


def _load(tmp_path: Path, text: str) -> ImageSpec:
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    return plan(load_catalog(path).catalog, Lock(), ["one"])[0]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plain.toml"
    path.write_text(text)
    return path


def _runs(spec: ImageSpec) -> list[str]:
    return [c.value[0] for c in dockerfile.parse_string(render_dockerfile(spec)) if c.cmd == "RUN"]


def test_openeuler_renders_dnf_and_no_apt(tmp_path: Path) -> None:
    spec = _load(tmp_path, OPENEULER)
    assert spec.package_manager == "dnf"
    text = render_dockerfile(spec)
    assert "apt" not in text and "dpkg" not in text
    step = next(r for r in _runs(spec) if "rpm -q" in r)
    assert ("dnf install -y --setopt=persistdir=/tmp/cannery-dnf --setopt=install_weak_deps=False"
            " ${missing}") in step
    # Signature checks are left as the base configures them; no repository config is written.
    assert "gpgcheck" not in step and "/etc/yum.repos.d" not in step


def test_dnf_step_installs_only_missing_and_leaves_no_cache_or_logs(tmp_path: Path) -> None:
    spec = _load(tmp_path, OPENEULER)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    _tool(bin_dir, "rpm", 'p="${@: -1}"; [ "$p" = ca-certificates ]')
    _tool(bin_dir, "dnf", f'echo "dnf $*" >> {log}')
    root = tmp_path / "root"
    for d in ("var/cache/dnf", "var/log"):
        (root / d).mkdir(parents=True)
    (root / "var/cache/dnf/repo.solv").write_text("x")
    (root / "var/log/dnf.log").write_text("x")
    (root / "var/log/hawkey.log").write_text("x")
    step = next(r for r in _runs(spec) if "rpm -q" in r).replace(" /var/", f" {root}/var/")
    proc = _bash(step, tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[0].split("install_weak_deps=False ")[1].split() == ["curl", "git"]
    assert calls[1] == "dnf clean all"
    assert not any((root / "var/cache/dnf").iterdir())
    assert not (root / "var/log/dnf.log").exists() and not (root / "var/log/hawkey.log").exists()


def test_ubuntu_renders_apt_and_no_dnf(tmp_path: Path) -> None:
    text = render_dockerfile(_load(tmp_path, minimal()))
    assert "apt-get install" in text and "dnf" not in text and "rpm -q" not in text


def test_extra_indexes_of_an_unpinned_component_reach_its_pip_call(tmp_path: Path) -> None:
    """The silent case of the issue: the index was dropped unless the component had pin."""
    spec = _load(tmp_path, INDEXES)
    step = next(r for r in _runs(spec) if "accelerate==1.13.0" in r)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    _tool(bin_dir, "python3", f'echo "$*" >> {log}')
    for arch in ("amd64", "arm64"):
        log.unlink(missing_ok=True)
        proc = _bash(step, tmp_path, {"TARGETARCH": arch})
        assert proc.returncode == 0, proc.stderr
        args = log.read_text().split()
        indexes = [a.split("=", 1)[1] for a in args if a.startswith("--extra-index-url=")]
        assert indexes == (
            ["https://a.example.com/simple", "https://b.example.com/simple"]
            if arch == "amd64"
            else ["https://c.example.com/simple"]
        )
        assert args[-1] == "accelerate==1.13.0"
        # resolved at build time, so against the catalog's own index (not pip's default)
        assert args[args.index("--index-url") + 1] == "https://127.0.0.1:9/simple"


def test_extra_indexes_reach_the_lock_whatever_pin_says(tmp_path: Path) -> None:
    path = tmp_path / "catalog.toml"
    path.write_text(INDEXES)
    cat = load_catalog(path).catalog
    commits = {(c.git, c.ref): "0" * 40 for c in cat.components.values() if c.git and c.ref}
    reqs = {r.arch: r for r in python_requests(cat, "one", commits) or []}
    assert reqs["amd64"].extra_index_urls == (
        "https://a.example.com/simple", "https://b.example.com/simple"
    )
    assert reqs["arm64"].extra_index_urls == ("https://c.example.com/simple",)


def test_no_index_config_is_left_in_the_image(tmp_path: Path) -> None:
    text = render_dockerfile(_load(tmp_path, INDEXES))
    assert "pip.conf" not in text and "PIP_EXTRA_INDEX_URL" not in text
    assert "pip config" not in text


# --------------------------------------------------------------- image settings, steps, tags

SETTINGS = minimal().replace('[images.two]', '''env.SOC_VERSION = "ascend910b1"
env.LD_LIBRARY_PATH = { append = ["/usr/local/lib"] }
env.LD_PRELOAD = { prepend = ["/usr/lib/{uname_arch}-linux-gnu/libjemalloc.so.2"] }
workdir = "/workspace"
user = "vllm"
entrypoint = ["/bin/bash", "-lc"]
cmd = ["vllm", "serve"]
aliases = ["main-{chip}", "latest"]

[[images.one.steps]]
uninstall = ["triton"]

[[images.one.steps]]
alternatives = { name = "clang", link = "/usr/bin/clang", path = "/usr/bin/clang-15", \
priority = 20 }

[[images.one.steps]]
symlink = { target = "/usr/bin/python3", link = "/usr/local/bin/python" }

[[images.one.steps]]
ldconfig = true

[[images.one.steps]]
run = "python3 -m pip uninstall -y triton-ascend"

[images.two]
aliases = []''')


def test_image_settings_render_after_every_build_step(tmp_path: Path) -> None:
    spec = _load(tmp_path, SETTINGS)
    text = render_dockerfile(spec)
    tail = text[text.index("# Removed after the installs"):]
    order = [
        "RUN python3 -m pip uninstall -y triton\n",
        "RUN update-alternatives --install /usr/bin/clang clang /usr/bin/clang-15 20\n",
        'RUN mkdir -p "$(dirname /usr/local/bin/python)"; \\\n    ln -sfn /usr/bin/python3 '
        "/usr/local/bin/python\n",
        "RUN ldconfig\n",
        "RUN python3 -m pip uninstall -y triton-ascend\n",
        "RUN id -u vllm >/dev/null 2>&1 || useradd --create-home --user-group vllm\n",
        "ENV SOC_VERSION=ascend910b1 \\\n"
        "    LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH}:}/usr/local/lib \\\n"
        "    LD_PRELOAD=/usr/lib/${CANN_ARCH}-linux-gnu/libjemalloc.so.2"
        "${LD_PRELOAD:+:${LD_PRELOAD}}\n",
        "WORKDIR /workspace\n",
        "USER vllm\n",
        "LABEL ",
    ]
    at = [tail.index(part) for part in order]
    assert at == sorted(at)
    # The command is set before every build step (no step uses it; a bump does not repeat it).
    head = text[:text.index("# System packages")]
    assert head.index('ENTRYPOINT ["/bin/bash", "-lc"]\n') < head.index('CMD ["vllm", "serve"]')
    assert "CMD" not in tail and "ENTRYPOINT" not in tail
    # The toolkit's LD_LIBRARY_PATH is set before, and the image's appends to it.
    assert text.index("LD_LIBRARY_PATH=/usr/local/Ascend") < text.index("# Removed after")


def test_runtime_env_seen_by_a_shell(tmp_path: Path) -> None:
    """Docker expands ENV like the shell's ${X:+…}: run the rendered values through bash."""
    from cannery.render.dockerfile import runtime_env

    spec = _load(tmp_path, SETTINGS)
    pairs = dict(runtime_env(spec))
    script = "; ".join(f'{k}="{v}"' for k, v in pairs.items()) + (
        '; echo "$LD_LIBRARY_PATH|$LD_PRELOAD|$SOC_VERSION"'
    )
    proc = _bash(script, tmp_path, {"LD_LIBRARY_PATH": "/tk/lib64", "LD_PRELOAD": "",
                                    "CANN_ARCH": "aarch64"})
    assert proc.stdout.strip() == (
        "/tk/lib64:/usr/local/lib|/usr/lib/aarch64-linux-gnu/libjemalloc.so.2|ascend910b1"
    )


BOTH_SIDES = SETTINGS.replace(
    'env.LD_LIBRARY_PATH = { append = ["/usr/local/lib"] }',
    'env.LD_LIBRARY_PATH = { prepend = ["/drv/lib64", "/usr/lib64"], append = ["/usr/local/lib"] }')


def test_a_path_list_prepended_and_appended_to(tmp_path: Path) -> None:
    """prepend and append together: entries on both sides of the inherited value, one ENV
    value (a second pair for the same name in one ENV would see the old value); through bash,
    with the value inherited and without it."""
    from cannery.render.dockerfile import runtime_env
    from cannery.verify.expect import env_matches, expected_env

    spec = _load(tmp_path, BOTH_SIDES)
    pairs = runtime_env(spec)
    assert [k for k, _ in pairs].count("LD_LIBRARY_PATH") == 1
    value = dict(pairs)["LD_LIBRARY_PATH"]
    for inherited, seen in (("/tk/lib64", "/drv/lib64:/usr/lib64:/tk/lib64:/usr/local/lib"),
                            ("", "/drv/lib64:/usr/lib64:/usr/local/lib")):
        proc = _bash(f'LD_LIBRARY_PATH="{value}"; echo "$LD_LIBRARY_PATH"', tmp_path,
                     {"LD_LIBRARY_PATH": inherited})
        assert proc.stdout.strip() == seen
    # verify: the prepended entries, then the toolkit's, lead the value; more may follow
    want, inherits = expected_env(spec, "arm64")["LD_LIBRARY_PATH"]
    assert want.startswith("/drv/lib64:/usr/lib64:/usr/local/Ascend/") and inherits
    assert env_matches(want + ":/usr/local/lib", want, inherits)
    # a variable the toolkit sets to one exact value: the appended entry follows it
    opp = _load(tmp_path, BOTH_SIDES.replace(
        'env.SOC_VERSION = "ascend910b1"',
        'env.SOC_VERSION = "ascend910b1"\n'
        'env.ASCEND_HOME_PATH = { prepend = ["/a"], append = ["/b"] }'))
    want, inherits = expected_env(opp, "arm64")["ASCEND_HOME_PATH"]
    assert want.startswith("/a:/usr/local/Ascend/") and env_matches(want + ":/b", want, inherits)
    # and the catalog says the same through its schema and model: replace stays alone
    bad = BOTH_SIDES.replace('append = ["/usr/local/lib"]', 'replace = ["/usr/local/lib"]')
    with pytest.raises(FatalError, match="replace drops the current value"):
        _load(tmp_path, bad)


def test_verify_expects_the_image_env(tmp_path: Path) -> None:
    from cannery.verify.expect import expected_env

    env = expected_env(_load(tmp_path, SETTINGS), "arm64")
    assert env["SOC_VERSION"] == ("ascend910b1", False)
    assert env["LD_PRELOAD"] == ("/usr/lib/aarch64-linux-gnu/libjemalloc.so.2", True)
    assert env["LD_LIBRARY_PATH"][0].startswith("/usr/local/Ascend/cann-8.5.2")


def test_every_tag_reaches_build_bake_and_docs(tmp_path: Path) -> None:
    from cannery.builder.jobs import plan_build
    from cannery.render.bake import render_bake
    from cannery.render.docs import render_docs

    spec = _load(tmp_path, SETTINGS)
    assert spec.tags == ("t-8.5.2-910b-py3.11-r", "main-910b", "latest")
    job = plan_build(spec, render_dockerfile(spec), Lock())
    assert job.tags == spec.tags
    assert plan_build(spec, render_dockerfile(spec), Lock(), tag_suffix="-rc").tags[-1] == (
        "latest-rc"
    )
    bake = render_bake([spec], {"one": "d/one.Dockerfile"})
    assert "registry.example.com/test/images:latest" in bake
    docs = render_docs([spec], {"one": "d/one.Dockerfile"}, "TAGS.md", "t")
    assert "`registry.example.com/test/images:main-910b`" in docs


def test_tar_gz_bundle_of_wheels_installs_every_wheel_for_the_platform(tmp_path: Path) -> None:
    import io
    import tarfile

    text = minimal().replace('"torch", "vllm"', '"torch", "bundle", "vllm"') + (
        '\n[components.bundle]\nwheel = "https://w.example.com/torch_npu-{arch}.tar.gz"\n'
    )
    spec = _load(tmp_path, text)
    step = next(r for r in _runs(spec) if "torch_npu-" in r)
    assert "tar -xzf /tmp/bundle.run -C /tmp/bundle;" in step
    # Run the part after the (verified) download against a real .tar.gz of two "wheels".
    work = tmp_path / "tmp"
    work.mkdir()
    with tarfile.open(work / "bundle.run", "w:gz") as tar:
        for name in ("dist/a-1-py3-none-any.whl", "dist/b-1-py3-none-any.whl",
                     "dist/c-1-cp312-cp312-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl",
                     "dist/d-1-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"):
            data = b"x"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    after = step[step.index("mkdir -p /tmp/bundle"):].replace("/tmp/", f"{work}/")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "log"
    _tool(bin_dir, "python3", f'for a in "$@"; do echo "$a"; done >> {log}')
    proc = _bash("set -eu; " + after, tmp_path, {"CANN_ARCH": "x86_64"})
    assert proc.returncode == 0, proc.stderr
    installed = sorted(Path(a).name for a in log.read_text().split() if a.endswith(".whl"))
    # a bundle for both arches (torch_npu's daily one): this platform's wheels and pure ones
    assert installed == ["a-1-py3-none-any.whl", "b-1-py3-none-any.whl",
                         "d-1-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl"]
    assert not (work / "bundle").exists() and not (work / "bundle.run").exists()


def _bundle_run(tmp_path: Path, catalog: str, arch: str) -> list[str]:
    """The wheels the rendered bundle step hands pip, run against a real .tar.gz."""
    import io
    import tarfile

    spec = _load(tmp_path, catalog)
    step = next(r for r in _runs(spec) if "torch_npu-" in r)
    work = tmp_path / "tmp"
    work.mkdir(exist_ok=True)
    with tarfile.open(work / "bundle.run", "w:gz") as tar:
        for name in ("torch_npu-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                     "torch_npu-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl",
                     "apex-0.1-cp312-cp312-manylinux_2_28_x86_64.whl",
                     "torchvision_npu-1-py3-none-any.whl"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    after = step[step.index("mkdir -p /tmp/bundle"):].replace("/tmp/", f"{work}/")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "log"
    log.write_text("")
    _tool(bin_dir, "python3", f'for a in "$@"; do echo "$a"; done >> {log}')
    proc = _bash("set -eu; " + after, tmp_path, {"CANN_ARCH": arch})
    assert proc.returncode == 0, proc.stderr
    return sorted(Path(a).name for a in log.read_text().split() if a.endswith(".whl"))


SELECTED = minimal().replace('"torch", "vllm"', '"torch", "bundle", "vllm"') + (
    '\n[components.bundle]\nwheel = "https://w.example.com/torch_npu-{arch}.tar.gz"\n'
    'bundle_wheels = ["torch_npu-2.10.0*_{uname_arch}.whl"]\n'
)


def test_bundle_wheels_installs_only_the_wheels_it_names(tmp_path: Path) -> None:
    """install_daily_deps.sh installs torch_npu-2.10.0*_ARCH.whl from the bundle, nothing else
    in it: bundle_wheels says so, and the rendered find selects that, per platform."""
    assert _bundle_run(tmp_path, SELECTED, "x86_64") == [
        "torch_npu-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert _bundle_run(tmp_path, SELECTED, "aarch64") == [
        "torch_npu-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl"]
    # without it, every wheel for the platform and every pure-Python one
    default = SELECTED.replace('bundle_wheels = ["torch_npu-2.10.0*_{uname_arch}.whl"]\n', "")
    assert _bundle_run(tmp_path, default, "x86_64") == [
        "apex-0.1-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torch_npu-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "torchvision_npu-1-py3-none-any.whl"]


def test_the_lock_resolves_the_same_wheels_of_a_bundle() -> None:
    """The lock's choice (bundle_wheel_fits) is the Dockerfile's: the platform's, then named."""
    from cannery.catalog.inputs import bundle_wheel_fits

    select = ("torch_npu-2.10.0*_{uname_arch}.whl",)
    names = ["torch_npu-2.10.0-cp312-cp312-manylinux_2_28_x86_64.whl",
             "torch_npu-2.10.0-cp312-cp312-manylinux_2_28_aarch64.whl",
             "apex-0.1-cp312-cp312-manylinux_2_28_x86_64.whl",
             "torchvision_npu-1-py3-none-any.whl"]
    assert [n for n in names if bundle_wheel_fits(n, "x86_64", select)] == names[:1]
    assert [n for n in names if bundle_wheel_fits(n, "aarch64", select)] == names[1:2]
    assert [n for n in names if bundle_wheel_fits(n, "x86_64")] == [names[0], *names[2:]]


def test_the_lock_request_carries_bundle_wheels(tmp_path: Path) -> None:
    """The Python lock reads the patterns from its request; a request without them digests as
    it did before the field existed (every existing lock stays current)."""
    path = tmp_path / "catalog.toml"
    path.write_text(SELECTED)
    cat = load_catalog(path).catalog
    commits = {(c.git, c.ref): "a" * 40 for c in cat.components.values() if c.git and c.ref}
    reqs = python_requests(cat, "one", commits)
    assert reqs is not None
    assert {r.arch: r.bundle_wheels for r in reqs} == {
        "amd64": (("https://w.example.com/torch_npu-amd64.tar.gz",
                   ("torch_npu-2.10.0*_{uname_arch}.whl",)),),
        "arm64": (("https://w.example.com/torch_npu-arm64.tar.gz",
                   ("torch_npu-2.10.0*_{uname_arch}.whl",)),)}
    plain = python_requests(load_catalog(_write(tmp_path, minimal())).catalog, "one", commits)
    assert plain is not None and all(r.bundle_wheels == () for r in plain)
    import dataclasses

    first = plain[0]
    with_field = dataclasses.replace(first, bundle_wheels=(("u", ("p",)),))
    assert with_field.digest() != first.digest()


@pytest.mark.parametrize(("extra", "message"), [
    ('wheel = "https://w.example.com/x-{arch}.whl"\nbundle_wheels = ["x*"]',
     "bundle_wheels needs a wheel bundle"),
    ('wheel = "https://w.example.com/x-{arch}.tar.gz"\nbundle_wheels = ["$(id)*.whl"]',
     "bad wheel file-name pattern"),
])
def test_bundle_wheels_only_for_a_bundle_and_plain_names(tmp_path: Path, extra: str,
                                                         message: str) -> None:
    text = minimal().replace('"torch", "vllm"', '"torch", "bundle", "vllm"') + (
        f"\n[components.bundle]\n{extra}\n")
    with pytest.raises(FatalError, match=re.escape(message)):
        _load(tmp_path, text)


# --------------------------------------------------------------- build from the checkout

CHECKOUT = only_components(minimal(), "torch", "vllm", "here", toolkit_build=True) + """
[components.here]
path = "."
dest = "/vllm-workspace/vllm-ascend"
install = "editable"
version = "v0.18.0"
package = "vllm-ascend"
toolkit_build = true
"""


def _git_repo(root: Path) -> str:
    import subprocess

    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "setup.py").write_text("print('x')\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_checkout_component_is_copied_and_labelled_from_a_build_argument(tmp_path: Path) -> None:
    spec = _load(tmp_path, CHECKOUT)
    text = render_dockerfile(spec)
    assert "\nCOPY . /vllm-workspace/vllm-ascend\n" in text
    # resolved at build time: against the catalog's index, under the constraints
    assert "python3 -m pip install --no-cache-dir --index-url https://127.0.0.1:9/simple -c " \
           "/opt/cannery/constraints.txt -e /vllm-workspace/vllm-ascend" in text
    assert "git init" not in text.split("COPY . ")[1].split("LABEL")[0]
    assert 'ARG CANNERY_CHECKOUT="unknown"' in text or "ARG CANNERY_CHECKOUT=unknown" in text
    assert 'io.cannery.component.here="${CANNERY_CHECKOUT}"' in text
    # its dependencies change with the checkout: said, not hidden
    assert spec.checkout_resolved() == ["component here: dependencies of the checkout (.)"]
    assert "cannery: component here: dependencies of the checkout (.) are resolved by pip" in text


def test_render_writes_a_dockerignore_only_for_checkout_images(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "cannery.toml").write_text(CHECKOUT)
    assert cli("render", "dockerfile", "--catalog", str(tmp_path / "a" / "cannery.toml")).code == 0
    ignore = (tmp_path / "a" / ".dockerignore").read_text()
    assert ".git\n" in ignore.splitlines(True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "cannery.toml").write_text(minimal())
    assert cli("render", "dockerfile", "--catalog", str(tmp_path / "b" / "cannery.toml")).code == 0
    assert not (tmp_path / "b" / ".dockerignore").exists()


def test_commit_is_read_from_git_and_decides_the_input_digest(tmp_path: Path) -> None:
    from cannery.builder.checkout import read_checkout
    from cannery.builder.jobs import plan_build

    repo = tmp_path / "repo"
    repo.mkdir()
    head = _git_repo(repo)
    spec = _load(tmp_path, CHECKOUT)
    text = render_dockerfile(spec)
    clean = read_checkout(repo)
    assert clean.commit == head and not clean.dirty
    job = plan_build(spec, text, Lock(), checkout=clean)
    assert job.context == repo
    assert job.build_args == (("CANNERY_CHECKOUT", head),)
    (repo / "setup.py").write_text("print('changed')\n")
    dirty = read_checkout(repo)
    assert dirty.dirty and dirty.commit.startswith(head + "+dirty.")
    other = plan_build(spec, text, Lock(), checkout=dirty)
    assert other.build_args == (("CANNERY_CHECKOUT", dirty.commit),)
    assert {p.input_digest for p in job.platforms}.isdisjoint(
        p.input_digest for p in other.platforms
    )
    (repo / "new.txt").write_text("untracked\n")
    assert read_checkout(repo).commit != dirty.commit  # untracked files count too


def test_build_from_a_directory_that_is_not_a_checkout_exits_2(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cannery.toml").write_text(CHECKOUT)
    res = cli("build", "--catalog", str(tmp_path / "cannery.toml"), "--frozen",
              "--context", str(tmp_path))
    assert res.code == 2
    assert f"--context {tmp_path}: not a git checkout" in res.err


def test_buildah_gets_the_checkout_as_context_and_the_commit(tmp_path: Path) -> None:
    from cannery.builder.buildah import BuildahEngine
    from cannery.builder.checkout import read_checkout
    from cannery.builder.engine import BuildOptions
    from cannery.builder.jobs import plan_build

    repo = tmp_path / "repo"
    repo.mkdir()
    head = _git_repo(repo)
    spec = _load(tmp_path, CHECKOUT)
    job = plan_build(spec, render_dockerfile(spec), Lock(), checkout=read_checkout(repo))
    opts = BuildOptions(context=job.context or tmp_path, dockerfile=tmp_path / "Dockerfile",
                        work=tmp_path, push_repository=None, oci_output=True)
    build = BuildahEngine().steps(job, job.platforms[0], opts)[0]
    assert build[-1] == str(repo)
    assert f"CANNERY_CHECKOUT={head}" in build
