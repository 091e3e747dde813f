from __future__ import annotations

import json

from cannery.catalog.models import Catalog


def catalog_schema() -> dict[str, object]:
    schema = Catalog.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "cannery catalog"
    # An image that `extends` another inherits its required fields, so in the file itself
    # only `base`-less inheritance is checked by cannery, not by the schema.
    schema["$defs"]["Image"].pop("required", None)
    # SoC families and the compatibility table come from cannery's own data when absent.
    schema.pop("required", None)
    schema["required"] = ["catalog"]
    return schema


def schema_cmd() -> int:
    print(json.dumps(catalog_schema(), indent=2, sort_keys=True))
    return 0
