"""A download whose URL is a build secret (`url_secret`): the catalog names a variable, never
the URL; what the lock, the rendered Dockerfile, error messages, child processes and the
generated workflow do with it. The build itself is tests/e2e/test_build_secret_download.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cannery.catalog.load import load_catalog
from cannery.errors import CatalogError, LockError, NetworkError
from cannery.lock import Lock, Resolvers, _secret_or_plain, secret_url, update_lock
from cannery.plan import plan, plan_image
from cannery.render.dockerfile import render_dockerfile
from cannery.render.workflow.groups import groups
from cannery.util.env import child_env
from tests.catalogs import minimal, only_components
from tests.unit.test_workflow_triggers import _rendered
from tests.unit.workflows import flat, outputs

TOKEN = "sig-do-not-show"
SECRET = f"https://bucket.example.com/data.tgz?X-Amz-Signature={TOKEN}"
DOWNLOAD = """
[[images.one.downloads]]
name = "data"
url_secret = "DATA_URL"
path = "/opt/data"
unpack = true
"""


def _catalog(tmp_path: Path, extra: str = DOWNLOAD) -> Path:
    path = tmp_path / "cannery.toml"
    path.write_text(only_components(minimal(), "torch") + extra)
    return path


def test_the_dockerfile_mounts_the_secret_for_its_one_run(tmp_path: Path) -> None:
    cat = load_catalog(_catalog(tmp_path)).catalog
    spec = plan_image(cat, "one", Lock())
    assert spec.secrets == ("DATA_URL",)
    text = render_dockerfile(spec)
    runs = [block for block in text.split("\nRUN ") if "/run/secrets" in block]
    assert len(runs) == 1  # one RUN, and it is the fetch
    assert runs[0].startswith("--mount=type=secret,id=DATA_URL,required=true set -eu;")
    assert 'data_url="$(cat /run/secrets/DATA_URL)"' in runs[0]
    assert "cannery: the URL in build secret DATA_URL: sha256" in runs[0]
    assert "${data_url}:" not in runs[0]  # a mismatch never prints the URL


@pytest.mark.parametrize(("keys", "why"), [
    ('url = "https://files.example.com/x"\nurl_secret = "DATA_URL"\n', "give url or url_secret"),
    ("", "give url or url_secret"),
    ('url_secret = "data-url"\n', "url_secret must be a name like REGISTRY_USER"),
])
def test_one_of_url_and_url_secret(tmp_path: Path, keys: str, why: str) -> None:
    extra = ('\n[[images.one.downloads]]\nname = "data"\npath = "/opt/data"\n' + keys)
    with pytest.raises(CatalogError) as exc:
        load_catalog(_catalog(tmp_path, extra))
    assert why in str(exc.value)


def test_the_lock_keys_it_by_the_variable_and_never_holds_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = load_catalog(_catalog(tmp_path)).catalog
    monkeypatch.setenv("DATA_URL", SECRET)
    fetched: list[str] = []

    def url(u: str) -> tuple[str, int]:
        return _secret_or_plain(u, lambda real: (fetched.append(real), ("e" * 64, 3))[1])

    lock = update_lock(cat, Lock(), Resolvers(base=lambda r: "sha256:" + "1" * 64,
                                              git=lambda u, r: "c" * 40, url=url))
    assert fetched.count(SECRET) == 1  # one file for every platform: fetched once
    assert lock.urls["secret:DATA_URL"].sha256 == "e" * 64
    assert TOKEN not in lock.model_dump_json()


def test_a_failure_behind_the_secret_url_is_said_without_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The trust boundary: a fetch error names the variable, never the URL or its query."""
    monkeypatch.setenv("DATA_URL", SECRET)

    def fails(real: str) -> tuple[str, int]:
        raise NetworkError(f"{real}: HTTP 403 (redirected to {real}&again)")

    with pytest.raises(NetworkError) as exc:
        _secret_or_plain("secret:DATA_URL", fails)
    assert TOKEN not in exc.value.message
    assert exc.value.message.startswith("build secret DATA_URL: $DATA_URL: HTTP 403")


@pytest.mark.parametrize(("value", "why"), [
    ("", "build secret DATA_URL is not set: export DATA_URL as the download's URL"),
    (f"http://bucket.example.com/x?Signature={TOKEN}",
     "build secret DATA_URL: not an https URL (its value is not shown)"),
])
def test_a_missing_or_plain_http_secret_is_refused_without_its_value(
    value: str, why: str
) -> None:
    with pytest.raises(LockError) as exc:
        secret_url("DATA_URL", {"DATA_URL": value})
    assert exc.value.message == why


def test_no_child_process_gets_the_variable_once_it_is_a_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTHER_URL", SECRET)
    assert "OTHER_URL" in child_env()  # an ordinary variable, until the catalog says otherwise
    secret_url("OTHER_URL")
    assert "OTHER_URL" not in child_env()
    assert "OTHER_URL" not in child_env({"OTHER_URL": SECRET})


PLAIN = """
[images.plain]
base = "b910"
toolkit = "cann852"
recipe = "p"
platforms = ["linux/amd64"]
tag = "p-{cann}-{chip}-py{python}-{recipe}"
components = ["torch"]
"""


def test_the_workflow_hands_the_secret_to_the_build_legs_only(tmp_path: Path) -> None:
    """Two images fetch the download (two extends one), one does not: they are two groups,
    and only the build call job of the first passes the secret; the reusable build workflow
    puts it in the build step's env only; no pull request builds an image that needs it."""
    path = _catalog(tmp_path, DOWNLOAD + PLAIN)
    rendered = _rendered(path)
    jobs = rendered.doc["jobs"]
    cat = load_catalog(path).catalog
    specs = plan(cat, Lock())
    shape = groups(cat, specs)
    assert [g.secrets for g in shape] == [(), ("DATA_URL",)]
    passing = [jid for jid, job in jobs.items() if "DATA_URL" in str(job.get("secrets", {}))]
    assert passing == ["build-1"]
    assert jobs["build-1"]["secrets"]["DATA_URL"] == "${{ secrets.DATA_URL }}"
    steps = rendered.job("build")["steps"]
    build = next(s for s in steps if s["name"] == "Build and push by digest")
    assert build["env"]["DATA_URL"] == "${{ secrets.DATA_URL }}"
    assert [s for s in steps if "DATA_URL" in str(s)] == [build]
    for kind in ("merge", "pr"):
        assert "DATA_URL" not in str(rendered.reusable(kind)), kind
    out = outputs(cat, specs, "workflow_dispatch")
    assert {leg["image"] for leg in flat(out["build_1"])} == {"one", "two"}
    assert {leg["image"] for leg in flat(out["build_0"])} == {"plain"}
    # a pull request that touches every image builds only the one that needs no secret
    pr = outputs(cat, specs, "pull_request", changed=[".github/workflows/cannery-images.yml"])
    assert {leg["image"] for leg in flat(pr["pr"])} == {"plain"}


def test_loading_the_catalog_hides_the_variable_from_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before any command runs git or uv (a lock that already pins the download never reads
    the variable itself)."""
    monkeypatch.setenv("EARLY_URL", SECRET)
    assert "EARLY_URL" in child_env()
    load_catalog(_catalog(tmp_path, DOWNLOAD.replace("DATA_URL", "EARLY_URL")))
    assert "EARLY_URL" not in child_env()


def test_the_nightly_update_all_leaves_a_secret_download_as_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lock-update job gets no secret: `--update all` must not need it; naming the image
    fetches it again."""
    cat = load_catalog(_catalog(tmp_path)).catalog
    monkeypatch.setenv("DATA_URL", SECRET)
    resolvers = Resolvers(base=lambda r: "sha256:" + "1" * 64, git=lambda u, r: "c" * 40,
                          url=lambda u: _secret_or_plain(u, lambda real: ("e" * 64, 3)))
    lock = update_lock(cat, Lock(), resolvers)
    monkeypatch.delenv("DATA_URL")
    again = update_lock(cat, lock, resolvers, update={"all"})
    assert again.urls["secret:DATA_URL"] == lock.urls["secret:DATA_URL"]
    with pytest.raises(LockError, match="build secret DATA_URL is not set"):
        update_lock(cat, lock, resolvers, update={"one"})


@pytest.mark.parametrize("value", ["https://[::1/x?X-Amz-Signature=" + TOKEN,
                                   "https://" + "a" * 70 + ".example.com/x?sig=" + TOKEN])
def test_a_malformed_secret_url_is_one_line_without_its_value(value: str) -> None:
    with pytest.raises(LockError) as exc:
        secret_url("DATA_URL", {"DATA_URL": value})
    assert exc.value.message == "build secret DATA_URL: not a valid URL (its value is not shown)"


@pytest.mark.parametrize("name", ["PLATFORM", "BASE_DIGEST", "CANNERY_REGISTRY_PASSWORD",
                                  "GITHUB_TOKEN", "PATH"])
def test_a_secret_name_the_build_step_uses_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(CatalogError) as exc:
        load_catalog(_catalog(tmp_path, DOWNLOAD.replace("DATA_URL", name)))
    assert f"url_secret {name!r}: the build step or its tools use that name" in str(exc.value)


def test_the_bake_file_hands_the_secret_to_its_target(tmp_path: Path) -> None:
    import json

    from cannery.render.bake import render_bake

    cat = load_catalog(_catalog(tmp_path)).catalog
    specs = [plan_image(cat, n, Lock()) for n in cat.images]
    doc = json.loads(render_bake(specs, {s.name: f"dockerfiles/{s.name}.Dockerfile"
                                         for s in specs}))
    assert doc["target"]["one"]["secret"] == ["id=DATA_URL,env=DATA_URL"]
