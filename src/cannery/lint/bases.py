"""What lint knows of well-known base images by default: their shell and the search-path
variables their config sets. [tool.cannery.lint] can replace either (lint/config.py)."""

from __future__ import annotations

# Base images whose SHELL is bash (Ascend's CANN images set SHELL ["/bin/bash", "-c"]).
DEFAULT_SHELLS: dict[str, list[str]] = {
    "*ascendhub/cann:*": ["/bin/bash", "-c"],
    "*ascend/cann:*": ["/bin/bash", "-c"],
    "*/cann:*": ["/bin/bash", "-c"],
    "quay.io/ascend/*": ["/bin/bash", "-c"],
}
# Variables a base image already sets (so `X=/new:$X` cannot leave an empty element there).
# Ascend's CANN images persist what set_env.sh exports.
_CANN_BASE_ENV = ["ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH",
                  "ASCEND_AICPU_PATH", "TOOLCHAIN_HOME", "LD_LIBRARY_PATH", "PYTHONPATH", "PATH"]
# A base matching a pattern here is known: a variable not in its list is unset or empty there
# ("set" means set and non-empty). Lint claims a variable is unset only for known bases.
DEFAULT_BASE_ENV: dict[str, list[str]] = {
    **{pattern: list(_CANN_BASE_ENV) for pattern in DEFAULT_SHELLS},
    # pypa's build.sh: manylinux2014, _2_28 and _2_34 put their devtoolset/gcc-toolset
    # libraries on LD_LIBRARY_PATH; _2_31, _2_35 and musllinux set it to an empty string
    "quay.io/pypa/manylinux2014_*": ["PATH", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH"],
    "quay.io/pypa/manylinux_2_28_*": ["PATH", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH"],
    "quay.io/pypa/manylinux_2_34_*": ["PATH", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH"],
    "quay.io/pypa/manylinux_*": ["PATH", "PKG_CONFIG_PATH"],
    "quay.io/pypa/musllinux_*": ["PATH", "PKG_CONFIG_PATH"],
    # NVIDIA's CUDA images: the driver libraries on LD_LIBRARY_PATH, the stubs on LIBRARY_PATH
    # (devel; listed for every flavour, so LIBRARY_PATH is never called unset there)
    "nvidia/cuda:*": ["PATH", "LD_LIBRARY_PATH", "LIBRARY_PATH"],
    # minimal distribution and language bases: PATH only, of the search paths
    **{pattern: ["PATH"] for pattern in (
        "ubuntu", "ubuntu:*", "debian", "debian:*", "alpine", "alpine:*", "busybox*",
        "centos:*", "rockylinux:*", "almalinux:*", "fedora:*", "openeuler/openeuler:*",
        "python:*", "scratch")},
}
