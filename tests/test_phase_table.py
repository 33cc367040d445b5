"""The end-of-run phase table (``rltrain.timers.PhaseTable``) adds up: each phase is one row, counted once
(``ca`` included), the sub-phase rows add up to their group's row, the group rows to the timed total (and
their shares to 100%), and the timed total to the iterations' wall clock:

* within 5% when the phases are timed sleeps making up the whole iteration;
* within 10% for a PPO run (between its phases only a few lines of the loop run untimed);
* an IMPALA run's learner leaves more out of its phases (its minibatches' column gathering and the
  policy-lag readout: about half a millisecond per update on the CPU), so its total is only held
  to between 80% and 100% of the wall clock.

The figures are read from the printed table, to its printed precision: 0.01 ms per row and iteration.
"""

import re

import pytest

from conftest import load_script
from rltrain.timers import PhaseTable, PhaseTimer

ROW = re.compile(r"^(?P<indent> *)(?P<name>\S+(?: \S+)?) +(?P<s>[\d.]+) +(?P<ms>[\d.]+)(?: +(?P<share>[\d.]+)%)?$")


def read_table(text: str) -> dict:
    """``{"groups": {name: (ms/iter, share %)}, "subs": {...}, "total": ms/iter, "wall": ms/iter}`` of the
    first phase table in ``text``."""
    body = text[text.index("phase  "):].split("\n")[2:]
    groups, subs, out = {}, {}, {}
    for line in body:
        if line.startswith("-"):
            continue
        m = ROW.match(line)
        if m is None:
            break
        name, ms, share = m["name"], float(m["ms"]), float(m["share"]) if m["share"] else None
        if name == "timed total":
            out["total"] = ms
        elif name == "iteration wall":
            out["wall"] = ms
        else:
            rows = subs if m["indent"] else groups
            assert name not in groups and name not in subs, f"phase {name} has two rows"
            rows[name] = (ms, share)
    return {"groups": groups, "subs": subs, **out}


def check_rows_add_up(table: dict, phases=None) -> None:
    """Sub-phases to their group, groups to the total (and shares to 100%), within the printed precision;
    ``phases`` (name: ms/iter): every one is a row with its time, and the table has no other."""
    groups, subs, rounding = table["groups"], table["subs"], 0.005
    for g, (ms, _) in groups.items():
        mine = [v for k, (v, _) in subs.items() if k.split("/", 1)[0] == g]
        if mine:
            assert sum(mine) == pytest.approx(ms, abs=rounding * (len(mine) + 1)), g
    assert set(k.split("/", 1)[0] for k in subs) <= set(groups)
    assert sum(ms for ms, _ in groups.values()) == pytest.approx(table["total"], abs=rounding * (len(groups) + 1))
    assert sum(share for _, share in groups.values()) == pytest.approx(100.0, abs=rounding * len(groups))
    if phases is not None:
        rows = {**{g: v for g, v in groups.items() if not any(k.startswith(g + "/") for k in subs)}, **subs}
        assert set(rows) == set(phases)
        for name, ms in phases.items():
            assert rows[name][0] == pytest.approx(ms, abs=rounding), name


def test_timed_phases_add_up_to_the_wall_clock(clock):
    timer, table = PhaseTimer("cpu"), PhaseTable(warmup=1)
    sleeps = {"rollout/env": 0.006, "rollout/inference": 0.002, "ca": 0.004, "update/forward": 0.003,
              "update/backward": 0.002}
    fed = dict.fromkeys(sleeps, 0.0)  # the seconds of the iterations the table counts
    for i in range(4):
        t0 = clock()
        for name, s in sleeps.items():
            with timer.phase(name):
                clock.advance(s)
            clock.advance(0.0001)  # untimed work between phases
        secs = timer.read()
        table.add(secs, clock() - t0)
        if i >= table.warmup:
            fed = {k: fed[k] + secs[k] for k in fed}
    text = table.format()
    got = read_table(text)
    assert set(got["groups"]) == {"rollout", "ca", "update"} and "ca" not in got["subs"]
    check_rows_add_up(got, {k: 1e3 * v / table.iterations for k, v in fed.items()})
    assert got["total"] == pytest.approx(1e3 * sum(fed.values()) / table.iterations, abs=0.01)  # each phase once
    assert got["wall"] - got["total"] == pytest.approx(0.5, abs=0.02)  # the five untimed gaps, 0.1 ms each


def _synthetic_run(name: str, tmp_path, capsys, *flags) -> dict:
    trainer = load_script(name)
    trainer.main(trainer.cli(["--runs-dir", str(tmp_path), "--synthetic", "--num-steps", "16", "--num-minibatches",
                              "2", "--ca-shadow-every", "0", "--no-progress", *flags]))
    return read_table(capsys.readouterr().out)


def test_a_ppo_runs_phase_table_adds_up_to_its_wall_clock(tmp_path, capsys):
    table = _synthetic_run("ppo", tmp_path, capsys, "--num-envs", "8", "--total-timesteps", str(8 * 16 * 6))
    assert {"ca", "update"} <= set(table["groups"]) and "ca" not in table["subs"]
    check_rows_add_up(table)
    assert table["total"] <= table["wall"] * 1.01 and table["total"] == pytest.approx(table["wall"], rel=0.10)


def test_an_impala_runs_phase_table_adds_up(tmp_path, capsys):
    table = _synthetic_run("impala", tmp_path, capsys, "--num-envs", "16", "--total-timesteps", str(16 * 16 * 6))
    assert "learner/ca" in table["subs"] and "learner/queue_wait" in table["subs"]
    check_rows_add_up(table)
    assert 0.8 * table["wall"] <= table["total"] <= table["wall"] * 1.01
