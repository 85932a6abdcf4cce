"""The demo regenerates its own run folders when run again."""
from pyg_agg import demo


def test_running_the_demo_twice_regenerates_its_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(demo, "LINEUP", [("GIN (PyG)", "gin", "mean", "pyg")])
    out = tmp_path / "demo"
    first = demo.run_demo(out, epochs=1, root=str(tmp_path / "no-data"))
    second = demo.run_demo(out, epochs=1, root=str(tmp_path / "no-data"))
    assert [r["test"] for r in second] == [r["test"] for r in first]
    assert sorted(p.name for p in (out / "synthetic-degree").iterdir()) == ["gin-mean"]
