"""CANN toolkit versions as Dockerfiles name them: in a CANN base image's tag
(`…/cann:8.5.1-910b-…`) and in a toolkit installer's file name
(`Ascend-cann-toolkit_8.5.2_linux-x86_64.run`)."""

from __future__ import annotations

import re

from cannery.lint.rule import lazy_re

BASE_VERSION = lazy_re(r"cann[^:/]*:(?P<v>\d+\.\d+\.(?:\d+|rc\d+))", re.I)
INSTALLER = lazy_re(r"Ascend-cann-toolkit_(?P<v>[0-9][\w.-]*?)_linux", re.I)
