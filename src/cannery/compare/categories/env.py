"""env: the image's ENV after expansion; a path list (a value with `:` and `/`) element by
element, so an added, dropped or reordered entry is named."""

from __future__ import annotations

from cannery.compare.image import ImageView
from cannery.compare.model import ADDED, CHANGED, MOVED, REMOVED, Difference, common_order

NAME = "env"


def is_path_list(value: str) -> bool:
    return ":" in value and "/" in value and "://" not in value


def compare(original: ImageView, new: ImageView) -> list[Difference]:
    out: list[Difference] = []
    a, b = original.env, new.env
    for key in a:
        if key not in b:
            out.append(Difference(NAME, key, REMOVED, a[key], None))
        elif a[key] != b[key]:
            out.extend(_changed(key, a[key], b[key]))
    out.extend(Difference(NAME, key, ADDED, None, b[key]) for key in b if key not in a)
    return out


def _changed(key: str, old: str, new: str) -> list[Difference]:
    if not (is_path_list(old) or is_path_list(new)):
        return [Difference(NAME, key, CHANGED, old, new)]
    xs, ys = old.split(":"), new.split(":")
    out = [Difference(NAME, key, REMOVED, x, None, "path list entry") for x in xs if x not in ys]
    out += [Difference(NAME, key, ADDED, None, y, "path list entry") for y in ys if y not in xs]
    common_x = list(dict.fromkeys(x for x in xs if x in ys))
    common_y = list(dict.fromkeys(y for y in ys if y in xs))
    kept = common_order(common_x, common_y)
    out += [Difference(NAME, key, MOVED, f"{entry} at {xs.index(entry) + 1}",
                       f"{entry} at {ys.index(entry) + 1}", "path list order")
            for entry in common_y if entry not in kept]
    return out
