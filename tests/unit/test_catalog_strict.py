"""Strict, single-voiced validation: no coercion, no setting without effect, one report per
mistake (at the line where it is written), and the silent cases of the families issue."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.catalogs import line_of, minimal

GOOD = minimal()


def _validate(cli, tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    return path, cli("catalog", "validate", "--catalog", str(path))


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("cannery: error:")]


# (id, edit, text on the offending line, words of the one message)
COERCED = [
    (
        "bool-from-string",
        lambda t: t.replace("toolkit_build = true", 'toolkit_build = "no"'),
        'toolkit_build = "no"',
        "components.vllm-ascend.toolkit_build: Input should be a valid boolean, got string 'no'",
    ),
    (
        "int-from-string",
        lambda t: t.replace("limit = 1", 'limit = "2"'),
        'limit = "2"',
        "components.vllm-ascend.jobs.limit: Input should be a valid integer, got string '2'",
    ),
    (
        "string-from-float",
        lambda t: t.replace('python = "3.11"', "python = 3.12"),
        "python = 3.12",
        "bases.b910.python: Input should be a valid string, got float 3.12",
    ),
    (
        "bool-from-int",
        lambda t: t.replace("pin = true", "pin = 1"),
        "pin = 1",
        "components.torch.pin: Input should be a valid boolean, got integer 1",
    ),
]


@pytest.mark.parametrize(("edit", "needle", "words"), [c[1:] for c in COERCED],
                         ids=[c[0] for c in COERCED])
def test_no_coercion(tmp_path: Path, cli, edit, needle: str, words: str) -> None:  # type: ignore[no-untyped-def]
    text = edit(GOOD)
    assert text != GOOD
    path, res = _validate(cli, tmp_path, text)
    assert res.code == 2, res.err
    assert _errors(res.err) == [f"cannery: error: {path}:{line_of(text, needle)}: {words}"]


NO_EFFECT = [
    (
        "requirements-on-pip",
        lambda t: t.replace("pin = true\n", 'pin = true\nrequirements = ["r.txt"]\n'),
        'requirements = ["r.txt"]',
        "components.torch.requirements: requirements has no effect on a pip component",
    ),
    (
        "toolkit-build-on-pip",
        lambda t: t.replace("pin = true\n", "pin = true\ntoolkit_build = true\n", 1),
        "toolkit_build = true",
        "components.torch.toolkit_build: toolkit_build has no effect on a pip component",
    ),
    (
        "editable-on-pip",
        lambda t: t.replace("pin = true\n", 'pin = true\ninstall = "editable"\n'),
        'install = "editable"',
        "components.torch.install: install has no effect on a pip component",
    ),
    (
        "jobs-on-pip",
        lambda t: t.replace("pin = true\n", 'pin = true\njobs = { limit = 2, reason = "ram" }\n'),
        "jobs = { limit = 2",
        "components.torch.jobs: jobs has no effect on a pip component",
    ),
    (
        "pin-on-git",
        lambda t: t.replace('install = "editable"', 'install = "editable"\npin = true  # git'),
        "pin = true  # git",
        "components.vllm.pin: pin is only for pip components (this one is git)",
    ),
    (
        "acknowledge-nothing",
        lambda t: t.replace('"compat-torch-npu"]', '"compat-torch-npu", "compat-vllm"]'),
        '"compat-vllm"',
        "images.one.acknowledge[2]: 'compat-vllm' is acknowledged but no image that inherits "
        "it has that warning: remove it",
    ),
    # the silent drops of the families issue (#28)
    (
        "devlib-nothing-builds",
        lambda t: t.replace("toolkit_build = true\n", "").replace('soc = "ascend910b1"\n', ""),
        "devlib = ",
        "toolkits.cann852.devlib: devlib has no effect: no image with this toolkit builds a "
        "component against it (toolkit_build = true)",
    ),
    (
        "soc-only-a-label",
        lambda t: t.replace("toolkit_build = true\n", "").replace("devlib = ", "# devlib = "),
        'soc = "ascend910b1"',
        "images.one.soc: soc has no effect but a label: no component of an image that has it "
        "builds for it (toolkit_build = true), no tag names {soc}, and it picks no toolkit "
        "package; omit it for a chip-generic image",
    ),
    (
        "registry-nobody-publishes-to",
        lambda t: t.replace("[bases.b910]", '[registries.quay]\nrepository = "quay.io/a/b"\n\n'
                            "[bases.b910]"),
        "[registries.quay]",
        "registries.quay: registries.quay has no effect: no image is published to it "
        "(images.X.registry, catalog.registry, mirrors); remove it",
    ),
    (
        "version-nothing-names",
        lambda t: t.replace('name = "test"\n', 'name = "test"\nversion = "1.0"\n'),
        'version = "1.0"',
        "catalog.version: catalog.version has no effect: no tag or alias names {version}, "
        "[ci] release_tags is empty and [ci] releases is off",
    ),
]


@pytest.mark.parametrize(("edit", "needle", "words"), [c[1:] for c in NO_EFFECT],
                         ids=[c[0] for c in NO_EFFECT])
def test_field_without_effect_is_an_error(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli, edit, needle: str, words: str
) -> None:
    text = edit(GOOD)
    assert text != GOOD
    path, res = _validate(cli, tmp_path, text)
    assert res.code == 2, res.err
    errors = _errors(res.err)
    assert len(errors) == 1, res.err
    assert errors[0].startswith(f"cannery: error: {path}:{line_of(text, needle)}: {words}"), res.err


def test_unknown_os_is_an_error_with_a_suggestion(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('os = "ubuntu"', 'os = "openeulr"')
    path, res = _validate(cli, tmp_path, text)
    assert res.code == 2
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, 'openeulr')}: bases.b910.os: 'openeulr' is not "
        "one of ubuntu, debian, openeuler, fedora, rocky, almalinux, centos, rhel, alpine (did "
        "you mean 'openeuler'?)"
    ]


def test_apt_key_says_it_was_renamed(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('recipe = "r"', 'recipe = "r"\napt = ["jq"]')
    path, res = _validate(cli, tmp_path, text)
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, 'apt =')}: images.one.apt: unknown key 'apt' "
        "(renamed to 'packages')"
    ]


def test_a_mistake_in_a_parent_is_reported_once_where_written(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Four images inherit a misspelled key and a wrong type: two errors, at the parent."""
    text = GOOD.replace('recipe = "r"', 'recipe = "r"\nplatfroms = []\nsmoke_imports = "torch"')
    text += "".join(f'\n[images.c{i}]\nextends = "one"\nrecipe = "c{i}"\n' for i in range(3))
    path, res = _validate(cli, tmp_path, text)
    assert res.code == 2
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, 'platfroms')}: images.one.platfroms: unknown key "
        "'platfroms' (did you mean 'platforms'?)",
        f"cannery: error: {path}:{line_of(text, 'smoke_imports')}: images.one.smoke_imports: "
        "Input should be a valid list, got string 'torch'",
    ]


def test_a_child_mistake_is_reported_at_the_child(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('recipe = "s"', 'recipe = "s"\nsmoke_imports = "torch"')
    path, res = _validate(cli, tmp_path, text)
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, 'smoke_imports')}: images.two.smoke_imports: "
        "Input should be a valid list, got string 'torch'"
    ]


def test_a_missing_key_is_reported_at_the_entry_that_lacks_it(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('platforms = ["linux/amd64", "linux/arm64"]\n', "")
    path, res = _validate(cli, tmp_path, text)
    # `two` extends `one`: the key is missing from `one`, and said once.
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, '[images.one]')}: images.one.platforms: missing "
        "required key 'platforms'"
    ]


def test_an_inherited_whole_entry_mistake_is_said_once(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD + '\n[components.both]\npip = ["x"]\nwheel = "https://w.example.com/x.whl"\n'
    text += '\n[components.both2]\nextends = "both"\nversion = "1"\n'
    path, res = _validate(cli, tmp_path, text)
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, '[components.both]')}: components.both: give "
        "exactly one of git, pip, wheel, path"
    ], res.err


def test_catalog_option_and_positional_alias(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "catalog.toml"
    path.write_text(GOOD)
    assert cli("catalog", "validate", "--catalog", str(path)).code == 0
    assert cli("catalog", "validate", str(path)).code == 0
    other = tmp_path / "other.toml"
    res = cli("catalog", "validate", str(other), "--catalog", str(path))
    assert res.code == 2
    assert "two catalogs given" in res.err


def test_plain_value_over_a_toolkit_path_list_is_refused(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The silent case: LD_LIBRARY_PATH in an image's env replaced every CANN library path."""
    text = GOOD.replace('recipe = "r"', 'recipe = "r"\nenv.LD_LIBRARY_PATH = "/usr/local/lib"')
    path, res = _validate(cli, tmp_path, text)
    assert res.code == 2
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, 'env.LD_LIBRARY_PATH')}: "
        "images.one.env.LD_LIBRARY_PATH: LD_LIBRARY_PATH is a search path the toolkit sets; a "
        "plain value would drop the toolkit's entries: write LD_LIBRARY_PATH = { append = "
        "[...] }, prepend, or replace to say so"
    ]


X_LATEST = 'aliases = ["x", "latest"]'


def test_a_tag_has_one_owner(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('recipe = "s"', 'recipe = "s"\naliases = ["latest"]')
    text += '\n[images.three]\nextends = "one"\nrecipe = "q"\naliases = ["x", "latest"]\n'
    path, res = _validate(cli, tmp_path, text)
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, X_LATEST)}: images.three.aliases[1]: "
        "tag 'latest' in registry.example.com/test/images is claimed by images 'two' and "
        "'three': a tag has one owner"
    ]


def test_same_tag_in_another_repository_is_fine(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('recipe = "s"', 'recipe = "s"\naliases = ["latest"]\nregistry = "other"')
    text = text.replace('[bases.b910]', '[registries.other]\nrepository = "r.example.com/x"\n\n'
                        '[bases.b910]')
    text = text.replace('recipe = "r"', 'recipe = "r"\naliases = ["latest"]')
    _, res = _validate(cli, tmp_path, text)
    assert res.code == 0, res.err



def _two_registries(text: str, *names: str) -> str:
    extra = "".join(f'[registries.{n}]\nrepository = "{n}.example.com/x"\n\n' for n in names)
    return text.replace("[bases.b910]", extra + "[bases.b910]")


def test_a_tag_has_one_owner_in_every_registry_of_the_image(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """One is built into `other`; two (extending one, so its alias too) is built into `local`
    and mirrored to `other`: both would move `latest` in other.example.com/x. The error names
    the line where the alias is written."""
    text = _two_registries(GOOD, "other")
    text = text.replace('recipe = "r"', 'recipe = "r"\nregistry = "other"\naliases = ["latest"]')
    text = text.replace('recipe = "s"', 'recipe = "s"\nregistry = "local"\nmirrors = ["other"]')
    path, res = _validate(cli, tmp_path, text)
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, 'aliases = ')}: images.one.aliases[0]: "
        "tag 'latest' in other.example.com/x is claimed by images 'one' and 'two': a tag has "
        "one owner"
    ], res.err


def test_a_tag_has_one_owner_in_the_catalogs_default_mirrors(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The same, with the mirror from catalog.mirrors (two names none of its own)."""
    text = _two_registries(GOOD, "other", "third")
    text = text.replace('registry = "local"\n', 'registry = "local"\nmirrors = ["other"]\n', 1)
    text = text.replace('recipe = "r"', 'recipe = "r"\nregistry = "third"\naliases = ["latest"]')
    text = text.replace('recipe = "s"', 'recipe = "s"\nregistry = "local"')
    _, res = _validate(cli, tmp_path, text)
    assert res.code == 2
    assert "'latest' in other.example.com/x is claimed by images 'one' and 'two'" in res.err


def test_the_same_alias_in_disjoint_registries_and_mirrors_is_fine(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = _two_registries(GOOD, "other", "m1", "m2")
    text = text.replace('registry = "local"\n', "", 1)  # both name their own: no default
    text = text.replace('recipe = "r"', 'recipe = "r"\nregistry = "other"\nmirrors = ["m1"]\n'
                        'aliases = ["latest"]')
    text = text.replace('recipe = "s"', 'recipe = "s"\nregistry = "local"\nmirrors = ["m2"]')
    _, res = _validate(cli, tmp_path, text)
    assert res.code == 0, res.err

RUN_DEFECTS = [
    ("tls", "wget --no-check-certificate -O /a https://x.example.com/a",
     "tls-verification-disabled: wget --no-check-certificate downloads without verifying"),
    ("unverified", "curl -fsSL -o /i.sh https://x.example.com/i.sh && bash /i.sh",
     "unverified-download:"),
    ("source", "source /usr/local/Ascend/ascend-toolkit/set_env.sh && echo ok",
     "env-not-persisted: /usr/local/Ascend/ascend-toolkit/set_env.sh sets"),
]


@pytest.mark.parametrize(("run", "words"), [c[1:] for c in RUN_DEFECTS],
                         ids=[c[0] for c in RUN_DEFECTS])
def test_a_run_step_with_a_review_defect_refuses_to_render(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli, run: str, words: str
) -> None:
    text = GOOD.replace("[images.two]", f'[[images.one.steps]]\nrun = "{run}"\n\n[images.two]')
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("render", "dockerfile", "--catalog", str(path), "--out", str(tmp_path / "out"))
    assert res.code == 2, res.err
    errors = _errors(res.err)
    assert len(errors) >= 1
    want = f"cannery: error: {path}:{line_of(text, run)}: images.one.steps[0].run: "
    assert all(e.startswith(want) for e in errors), res.err
    assert any(words in e for e in errors), res.err
    assert not (tmp_path / "out").exists()


def test_a_clean_run_step_renders(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace(
        "[images.two]", '[[images.one.steps]]\nrun = "python3 -m pip uninstall -y triton"\n\n'
        "[images.two]"
    )
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("render", "dockerfile", "--catalog", str(path), "--out", str(tmp_path / "out"))
    assert res.code == 0, res.err


# A label or env entry that would replace one cannery writes (#28): an error naming both,
# unless it says override = true, which then replaces it (once, in the one LABEL or ENV).
REPLACES = [
    (
        "own-label",
        'labels = { "org.opencontainers.image.source" = "https://mine.example.com" }',
        "images.one.labels.org.opencontainers.image.source: label "
        "org.opencontainers.image.source would replace the one cannery writes from "
        'catalog.source: write org.opencontainers.image.source = { value = "...", override = '
        "true } to mean it",
    ),
    (
        "toolkit-env",
        'env = { ASCEND_HOME_PATH = "/opt/mine" }',
        "images.one.env.ASCEND_HOME_PATH: ASCEND_HOME_PATH would replace the toolkit's "
        "ASCEND_HOME_PATH = '${ASCEND_TOOLKIT_HOME}' (envs.cann): write ASCEND_HOME_PATH = "
        '{ value = "/opt/mine", override = true } to mean it',
    ),
    (
        "override-nothing-label",
        'labels = { "org.example.team" = { value = "npu", override = true } }',
        "images.one.labels.org.example.team: override = true, but cannery writes no label "
        "org.example.team on this image: give the plain value",
    ),
    (
        "override-nothing-env",
        'env = { HF_HOME = { value = "/data", override = true } }',
        "images.one.env.HF_HOME: override = true, but the image's toolkit sets no HF_HOME: give "
        "the plain value",
    ),
    (
        "cannery-namespace",
        'labels = { "io.cannery.soc" = "ascend910b2" }',
        "images.one.labels: label 'io.cannery.soc': the io.cannery.* labels are cannery's own "
        "(build and verify read them); use another prefix",
    ),
]


@pytest.mark.parametrize(("line", "words"), [c[1:] for c in REPLACES],
                         ids=[c[0] for c in REPLACES])
def test_replacing_what_cannery_writes_needs_override(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli, line: str, words: str
) -> None:
    text = GOOD.replace('recipe = "r"', f'recipe = "r"\n{line}')
    path, res = _validate(cli, tmp_path, text)
    assert res.code == 2, res.err
    assert _errors(res.err) == [f"cannery: error: {path}:{line_of(text, line)}: {words}"]


def test_an_override_replaces_the_label_and_the_variable(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('recipe = "r"', 'recipe = "r"\nlabels = { "org.opencontainers.image.'
                        'source" = { value = "https://mine.example.com", override = true } }\n'
                        'env = { ASCEND_HOME_PATH = { value = "/opt/mine", override = true } }')
    path = tmp_path / "catalog.toml"
    path.write_text(text)
    res = cli("render", "dockerfile", "--catalog", str(path), "--out", str(tmp_path / "d"))
    assert res.code == 0, res.err
    dockerfile = (tmp_path / "d" / "one.Dockerfile").read_text()
    assert dockerfile.count("org.opencontainers.image.source=") == 1
    assert 'org.opencontainers.image.source="https://mine.example.com"' in dockerfile
    assert "https://example.com/test" not in dockerfile
    assert "ASCEND_HOME_PATH=/opt/mine" in dockerfile


SECRET = "s3cr3tVALUE"
PRESIGNED = [
    ("installer", 'linux-{uname_arch}.run"',
     f'linux-{{uname_arch}}.run?AccessKeyId=AK&Expires=1&Signature={SECRET}"',
     "toolkits.cann852.packages[0].url", "AccessKeyId=…, Signature=…"),
    ("index", 'python_index = "https://127.0.0.1:9/simple"',
     f'python_index = "https://127.0.0.1:9/simple?token={SECRET}"',
     "catalog.python_index", "token=…"),
    ("s3", 'linux-{uname_arch}.run"',
     f'linux-{{uname_arch}}.run?X-Amz-Credential=AK&X-Amz-Signature={SECRET}"',
     "toolkits.cann852.packages[0].url", "X-Amz-Credential=…, X-Amz-Signature=…"),
]


@pytest.mark.parametrize(("old", "new", "key", "names"), [c[1:] for c in PRESIGNED],
                         ids=[c[0] for c in PRESIGNED])
def test_a_url_with_a_credential_in_its_query_is_refused(  # type: ignore[no-untyped-def]
    tmp_path: Path, cli, old: str, new: str, key: str, names: str
) -> None:
    """A presigned URL would be written into the Dockerfile and so the image history: refused
    where it is written, naming the parameters and never their values."""
    text = GOOD.replace(old, new)
    assert text != GOOD
    path, res = _validate(cli, tmp_path, text)
    assert res.code == 2, res.err
    assert _errors(res.err) == [
        f"cannery: error: {path}:{line_of(text, SECRET)}: {key}: URL carries a credential in "
        f"its query ({names}): it would stay in the Dockerfile, the lock and the image history;"
        " publish the file at a URL without one (the lock pins its sha256), or fetch it as an "
        "image's download with url_secret (the URL in a build secret, mounted for that RUN "
        "only)"
    ]
    assert SECRET not in res.err + res.out


def test_a_query_without_a_credential_is_fine(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    text = GOOD.replace('linux-{uname_arch}.run"', 'linux-{uname_arch}.run?version=1"')
    _, res = _validate(cli, tmp_path, text)
    assert res.code == 0, res.err
