"""`cannery compare`: one small written pair per category. Each test goes through the category
registry (compare.dockerfile.CATEGORIES / compare.workflow.CATEGORIES), so dropping a
category's comparison from it fails that category's test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cannery.compare.dockerfile import CATEGORIES, compare_facts
from cannery.compare.model import Difference
from cannery.lint.facts.dockerfile import parse_dockerfile


def diff(original: str, new: str) -> list[Difference]:
    return compare_facts(parse_dockerfile("original", original, {}),
                         parse_dockerfile("new", new, {}))


def found(diffs: list[Difference], category: str) -> set[tuple[str, str]]:
    return {(d.item, d.change) for d in diffs if d.category == category}


def one(diffs: list[Difference], category: str, item: str) -> Difference:
    hits = [d for d in diffs if d.category == category and d.item == item]
    assert len(hits) == 1, (category, item, [(d.category, d.item) for d in diffs])
    return hits[0]


def test_identical_files_have_no_difference() -> None:
    text = "FROM ubuntu:22.04\nRUN apt-get update && apt-get install -y git\nENV A=1\n"
    assert diff(text, text) == []


def test_every_category_is_registered_once() -> None:
    names = [c.NAME for c in CATEGORIES]
    assert names == ["base", "packages", "pip", "downloads", "git", "copies", "env", "settings",
                     "labels", "order", "runs"]


# ---------------------------------------------------------------- base
def test_base_reference_through_stages_and_per_arch_stage() -> None:
    original = "FROM ubuntu:22.04 AS core\nFROM core\nRUN true\n"
    new = ("ARG TARGETARCH\nFROM ubuntu:24.04 AS arch-amd64\nFROM ubuntu:24.04 AS arch-arm64\n"
           "FROM arch-${TARGETARCH} AS image\nRUN true\n")
    d = one(diff(original, new), "base", "FROM")
    assert (d.change, d.original, d.new, d.arches) == ("changed", "ubuntu:22.04", "ubuntu:24.04",
                                                       [])


def test_base_digest_pin_is_named_as_such() -> None:
    d = one(diff("FROM ubuntu:22.04\n", "FROM ubuntu:22.04@sha256:" + "a" * 64 + "\n"),
            "base", "FROM")
    assert "digest" in d.note


def test_base_docker_hub_names_are_compared_as_docker_resolves_them() -> None:
    assert found(diff("FROM ubuntu:22.04\n", "FROM docker.io/library/ubuntu:22.04\n"),
                 "base") == set()
    assert found(diff("FROM openeuler/openeuler:24.03\n",
                      "FROM index.docker.io/openeuler/openeuler:24.03\n"), "base") == set()
    d = one(diff("FROM openeuler/openeuler:24.03\n",
                 "FROM docker.io/openeuler/openeuler:24.03-lts\n"), "base", "FROM")
    assert (d.original, d.new, d.note) == ("openeuler/openeuler:24.03",
                                           "docker.io/openeuler/openeuler:24.03-lts", "")
    pinned = one(diff("FROM ubuntu:22.04\n",
                      "FROM docker.io/library/ubuntu:22.04@sha256:" + "a" * 64 + "\n"),
                 "base", "FROM")
    assert "digest" in pinned.note


# ---------------------------------------------------------------- packages
def test_packages_command_substitution_among_loop_words_is_one_item() -> None:
    original = "FROM ubuntu\nRUN apt-get install -y git\n"
    new = ("FROM ubuntu\nRUN missing=$(for p in git $(cat /opt/list); do echo \"$p\"; done);"
           " apt-get install -y ${missing}\n")
    assert found(diff(original, new), "packages") == {("apt:$(cat /opt/list)", "added")}


def test_packages_per_manager_and_recommends() -> None:
    original = "FROM ubuntu\nRUN apt-get update && apt-get install -y wget vim git\n"
    new = ("FROM ubuntu\nRUN set -eu; missing=$(for p in git wget curl; do dpkg-query -W \"$p\""
           " || echo \"$p\"; done); apt-get update;"
           " DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends"
           " ${missing}\n")
    diffs = diff(original, new)
    assert found(diffs, "packages") == {
        ("apt:vim", "removed"), ("apt:curl", "added"),
        ("apt:--no-install-recommends", "added"),
    }
    assert "git wget" in one(diffs, "packages", "apt:--no-install-recommends").note


def test_packages_yum_against_dnf_and_weak_deps() -> None:
    original = "FROM openeuler\nRUN yum install -y gcc lapack-devel && yum clean all\n"
    new = "FROM openeuler\nRUN dnf install -y --setopt=install_weak_deps=False gcc blas-devel\n"
    assert found(diff(original, new), "packages") == {
        ("dnf:lapack-devel", "removed"), ("dnf:blas-devel", "added"),
        ("dnf:manager", "changed"), ("dnf:install_weak_deps=False", "added"),
    }


def test_packages_removed_later_are_not_installed() -> None:
    original = "FROM alpine\nRUN apk add --no-cache curl make && apk del make\n"
    new = "FROM alpine\nRUN apk add curl\n"
    assert found(diff(original, new), "packages") == set()


# ---------------------------------------------------------------- pip
def test_pip_specifier_index_and_flags() -> None:
    original = ("FROM python\nRUN pip install torch==2.1.0 'numpy<2' && "
                "pip install --no-deps -i https://a.example/simple verl\n")
    new = ("FROM python\nRUN python3 -m pip install --no-cache-dir torch==2.2.0 'numpy<2' && "
           "python3 -m pip install --index-url https://b.example/simple verl\n")
    diffs = diff(original, new)
    assert found(diffs, "pip") == {("torch", "changed"), ("verl:index", "changed"),
                                   ("verl:flags", "changed")}
    assert (one(diffs, "pip", "torch").original, one(diffs, "pip", "torch").new) == (
        "==2.1.0", "==2.2.0")
    flags = one(diffs, "pip", "verl:flags")
    assert (flags.original, flags.new) == ("--no-deps", "none")
    index = one(diffs, "pip", "verl:index")
    assert (index.original, index.new) == ("index https://a.example/simple",
                                           "index https://b.example/simple")


def test_pip_path_in_a_git_checkout_is_named_by_the_repository() -> None:
    original = ("FROM python\nRUN git clone https://github.com/o/verl.git /verl && "
                "pip install -e /verl\n")
    new = ("FROM python\nRUN git clone https://github.com/o/verl /opt/src/verl && "
           "cd /opt/src/verl && pip install -e . --no-deps\n")
    verl = one(diff(original, new), "pip", "https://github.com/o/verl:flags")
    assert verl.change == "changed" and verl.new == "--no-deps"


def test_pip_uninstall_and_set_before_positional_args() -> None:
    original = "FROM python\nRUN pip install a==1 && pip uninstall -y triton\n"
    new = ("FROM python\nARG TARGETARCH\nRUN case \"${TARGETARCH}\" in "
           "amd64) set -- --extra-index-url=https://x.example/cpu ;; arm64) set -- ;; esac; "
           "pip install \"$@\" a==1\n")
    diffs = diff(original, new)
    assert ("uninstall:triton", "removed") in found(diffs, "pip")
    a = one(diffs, "pip", "a:index")
    assert a.arches == ["amd64"] and a.new == "extra index https://x.example/cpu"


# ---------------------------------------------------------------- downloads
def test_downloads_checksum_per_url_and_arch() -> None:
    original = ("FROM ubuntu\nRUN curl -fsSLO https://f.example/tool-$(uname -m).run && "
                "bash tool-$(uname -m).run\n")
    new = ("FROM ubuntu\nARG TARGETARCH\nRUN case \"${TARGETARCH}\" in "
           "amd64) url=https://f.example/tool-x86_64.run; sum=" + "1" * 64 + " ;; "
           "arm64) url=https://f.example/tool-aarch64.run; sum=" + "2" * 64 + " ;; esac; "
           "curl -fsSL -o /tmp/tool.run \"${url}\"; "
           "echo \"${sum}  /tmp/tool.run\" | sha256sum -c -; bash /tmp/tool.run\n")
    diffs = [d for d in diff(original, new) if d.category == "downloads"]
    assert {(d.item, d.original, d.new, tuple(d.arches)) for d in diffs} == {
        ("https://f.example/tool-x86_64.run", "no checksum", "sha256:" + "1" * 64, ("amd64",)),
        ("https://f.example/tool-aarch64.run", "no checksum", "sha256:" + "2" * 64, ("arm64",)),
    }


def test_downloads_add_with_checksum() -> None:
    original = "FROM ubuntu\nADD https://f.example/a.tgz /tmp/\n"
    new = "FROM ubuntu\nADD --checksum=sha256:" + "3" * 64 + " https://f.example/a.tgz /tmp/\n"
    assert found(diff(original, new), "downloads") == {("https://f.example/a.tgz", "changed")}


# ---------------------------------------------------------------- git
def test_git_ref_submodules_depth_and_destination() -> None:
    original = ("FROM ubuntu\nWORKDIR /work\nRUN git clone --depth 1 -b v1.0 --recursive "
                "https://github.com/o/r.git && cd r && git submodule update --init\n")
    new = ("FROM ubuntu\nRUN git init -q /opt/src/r; "
           "git -C /opt/src/r fetch -q --depth 1 https://github.com/o/r.git 0123abcd; "
           "git -C /opt/src/r checkout -q FETCH_HEAD\n")
    diffs = diff(original, new)
    assert {(d.item, d.original, d.new) for d in diffs if d.category == "git"} == {
        ("https://github.com/o/r:ref", "v1.0", "0123abcd"),
        ("https://github.com/o/r:submodules", "yes", "no"),
        ("https://github.com/o/r:dest", "/work/r", "/opt/src/r"),
    }


def test_git_source_only_on_one_side() -> None:
    original = "FROM ubuntu\nRUN git clone https://github.com/o/recipe /recipe\n"
    assert found(diff(original, "FROM ubuntu\n"), "git") == {
        ("https://github.com/o/recipe", "removed")}


# ---------------------------------------------------------------- copies
def test_copies_by_destination() -> None:
    original = ("FROM ubuntu AS build\nFROM ubuntu\nWORKDIR /app\nCOPY . src/\n"
                "COPY entrypoint.sh /usr/local/bin/\nCOPY --from=build /out /opt/out\n"
                "ADD https://f.example/a.tgz /tmp/\n")
    new = ("FROM ubuntu AS build\nFROM ubuntu\nCOPY . /opt/src/app\n"
           "COPY --from=build /out/ /opt/out\n")
    diffs = diff(original, new)
    assert found(diffs, "copies") == {("/app/src", "removed"), ("/usr/local/bin", "removed"),
                                      ("/opt/src/app", "added")}
    assert one(diffs, "copies", "/app/src").original == ". from the build context"


# ---------------------------------------------------------------- env
def test_env_values_and_path_lists_element_by_element() -> None:
    original = ("FROM ubuntu\nENV HOME_A=/opt/a\nENV PATH=$HOME_A/bin:/opt/b/bin:$PATH "
                "BATCH=1 PYTHONPATH=/Megatron/src\n")
    new = ("FROM ubuntu\nENV HOME_A=/opt/a\n"
           "ENV PATH=/opt/b/bin:/opt/a/bin:/opt/c/bin${PATH:+:${PATH}} BATCH=0\n")
    diffs = diff(original, new)
    assert found(diffs, "env") == {
        ("PATH", "added"), ("PATH", "moved"), ("BATCH", "changed"), ("PYTHONPATH", "removed")}
    assert one(diffs, "env", "BATCH").new == "0"
    assert [d.new for d in diffs if d.item == "PATH" and d.change == "added"] == ["/opt/c/bin"]


def test_env_inherited_value_spellings_agree() -> None:
    original = "FROM ubuntu\nENV LD_LIBRARY_PATH=/x/lib:$LD_LIBRARY_PATH\n"
    new = "FROM ubuntu\nENV LD_LIBRARY_PATH=/x/lib${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}\n"
    assert found(diff(original, new), "env") == set()


def test_env_replacing_an_inherited_path_list_is_named() -> None:
    original = "FROM ubuntu\nENV LD_LIBRARY_PATH=/x/lib:$LD_LIBRARY_PATH\n"
    new = "FROM ubuntu\nENV LD_LIBRARY_PATH=/x/lib:/y/lib\n"
    assert found(diff(original, new), "env") == {
        ("LD_LIBRARY_PATH", "removed"), ("LD_LIBRARY_PATH", "added")}


# ---------------------------------------------------------------- settings, labels
@pytest.mark.parametrize(("line_a", "line_b", "item"), [
    ("WORKDIR /a", "WORKDIR /b", "WORKDIR"),
    ("USER root", "USER app", "USER"),
    ('ENTRYPOINT ["/e.sh"]', 'ENTRYPOINT ["/f.sh"]', "ENTRYPOINT"),
    ('CMD ["bash"]', "CMD bash", "CMD"),
    ("EXPOSE 8000", "EXPOSE 8000/udp", "EXPOSE"),
    ('SHELL ["/bin/bash", "-c"]', 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]', "SHELL"),
])
def test_settings(line_a: str, line_b: str, item: str) -> None:
    diffs = diff(f"FROM ubuntu\n{line_a}\n", f"FROM ubuntu\n{line_b}\n")
    assert found(diffs, "settings") == {(item, "changed")}


def test_labels() -> None:
    original = 'FROM ubuntu\nARG V=1\nLABEL a="x" b="${V}"\n'
    new = 'FROM ubuntu\nLABEL a="y" c=z\n'
    assert found(diff(original, new), "labels") == {
        ("a", "changed"), ("b", "removed"), ("c", "added")}


# ---------------------------------------------------------------- order
def test_order_of_installs_and_uninstall() -> None:
    original = ("FROM python\nRUN pip install -e /app\nRUN pip install -r /app/metrics.txt\n"
                "RUN pip uninstall -y triton\nRUN pip install triton-ascend\n")
    new = ("FROM python\nRUN pip install -r /app/metrics.txt\nRUN pip install -e /app\n"
           "RUN pip install triton-ascend\nRUN pip uninstall -y triton\n")
    diffs = diff(original, new)
    assert found(diffs, "order") == {
        ("install /app", "moved"), ("uninstall triton", "moved")}
    assert one(diffs, "order", "uninstall triton").new == "after install triton-ascend"


# ---------------------------------------------------------------- runs
def test_runs_of_the_original_no_new_step_accounts_for() -> None:
    original = ("FROM ubuntu\nRUN userdel -r ubuntu && groupadd -g 1000 app && "
                "apt-get update && apt-get install -y git && rm -rf /var/lib/apt/lists/*\n"
                "RUN echo done && mkdir -p /x && ln -s /x /y\n")
    new = "FROM ubuntu\nRUN groupadd -g 1000 app\nRUN apt-get install -y git\n"
    diffs = diff(original, new)
    assert found(diffs, "runs") == {("userdel -r ubuntu", "removed"),
                                    ("ln -s /x /y", "removed")}
    assert one(diffs, "runs", "userdel -r ubuntu").original == "line 2"


def test_runs_writing_a_file_is_not_housekeeping() -> None:
    original = "FROM ubuntu\nRUN echo 'x' >> /etc/profile\n"
    assert found(diff(original, "FROM ubuntu\n"), "runs") == {
        ("echo 'x' >> /etc/profile", "removed")}


# ---------------------------------------------------------------- workflows
ORIGINAL_WORKFLOW = """\
name: images
on:
  push:
    tags: ["v*"]
  workflow_dispatch:
  pull_request:
    branches: [main]
jobs:
  build:
    runs-on: ${{ matrix.runner }}
    strategy:
      matrix:
        runner: [linux-amd64-npu, linux-arm64-npu]
    steps:
      - uses: docker/login-action@v3
        if: ${{ github.event_name != 'pull_request' }}
        with:
          registry: quay.io
          username: ${{ vars.QUAY_USER }}
          password: ${{ secrets.QUAY_TOKEN }}
      - id: meta
        uses: docker/metadata-action@v5
        with:
          images: quay.io/o/img
          tags: |
            type=ref,event=tag
            type=raw,value=latest,enable=${{ github.event_name == 'workflow_dispatch' }}
      - uses: docker/build-push-action@v6
        with:
          push: ${{ github.event_name != 'pull_request' }}
          tags: ${{ steps.meta.outputs.tags }}
"""

NEW_WORKFLOW = """\
name: images
on:
  push:
    branches: [main]
    tags: ["v*"]
  pull_request:
    branches: [main]
jobs:
  build:
    if: ${{ github.event_name != 'pull_request' }}
    runs-on: ubuntu-24.04-arm
    steps:
      - name: push
        env:
          USER: ${{ secrets.QUAY_USER }}
          PASSWORD: ${{ secrets.QUAY_TOKEN }}
        run: |
          echo "$PASSWORD" | docker login quay.io -u "$USER" --password-stdin
          docker push quay.io/o/img:nightly
  test:
    if: github.event_name == 'pull_request'
    runs-on: ubuntu-latest
    steps:
      - run: docker build .
"""


def wdiff(original: str = ORIGINAL_WORKFLOW, new: str = NEW_WORKFLOW) -> list[Difference]:
    from cannery.compare.workflow import compare_workflows, load_view
    from cannery.lint.facts.workflow import parse_workflow

    return compare_workflows(load_view("a.yml", original, parse_workflow("a.yml", original)),
                             load_view("b.yml", new, parse_workflow("b.yml", new)))


def test_workflow_categories_are_registered() -> None:
    from cannery.compare.workflow import category_names

    assert category_names() == ["triggers", "filters", "publish", "tags", "registries",
                                "secrets", "runners"]


def test_workflow_triggers() -> None:
    assert found(wdiff(), "triggers") == {("workflow_dispatch", "removed")}


def test_workflow_branch_and_tag_filters() -> None:
    diffs = wdiff()
    assert found(diffs, "filters") == {("push.branches", "added")}
    assert one(diffs, "filters", "push.branches").new == "main"


def test_workflow_which_events_publish() -> None:
    diffs = wdiff()
    # both publish on push; dispatch is gone with its trigger; pull requests publish on neither
    assert found(diffs, "publish") == {("workflow_dispatch", "removed")}
    gone = ORIGINAL_WORKFLOW.replace(
        "push: ${{ github.event_name != 'pull_request' }}", "push: ${{ github.event_name == "
        "'workflow_dispatch' }}")
    assert found(wdiff(gone), "publish") == {("workflow_dispatch", "removed"),
                                             ("push", "changed")}


def test_workflow_tags_per_event() -> None:
    diffs = wdiff()
    assert {(d.item, d.change, d.original, d.new) for d in diffs if d.category == "tags"} == {
        ("type=ref,event=tag", "removed", "on push", None),
        ("type=raw,value=latest", "removed", "on workflow_dispatch", None),
        ("quay.io/o/img:nightly", "added", None, "on push"),
    }


def test_workflow_registries() -> None:
    new = NEW_WORKFLOW.replace("docker login quay.io", "docker login ghcr.io")
    assert found(wdiff(new=new), "registries") == {("quay.io", "removed"), ("ghcr.io", "added")}


def test_workflow_registry_of_a_login_skips_option_values_and_names_its_host() -> None:
    new = NEW_WORKFLOW.replace(
        'echo "$PASSWORD" | docker login quay.io -u "$USER" --password-stdin',
        'echo "$PASSWORD" | skopeo login --username "${{ secrets.QUAY_USER }}" --password-stdin'
        ' quay.io/o')
    assert found(wdiff(new=new), "registries") == set()


def test_workflow_secrets_and_vars() -> None:
    assert found(wdiff(), "secrets") == {("vars.QUAY_USER", "removed"),
                                         ("secrets.QUAY_USER", "added")}


def test_workflow_runners_with_matrix() -> None:
    assert found(wdiff(), "runners") == {
        ("linux-amd64-npu", "removed"), ("linux-arm64-npu", "removed"),
        ("ubuntu-24.04-arm", "added"), ("ubuntu-latest", "added")}


@pytest.mark.parametrize(("text", "event", "want"), [
    ("${{ github.event_name != 'pull_request' }}", "push", True),
    ("github.event_name == 'pull_request'", "push", False),
    ("${{ github.event_name == 'push' && startsWith(github.ref, 'refs/tags/') }}", "push", None),
    ("${{ github.event_name == 'push' && startsWith(github.ref, 'refs/tags/') }}", "schedule",
     False),
    ("${{ !(github.event_name == 'schedule') || inputs.x }}", "schedule", None),
    ("${{ always() }}", "push", True),
])
def test_expression_evaluation_per_event(text: str, event: str, want: bool | None) -> None:
    from cannery.compare.expr import evaluate

    assert evaluate(text, event) is want


# ---------------------------------------------------------------- the command
def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


ORIG = "FROM ubuntu:22.04\nRUN apt-get install -y wget git\nWORKDIR /app\n"
NEW = "FROM ubuntu:22.04\nRUN apt-get install -y --no-install-recommends git\nWORKDIR /app\n"


def test_cli_same_files_exit_0(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    a = write(tmp_path / "a" / "Dockerfile", ORIG)
    r = cli("compare", str(a), str(a))
    assert r.code == 0, r.err
    assert "0 difference(s)" in r.out


def test_cli_text_groups_by_image_and_category_exit_1(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    a = write(tmp_path / "a" / "Dockerfile", ORIG)
    b = write(tmp_path / "b" / "Dockerfile", NEW)
    r = cli("compare", str(a), str(b))
    assert r.code == 1
    assert r.out.splitlines()[:4] == [
        f"Dockerfile (dockerfile): {a}  ->  {b}",
        "  packages",
        "    - apt:wget: installed (original only)",
        "    + apt:--no-install-recommends: --no-install-recommends (new only) "
        "[installs git with it]",
    ]
    assert r.out.splitlines()[-1] == "2 difference(s): 2 not accepted, 0 accepted"


def test_cli_json_schema_and_accepted_list(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    a = write(tmp_path / "a" / "Dockerfile", ORIG)
    b = write(tmp_path / "b" / "Dockerfile", NEW)
    accepted = write(tmp_path / "compare-accepted.toml", """\
[[accepted]]
image = "*"
category = "packages"
item = "apt:--no-install-*"
why = "smaller image; nothing uses the recommends"

[[accepted]]
image = "*"
category = "env"
item = "NOT_THERE"
why = "a stale entry"
""")
    r = cli("compare", str(a), str(b), "--json", "--accepted", str(accepted))
    assert r.code == 1  # apt:wget is not accepted
    doc = json.loads(r.out)
    assert doc["schema"] == "cannery.compare/1"
    assert doc["summary"] == {"differences": 2, "accepted": 1, "failing": 1}
    (image,) = doc["images"]
    assert image["image"] == "Dockerfile" and image["kind"] == "dockerfile"
    assert image["differences"][1] == {
        "category": "packages", "item": "apt:--no-install-recommends", "change": "added",
        "original": None, "new": "--no-install-recommends", "note": "installs git with it",
        "arches": [], "accepted": True, "why": "smaller image; nothing uses the recommends"}
    assert [u["item"] for u in doc["unused_accepted"]] == ["NOT_THERE"]
    write(accepted, accepted.read_text() + """
[[accepted]]
image = "Dockerfile"
category = "packages"
item = "apt:wget"
change = "removed"
why = "nothing in the image calls wget"
""")
    r = cli("compare", str(a), str(b), "--accepted", str(accepted))
    assert r.code == 0, r.out
    assert "        accepted: nothing in the image calls wget" in r.out


def test_cli_directories_pair_files_by_path(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    write(tmp_path / "a" / "x" / "Dockerfile", ORIG)
    write(tmp_path / "b" / "x" / "Dockerfile", ORIG)
    write(tmp_path / "a" / "y.Dockerfile", ORIG)
    write(tmp_path / "a" / ".github" / "workflows" / "w.yml", ORIGINAL_WORKFLOW)
    write(tmp_path / "b" / ".github" / "workflows" / "w.yml", ORIGINAL_WORKFLOW)
    r = cli("compare", str(tmp_path / "a"), str(tmp_path / "b"), "--json")
    assert r.code == 1
    doc = json.loads(r.out)
    assert [(i["image"], i["kind"], len(i["differences"])) for i in doc["images"]] == [
        (".github/workflows/w.yml", "workflow", 0), ("x/Dockerfile", "dockerfile", 0),
        ("y.Dockerfile", "file", 1)]


@pytest.mark.parametrize(("args", "message"), [
    (["{a}"], "give ORIGINAL and NEW"),
    (["{a}", "{tmp}/missing"], "missing: no such file"),
    (["{a}", "{tmp}"], "give two files or two directories"),
    (["{a}", "{bad}"], "bad/Dockerfile:2: unknown instruction"),
    (["{a}", "{a}", "--accepted", "{acc}"], "accepted[0]: category: unknown 'colour'"),
    (["--original", "{tmp}"], "--original needs --catalog"),
])
def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, cli, args: list[str],  # type: ignore[no-untyped-def]
                                          message: str) -> None:
    a = write(tmp_path / "a" / "Dockerfile", ORIG)
    bad = write(tmp_path / "bad" / "Dockerfile", "FROM x\nFROB y\n")
    acc = write(tmp_path / "acc.toml", '[[accepted]]\nimage = "*"\ncategory = "colour"\n'
                'item = "x"\nwhy = "y"\n')
    values = {"a": str(a), "tmp": str(tmp_path), "bad": str(bad), "acc": str(acc)}
    r = cli("compare", *[x.format(**values) for x in args])
    assert r.code == 2
    assert r.out == ""
    assert len(r.err.strip().splitlines()) == 1 and message in r.err, r.err
    assert "Traceback" not in r.err


def test_cli_catalog_maps_each_image_to_its_original(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The rendered side is rendered in memory (nothing written); `two` names no original."""
    from tests.catalogs import minimal

    text = minimal().replace('acknowledge = ["compat-cann", "compat-torch-npu"]\n',
                             'acknowledge = ["compat-cann", "compat-torch-npu"]\n'
                             'original = "docker/one.Dockerfile"\n', 1)
    text = text.replace('[images.two]\nextends = "one"\n', '[images.two]\nextends = "one"\n'
                        'original = "docker/two.Dockerfile"\n')
    catalog = write(tmp_path / "repo" / "cannery.toml", text)
    write(tmp_path / "upstream" / "docker" / "one.Dockerfile",
          "FROM registry.example.com/cann:8.5.1-910b-ubuntu22.04-py3.11\n"
          "RUN pip install torch==2.9.0 torch_npu==2.9.0\nUSER app\n")
    before = sorted(p.name for p in (tmp_path / "repo").iterdir())
    r = cli("compare", "--catalog", str(catalog), "--original", str(tmp_path / "upstream"),
            "one", "--json")
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    (image,) = doc["images"]
    assert image["image"] == "one"
    assert image["new"] == f"one (rendered from {catalog})"
    got = {(d["category"], d["item"], d["change"]) for d in image["differences"]}
    assert ("settings", "USER", "changed") in got
    assert ("pip", "torch:index", "changed") in got  # the catalog's index
    assert sorted(p.name for p in (tmp_path / "repo").iterdir()) == before
    # the list beside the catalog is read by default: accept everything of image one
    write(tmp_path / "repo" / "compare-accepted.toml",
          '[[accepted]]\nimage = "one"\ncategory = "settings"\nitem = "*"\nwhy = "w"\n')
    r = cli("compare", "--catalog", str(catalog), "--original", str(tmp_path / "upstream"),
            "one", "--json")
    assert json.loads(r.out)["summary"]["accepted"] >= 1
    # `two` names a file the checkout lacks: exit 2, one line
    r = cli("compare", "--catalog", str(catalog), "--original", str(tmp_path / "upstream"))
    assert r.code == 2 and r.out == ""
    assert r.err.strip() == (f"cannery: error: {tmp_path}/upstream/docker/two.Dockerfile: "
                             "no such file")


def test_cli_catalog_compares_only_the_platforms_the_image_is_built_for(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """An arm64-only image's rendered file has no amd64 stage: compared for amd64 as well, its
    FROM would read `arch-amd64` and its per-arch ENV would differ, none of which is built."""
    from tests.catalogs import minimal

    text = minimal().replace('platforms = ["linux/amd64", "linux/arm64"]\n',
                             'platforms = ["linux/arm64"]\noriginal = "Dockerfile"\n', 1)
    catalog = write(tmp_path / "repo" / "cannery.toml", text)
    write(tmp_path / "upstream" / "Dockerfile",
          "FROM registry.example.com/cann:8.5.1-910b-ubuntu22.04-py3.11\n")
    r = cli("compare", "--catalog", str(catalog), "--original", str(tmp_path / "upstream"),
            "one", "--json")
    assert r.code == 1, r.err
    (image,) = json.loads(r.out)["images"]
    assert [d for d in image["differences"] if d["category"] == "base"] == []
    assert [d for d in image["differences"] if d["arches"]] == []
    assert any(d["category"] == "env" for d in image["differences"])  # compared, for arm64


def test_cli_catalog_compares_the_rendered_workflow_with_ci_original(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """`[ci] original`: the rendered workflow (in memory) against the checkout's; what its
    `cannery build --push` publishes comes from the catalog's registries, tags and aliases."""
    from tests.catalogs import minimal, write_ci_lock

    catalog = write(tmp_path / "repo" / "cannery.toml",
                    minimal() + '\n[ci]\noriginal = ".github/workflows/images.yml"\n')
    write(tmp_path / "upstream" / ".github" / "workflows" / "images.yml", ORIGINAL_WORKFLOW)
    write_ci_lock(catalog)  # the workflow is rendered only with CI's hashed pins of cannery
    r = cli("compare", "--catalog", str(catalog), "--original", str(tmp_path / "upstream"),
            "--json")
    assert r.code == 1, r.err
    (workflow,) = [i for i in json.loads(r.out)["images"] if i["kind"] == "workflow"]
    assert workflow["image"] == "workflow"
    got = {(d["category"], d["item"], d["change"]) for d in workflow["differences"]}
    assert ("tags", "registry.example.com/test/images:t-8.5.2-910b-py3.11-r", "added") in got
    assert ("registries", "registry.example.com", "added") in got
    assert ("triggers", "workflow_dispatch", "removed") not in got  # both have it


def test_arch_branches_of_if_and_case_are_taken_per_arch() -> None:
    original = ("FROM ubuntu\nRUN if [ \"$(uname -m)\" = \"x86_64\" ]; then "
                "pip install a==1; elif [[ $(uname -m) == aarch64 ]]; then pip install a==2; "
                "else pip install a==3; fi\n")
    new = "FROM ubuntu\nRUN pip install a==1\n"
    (d,) = [d for d in diff(original, new) if d.category == "pip"]
    assert (d.item, d.original, d.new, d.arches) == ("a", "==2", "==1", ["arm64"])


def test_pip_index_from_config_exports_and_arg_branches() -> None:
    """`pip config set` reaches later installs, an exported PIP_EXTRA_INDEX_URL the rest of its
    RUN; an `if [ -n "$ARG" ]` takes the branch the ARG's default gives."""
    original = ("FROM python\nARG COMMIT=\"\"\nARG IDX=https://i.example/simple/\n"
                "RUN pip install a==1\n"
                "RUN pip config set global.index-url ${IDX}\n"
                "RUN export PIP_EXTRA_INDEX_URL=https://e.example/simple && pip install b==1\n"
                "RUN if [ -n \"$COMMIT\" ]; then pip install c==1; else pip install c==2; fi\n")
    new = ("FROM python\nRUN pip install a==1 b==1 c==2 --index-url https://i.example/simple "
           "--extra-index-url https://e.example/simple\n")
    diffs = diff(original, new)
    # c==2 on both sides (the else branch); b's indexes agree; a ran before the config
    assert found(diffs, "pip") == {("a:index", "changed"), ("c:index", "changed")}
    assert one(diffs, "pip", "a:index").original == "the default index"
    assert one(diffs, "pip", "c:index").original == "index https://i.example/simple"


def test_workflow_metadata_latest_flavor_and_images_registry() -> None:
    meta = ORIGINAL_WORKFLOW.replace(
        "            type=ref,event=tag\n", "            type=pep440,pattern={{raw}}\n").replace(
        "          images: quay.io/o/img\n", "          images: |\n            ghcr.io/o/img\n")
    diffs = wdiff(ORIGINAL_WORKFLOW, meta)
    assert found(diffs, "tags") == {("type=ref,event=tag", "removed"),
                                    ("type=pep440,pattern={{raw}}", "added"),
                                    ("latest", "added")}  # flavor latest=auto with pep440
    assert one(diffs, "tags", "latest").new == "on push"
    assert found(diffs, "registries") == {("ghcr.io", "added")}  # quay.io: the login
    forced = meta.replace("          tags: |\n",
                          "          flavor: latest=true\n          tags: |\n")
    assert one(wdiff(ORIGINAL_WORKFLOW, forced), "tags", "latest").new == (
        "on push, workflow_dispatch")


def test_runs_message_to_stderr_is_housekeeping_a_file_written_is_not() -> None:
    original = ("FROM ubuntu\nRUN echo 'building' >&2 && echo x > /dev/null && "
                "echo hi &> /etc/motd\n")
    assert found(diff(original, "FROM ubuntu\n"), "runs") == {("echo hi &> /etc/motd",
                                                              "removed")}


def test_catalog_mode_on_an_example_whose_originals_are_its_rendered_files(
        tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Every image of the vllm-ascend example, as the catalog renders it in memory, against
    the rendered file committed beside it: no difference (the parse is the same both ways);
    the workflow's only differences are the tags its `cannery build --push` publishes, which
    a workflow file read alone cannot know."""
    import re
    import shutil

    from tests.conftest import ROOT

    repo = tmp_path / "vllm-ascend"
    shutil.copytree(ROOT / "examples" / "vllm-ascend", repo)
    # the accepted list and the originals the catalog names are about the upstream files
    (repo / "compare-accepted.toml").unlink(missing_ok=True)
    text = (repo / "cannery.toml").read_text(encoding="utf-8")
    text = re.sub(r"^original = .*\n", "", text, flags=re.M)
    names = re.findall(r"^\[images\.([^\]]+)\]$", text, flags=re.M)
    for name in names:
        text = text.replace(f"[images.{name}]\n",
                            f'[images.{name}]\noriginal = "docker/{name}.Dockerfile"\n', 1)
    text = text.replace("[ci]\n", '[ci]\noriginal = ".github/workflows/cannery-images.yml"\n', 1)
    (repo / "cannery.toml").write_text(text, encoding="utf-8")
    r = cli("compare", "--catalog", str(repo / "cannery.toml"), "--original", str(repo),
            "--json")
    doc = json.loads(r.out)
    images = [i for i in doc["images"] if i["kind"] == "dockerfile"]
    assert len(images) == len(names) == 16
    assert [i["differences"] for i in images] == [[]] * 16
    (workflow,) = [i for i in doc["images"] if i["kind"] == "workflow"]
    assert {d["category"] for d in workflow["differences"]} == {"tags"}
    assert r.code == 1


def test_pip_editable_values_are_paths_and_git_urls_name_the_repository() -> None:
    """`-e MindSpeed`, `-e.` and `-e python[all_npu]` are directories of the working directory
    (the clone), not package names; `git+URL@ref` pairs with a checkout of URL. Each was a
    false difference against verl's Dockerfiles."""
    original = ("FROM python\nRUN git clone https://gitcode.com/A/MindSpeed.git && "
                "git clone https://github.com/o/vllm.git && git clone https://github.com/o/sg.git"
                " && pip install -e MindSpeed && cd vllm && pip install -v -e. && cd .. && "
                "cd sg && pip install -e python[all_npu] && "
                "pip install git+https://github.com/o/mlm.git@core_r0.16.0\n")
    new = ("FROM python\nRUN git clone https://gitcode.com/A/MindSpeed /opt/src/ms && "
           "git clone https://github.com/o/vllm /opt/src/vllm && "
           "git clone https://github.com/o/sg /opt/src/sg && "
           "git clone https://github.com/o/mlm /opt/src/mlm && "
           "pip install -e /opt/src/ms && pip install -e /opt/src/vllm && "
           "pip install -e '/opt/src/sg/python[all_npu]' && pip install /opt/src/mlm\n")
    pips = found(diff(original, new), "pip")
    assert pips == {("https://github.com/o/mlm", "changed")}, pips
    mlm = one(diff(original, new), "pip", "https://github.com/o/mlm")
    assert (mlm.original, mlm.new) == ("git+https://github.com/o/mlm.git@core_r0.16.0", "path")


def test_pip_wheel_saved_under_its_basename_is_named_by_the_wheel() -> None:
    """A wheel downloaded to `/tmp/$(basename "$url")` is the wheel the URL names."""
    url = "https://example.org/dl/torch_npu-2.8.0.post2-cp311-cp311-manylinux_2_28_x86_64.whl"
    original = f"FROM python\nRUN wget {url} && pip install {url.rsplit('/', 1)[1]}\n"
    new = (f"FROM python\nRUN u={url}; wheel=\"/tmp/$(basename \"$u\")\"; "
           "curl -o \"$wheel\" \"$u\"; pip install \"$wheel\"\n")
    assert found(diff(original, new), "pip") == set()



# compare in a child under an address-space limit and a timeout: a regression of the bounded
# read fails (MemoryError, TimeoutExpired) instead of filling the machine's memory or hanging
COMPARE_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
sys.argv = ["cannery", "compare", *sys.argv[1:]]
from cannery.entry import main
main()
"""


@pytest.mark.parametrize(("kind", "message"), [
    ("fifo", "fifo: not a regular file"),
    ("zero", "zero: not a regular file"),
    ("huge", "huge: larger than 1 MiB"),
    ("binary", "binary: not UTF-8 text"),
    ("empty", "empty:1: file with no instructions"),
    ("nodockerfiles", "no Dockerfile or workflow in either"),
])
def test_cli_odd_input_is_one_line_exit_2(tmp_path: Path, kind: str, message: str) -> None:
    """A FIFO, a link to /dev/zero, a file over lint's 1 MiB, bytes that are not UTF-8, an
    empty file and two directories without a Dockerfile: each one line, exit 2, read bounded."""
    import os
    import subprocess
    import sys

    a = write(tmp_path / "a" / "Dockerfile", ORIG)
    odd = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(odd)
    elif kind == "zero":
        odd.symlink_to("/dev/zero")
    elif kind == "huge":
        odd.write_text("FROM x\n" + "RUN true\n" * (1 << 18))
    elif kind == "binary":
        odd.write_bytes(b"FROM x\n\xff\xfe\x00\x81" * 100)
    elif kind == "empty":
        odd.write_text("")
    pair = [str(a), str(odd)]
    if kind == "nodockerfiles":
        write(tmp_path / "d1" / "README", "x\n")
        (tmp_path / "d2").mkdir()
        pair = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", COMPARE_CHILD, *pair], capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONPATH": str(root / "src")})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_cli_accepted_list_read_bounded(tmp_path: Path, kind: str) -> None:
    """--accepted naming a FIFO or a link to /dev/zero: one line, exit 2, not a hang or an
    out-of-memory (compare runs in a child under an address-space limit and a timeout)."""
    import os
    import subprocess
    import sys

    a = write(tmp_path / "a" / "Dockerfile", ORIG)
    odd = tmp_path / "accepted.toml"
    if kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to("/dev/zero")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-c", COMPARE_CHILD, str(a), str(a), "--accepted",
                           str(odd)], capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTHONPATH": str(root / "src")})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip() == f"cannery: error: {odd}: not a regular file", proc.stderr
