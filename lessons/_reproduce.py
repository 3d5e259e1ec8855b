"""Does a rerun give the ledger's untimed values, bit for bit? (``python -m lessons --compare LEDGER``, ``make
ledger-check``.)

Every claim without ``timed=True`` is computed from seeded generators and the pinned arithmetic
(lessons/_numerics.py), so a rerun of the same code must give its value, interval and verdict to the last bit;
a timed claim's value comes from a clock and is left out. JSON keeps a float's shortest repr, which reads back
as the same float, so the comparison is equality, not a tolerance.
"""
from __future__ import annotations

import json
from pathlib import Path

COMPARED = ("value", "interval", "verdict")       # an untimed claim's fields that must come out the same


def read_ledger(path: Path) -> dict:
    """claims.json at ``path`` as {stem: entry}; a clear error when it is missing or unreadable."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"--compare: expected a claims ledger (claims.json, as python -m lessons writes it); "
                         f"received {path}: {exc}. Fix: --compare figures/claims.json") from None


def untimed_differences(ran: dict, committed: dict) -> list[str]:
    """The untimed claims of the lessons in ``ran`` whose value, interval or verdict differ from
    ``committed``'s, one line each; lessons or claims that cannot be compared are named too. [] when all agree."""
    found = []
    for stem, entry in sorted(ran.items()):
        old = committed.get(stem)
        if old is None:
            found.append(f"{stem}: not in the committed ledger")
            continue
        if (entry["quick"], entry["seeds"]) != (old["quick"], old["seeds"]):
            found.append(f"{stem}: ran with quick={entry['quick']}, {entry['seeds']} seeds; the ledger's run "
                         f"had quick={old['quick']}, {old['seeds']} seeds: not comparable (run the same sizes)")
            continue
        if entry["status"] != "ok":
            found.append(f"{stem}: {entry['status']} ({entry['error']})")
            continue
        claims, old_claims = entry["claims"], old["claims"]
        if [c["claim"] for c in claims] != [c["claim"] for c in old_claims]:
            found.append(f"{stem}: its claims are not the ledger's ({len(claims)} against {len(old_claims)}, or "
                         "reworded): the ledger is older than the lesson")
            continue
        for new, was in zip(claims, old_claims):
            if new["timed"] or was["timed"]:
                continue
            moved = [f"{k} {was[k]!r} -> {new[k]!r}" for k in COMPARED if new[k] != was[k]]
            if moved:
                found.append(f"{stem}: {new['claim']!r}: " + "; ".join(moved))
    return found


def compare(out: Path, committed_path: Path, stems) -> int:
    """Print how the lessons ``stems`` of <out>/claims.json compare with the ledger at ``committed_path``;
    1 if any untimed value differs, else 0."""
    ran = {stem: entry for stem, entry in read_ledger(Path(out) / "claims.json").items() if stem in set(stems)}
    found = untimed_differences(ran, read_ledger(committed_path))
    n = sum(not c["timed"] for e in ran.values() for c in e["claims"])
    if found:
        print(f"\n{len(found)} differences from {committed_path} in the untimed claims of {len(ran)} lessons:")
        for line in found:
            print(f"  {line}")
        return 1
    print(f"\nall {n} untimed claims of {len(ran)} lessons give {committed_path}'s value, interval and verdict, "
          "bit for bit")
    return 0
