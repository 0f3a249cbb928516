"""How apigen's schemas differ from crdscale's "apigen" preset, measured without a server.

Usage: python scripts/apigen_shape.py [--properties 5000] [--samples 5]

apigen (ulucinar/terrajet-scale cmd/apigen, the seed's `apigen generate -g 200 -c 200 --property-count
5000`) fills each CRD's schema with gofuzz: every property gets a random title and a random name (0-19
runes drawn from ASCII, U+00A0-U+02AF and CJK U+4E00-U+9FFF), a type drawn uniformly from object,
integer, string, boolean, number, and an object property, while the count allows, is filled the same way
before the next sibling is drawn, so the properties form one deep chain (each level ~5 properties, one of
them the next level). This script draws schemas that way (Python's random, not Go's: the same
distribution, not the same bytes) and prints, beside crdscale's apigen preset at the same property count,
the properties actually kept (empty or repeated random names collide), nesting depth, schema bytes and
title bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys

from crdscale.crds.generate import generate_crds, preset
from crdscale.footprint.features import crd_features
from crdscale.schema import measure_schema

TYPES = ("object", "integer", "string", "boolean", "number")
RUNE_RANGES = ((0x20, 0x7E), (0xA0, 0x2AF), (0x4E00, 0x9FFF))


def random_string(rng: random.Random) -> str:
    return "".join(chr(rng.randint(*RUNE_RANGES[rng.randrange(3)])) for _ in range(rng.randrange(20)))


def apigen_like_schema(rng: random.Random, count: int) -> dict:
    """One schema drawn as apigen draws it (iteratively: the chain is deeper than Python's recursion)."""
    drawn = 0
    root = {"title": random_string(rng), "type": "object", "properties": {}}
    level = root
    while True:
        prop = {"title": random_string(rng), "type": TYPES[rng.randrange(len(TYPES))]}
        descend = prop["type"] == "object" and drawn < count
        if descend:
            prop = {"title": random_string(rng), "type": "object", "properties": {}}
        level["properties"][random_string(rng)] = prop
        if descend:
            # apigen fills this object before counting it; its own count comes after its children's.
            level = prop
            continue
        drawn += 1
        if drawn >= count:
            return root


def chain_depth(schema: dict) -> int:
    depth, node = 0, schema
    while node.get("properties"):
        depth += 1
        deeper = [p for p in node["properties"].values() if p.get("properties")]
        if not deeper:
            break
        node = deeper[0]
    return depth


def count_properties(schema: dict) -> tuple[int, int]:
    """(properties, title bytes), iteratively."""
    props = titles = 0
    stack = [schema]
    while stack:
        node = stack.pop()
        titles += len(node.get("title", "").encode())
        for child in (node.get("properties") or {}).values():
            props += 1
            stack.append(child)
    return props, titles


def main(argv=None) -> int:
    sys.setrecursionlimit(50_000)  # json.dumps of a chain ~1,300 levels deep
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--properties", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args(argv)
    rng = random.Random(1)
    rows = []
    for _ in range(args.samples):
        schema = apigen_like_schema(rng, args.properties)
        props, titles = count_properties(schema)
        size = len(json.dumps(schema, ensure_ascii=False, separators=(",", ":")).encode())
        rows.append((props, chain_depth(schema), size, titles))
    ours = next(iter(generate_crds(preset("apigen", crd_count=1, group_count=1, property_count=args.properties))))
    features = crd_features(ours)
    measures = measure_schema(ours["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    print(f"{'':<28}{'properties':>11}{'depth':>7}{'schema bytes':>14}{'title bytes':>13}")
    print(
        f"{'apigen-like (median of ' + str(args.samples) + ')':<28}"
        + "".join(
            f"{statistics.median(c):>{w},.0f}" for c, w in zip(zip(*rows, strict=True), (11, 7, 14, 13), strict=True)
        )
    )
    print(
        f"{'crdscale apigen preset':<28}{measures.properties:>11,}{measures.depth:>7}{features['schema_bytes']:>14,.0f}{0:>13}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
