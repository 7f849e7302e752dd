"""The pretraining command's config climbs back up to a caller's room at
most 5 times (`tests/config_flow.py`: the rule, read from the source)."""

import os
import textwrap

import config_flow

MOST_CLIMBS = 5


def test_the_config_climbs_back_up_at_most_5_times():
    flow = config_flow.measure(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert flow.edges, "the reader followed no call of `training.pretrain.run`'s config"
    climbs = len(flow.climbs)
    assert climbs <= MOST_CLIMBS, config_flow.report(flow)


def _write(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_the_reader_finds_a_planted_climb_back(tmp_path):
    """`top.cmd.run` hands its config (renamed by `dataclasses.replace`) down
    to `top.low.work`, which calls back up into `top.cmd` with the config,
    through an object holding it in `.cfg` and from a closure capturing it;
    a field (`cfg.x`) passed up is not the config."""
    _write(tmp_path, {
        "top/__init__.py": "",
        "top/cmd.py": """\
            import dataclasses

            from top.low.work import helper


            def run(cfg):
                c = dataclasses.replace(cfg, x=1)
                helper(c)


            def back(cfg):
                return cfg
            """,
        "top/low/__init__.py": "",
        "top/low/work.py": """\
            class Low:
                def __init__(self, cfg):
                    self.cfg = cfg

                def go(self):
                    from top import cmd

                    cmd.back(self.cfg)


            def helper(cfg):
                from top import cmd

                cmd.back(cfg)
                cmd.back(cfg.x)
                Low(cfg).go()

                def later():
                    cmd.back(cfg)

                return later
            """,
    })
    flow = config_flow.measure(str(tmp_path), start=("top.cmd", "run"), packages=("top",),
                               rules={"top": set()})
    found = {(site, callee, why) for (site, callee), (_, _, why) in flow.climbs.items()}
    assert found == {("top/low/work.py:8", "top.cmd.back", "back"),
                     ("top/low/work.py:14", "top.cmd.back", "back"),
                     ("top/low/work.py:19", "top.cmd.back", "back")}, config_flow.report(flow)
    # Going down is no climb: run -> helper, helper -> Low.__init__ and Low.go.
    assert ("top/cmd.py:8", "top.low.work.helper") in flow.edges
    assert len(flow.edges) == 6, sorted(flow.edges)
