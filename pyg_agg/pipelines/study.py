"""The harness shared by the paper studies (``examples/lcm_second_min.py``, ...).

A study trains several *units* (one model under one condition, e.g. GATv2 at
``k = 50``) and writes one results file, ``docs/results/<study>.json``::

    {"study": ..., "budget": "full" | "small" | a reduced budget of the study,
     "paper": {model: {condition: value}},   # the numbers the paper reports
     "ours":  {model: {condition: value}},   # ours, nested the same way
     "std":   {model: {condition: value}},   # optional: the spread over seeds or folds
     "command": ..., "commit": ...,          # of the session that started the run
     "sessions": [{"command", "commit"}, ...],  # every session, resumptions included
     "wall_time": {"seconds", "units", "untimed_units"},  # training time, summed over units
     "settings": {...}, "details": {model: {...}},
     "deviations": {setting: value}}         # where the run leaves its budget's protocol

The ``full`` budget is the paper's protocol and ``small`` a check run of
seconds; a study whose full protocol is out of reach on a CPU may add reduced
budgets (say ``cpu``), which write to ``docs/`` like the full one and whose
tables say they are not the paper's protocol. A diagnostic run that changes a
setting of its budget (a longer patience, another weight decay) records the
change as ``deviations``, and its table names it and says that it is not the
paper's protocol; choosing a subset of what to run (models, datasets, depths,
k, the base seed) is not a deviation.

Under ``--out`` it keeps ``study.json`` (the settings and the sessions) and one
checkpoint per unit, rewritten atomically after every epoch with the model,
optimizer, scheduler, the unit's own state (e.g. its best epoch's weights),
history, RNG states and the seconds spent training it so far (summed over
sessions: a unit's wall time). ``--resume`` refuses to start
when a setting differs from ``study.json`` (one line naming the settings), then
skips finished units and continues the others from their last epoch; it may
choose another selection (``--models``, ``--k``, ...): the results file then
holds the units of that selection, finished ones read from their checkpoints. Units are
seeded on their own and shuffle with a generator seeded by ``(seed, epoch)``,
so on CPU a killed and resumed run ends with exactly the numbers of an
uninterrupted one. ``--stop-after-epochs`` ends a session early on purpose.

A protocol too long for one session (or one machine: checkpoints do not move
between them) runs in parts, each a subset of what to run (``--datasets
MUTAG``, ``--k 10``) with its own results file; :func:`merge_results` joins
them into the study's file, keeping each part's command, commit and wall time
(``parts``)::

    python -m pyg_agg.pipelines.study merge docs/results/histograph_tu-mutag.json \
        docs/results/histograph_tu-enzymes.json --results docs/results/histograph_tu.json \
        --docs docs/histograph.md

:func:`update_docs_table` writes the table of a results file into its layer's
docs page, between ``<!-- study-table: <study> -->`` and ``<!-- /study-table -->``.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Optional

import torch
from torch import nn
from tqdm.auto import tqdm

from pyg_agg.pipelines.checkpoint import (
    load_checkpoint,
    rng_state,
    save_atomic,
    seed_everything,
    set_rng_state,
)

#: Settings that choose what runs, not how: a run of a subset is still its protocol.
SELECTION_SETTINGS = frozenset({"budget", "models", "datasets", "depths", "ks", "seed"})
#: The selection settings in which the parts of one merged run may differ (each
#: lists what its part ran); the budget and the base seed are the whole run's.
PART_SETTINGS = ("models", "datasets", "depths", "ks")
REPO_ROOT = Path(__file__).resolve().parents[2]


class StudyPaused(Exception):
    """Raised when ``--stop-after-epochs`` epochs were trained; every checkpoint is saved."""


@dataclass
class Trainee:
    """What a unit trains and checkpoints."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Optional[Any] = None
    #: More of the unit's state to checkpoint (tensors, numbers, lists, dicts).
    state: dict[str, Any] = field(default_factory=dict)


def study_parser(description: str, name: str, docs_page: str, models: Sequence[str],
                 reduced_budgets: Optional[dict[str, str]] = None) -> argparse.ArgumentParser:
    """The command line every study shares: ``--models`` (one of ``models``), the
    budget (``reduced_budgets``: name -> what it cuts from the paper's protocol),
    checkpoints, results and device. The study adds its own options to it."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    reduced = reduced_budgets or {}
    add = parser.add_argument
    add("--models", nargs="+", choices=models, default=None,
        help="the models to run (default: all)")
    add("--budget", choices=("full", *reduced, "small"), default="full",
        help="; ".join(["full: the paper's protocol",
                        *(f"{budget}: {cut} (not the paper's protocol)"
                          for budget, cut in reduced.items()),
                        "small: a short check run (tests, new machines)"]))
    add("--seed", type=int, default=0)
    add("--out", help=f"checkpoint folder (default runs/{name}, runs/{name}-small)")
    add("--resume", action="store_true", help="continue the run in --out")
    add("--stop-after-epochs", type=int, default=None,
        help="end this session after training this many epochs (resume with --resume)")
    add("--results", help=f"results file (default docs/results/{name}.json, results.json "
                          "in --out for the small budget)")
    add("--docs", help=f"docs page whose table is regenerated from the results (default "
                       f"docs/{docs_page}, none for the small budget; '' for none)")
    add("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    add("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    return parser


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name != "cpu" and not name.startswith("cuda"):
        raise ValueError(f"--device must be 'auto', 'cpu' or 'cuda[:N]', got {name!r}")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {name!r} requested but CUDA is not available")
    return torch.device(name)


def git_commit() -> str:
    """HEAD of the checkout the package runs from, ``+dirty`` with uncommitted changes
    to the code (``pyg_agg/``, ``examples/``; docs and results do not count)."""
    try:
        head = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                                "--untracked-files=no", "--", "pyg_agg", "examples"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+dirty" if dirty else head




def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """The generator of one epoch's shuffling and augmentation."""
    return torch.Generator().manual_seed(seed * 100_003 + epoch)


def differing_settings(saved: dict[str, Any], current: dict[str, Any],
                       defaults: Optional[dict[str, Any]] = None) -> list[str]:
    """Names of the settings whose values differ (or exist on one side only).

    A setting added to the study after the checkpoint was written (absent from
    ``saved``, present in ``defaults``) matches when it holds its default: that
    is the behaviour of the code that wrote the checkpoint.
    """
    defaults = defaults or {}
    return [key for key in sorted(saved.keys() | current.keys())
            if saved.get(key, defaults.get(key)) != current.get(key)]


class Study:
    """One run of a study: its settings, folder, sessions and units.

    Args:
        name: The study's name, as in ``docs/results/<name>.json``.
        docs_page: The page under ``docs/`` with the study's table.
        settings: A dataclass of everything that decides the numbers.
        args: As parsed by :func:`run_study`: ``argv`` (recorded as the command run
            by ``examples/<name>.py``) and the options of :func:`study_parser`:
            ``budget``, ``out`` (the
            checkpoint folder), ``resume``, ``stop_after_epochs``, ``results`` and
            ``docs`` (checked for the table's markers before any training). The
            small budget writes to ``docs/`` only when told to.
        budgets: The study's settings per budget (``full``, ``small`` and any
            reduced ones), before any option changed them: ``settings`` that
            differ from its ``args.budget`` outside :data:`SELECTION_SETTINGS`
            are recorded as the run's ``deviations``.
    """

    def __init__(self, name: str, docs_page: str, settings: Any,
                 args: argparse.Namespace, budgets: dict[str, Any]) -> None:
        if args.budget not in budgets:
            raise ValueError(f"--budget must be one of {tuple(budgets)}, got {args.budget!r}")
        if args.stop_after_epochs is not None and args.stop_after_epochs < 1:
            raise ValueError(f"--stop-after-epochs must be a positive integer, "
                             f"got {args.stop_after_epochs}")
        full, small = args.budget == "full", args.budget == "small"
        self.out = Path(args.out or f"runs/{name}{'' if full else '-' + args.budget}")
        self.results = Path(args.results or (self.out / "results.json" if small else
                                             REPO_ROOT / "docs" / "results" / f"{name}.json"))
        self.docs_page = (args.docs if args.docs is not None else
                          "" if small else str(REPO_ROOT / "docs" / docs_page))
        if self.docs_page:
            docs_table(Path(self.docs_page), name)
        self.name, self.budget = name, args.budget
        # through JSON, so tuples compare equal to the lists read back from study.json
        self.settings = json.loads(json.dumps({"budget": args.budget, **asdict(settings)}))
        expected = json.loads(json.dumps(asdict(budgets[args.budget])))
        self.deviations = {key: value for key, value in self.settings.items()
                           if key not in SELECTION_SETTINGS and value != expected[key]}
        self.epochs_left = args.stop_after_epochs
        resume = args.resume
        record = self.out / "study.json"
        command = shlex.join(["python", f"examples/{name}.py", *args.argv])
        session = {"command": command, "commit": git_commit()}
        if record.exists():
            if not resume:
                raise FileExistsError(f"{self.out} holds a run already: pass --resume to "
                                      "continue it, or choose another --out")
            saved = json.loads(record.read_text())
            defaults = json.loads(json.dumps({f.name: f.default for f in fields(settings)
                                              if f.default is not MISSING}))
            # another selection of units (models, datasets, depths, k) reads the
            # finished ones and trains the rest under the same protocol
            differing = [key for key in differing_settings(saved["settings"], self.settings, defaults)
                         if key not in PART_SETTINGS]
            if differing:
                details = ", ".join(f"{key} (checkpoint "
                                    f"{saved['settings'].get(key, defaults.get(key))!r}, "
                                    f"now {self.settings.get(key)!r})" for key in differing)
                raise ValueError(f"cannot resume {self.out}: settings differ: {details}")
            self.sessions = [*saved["sessions"], session]
        else:
            self.sessions = [session]
        self.out.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(record, {"study": name, "settings": self.settings,
                                    "sessions": self.sessions})
        #: Seconds each unit trained (over all sessions); None for a unit whose
        #: checkpoint predates the timing.
        self.unit_seconds: dict[str, Optional[float]] = {}

    def unit(self, key: str, seed: int, build: Callable[[], Trainee],
             train_epoch: Callable[[Trainee, int], dict[str, float]],
             evaluate: Callable[[Trainee, list[dict[str, float]]], dict[str, Any]],
             max_epochs: int,
             finished: Callable[[list[dict[str, float]]], bool] = lambda history: False,
             ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Trains (or resumes, or just reads) one unit; returns its scores and details.

        ``train_epoch(trainee, epoch)`` runs epoch ``epoch`` (from 1) and returns
        its metrics; training stops after ``max_epochs`` or once
        ``finished(history)``. The scores are ``evaluate(trainee, history)`` after
        the last epoch (the history lets a study report the epoch it selects on a
        validation split); the details are ``epochs`` (epochs trained), ``parameters`` (of the
        model) and ``last_epoch`` (the last epoch's metrics). Both are stored in
        the unit's checkpoint, so a finished unit is not evaluated again.
        """
        path = self.checkpoint_path(key)
        saved = load_checkpoint(path) if path.exists() else None
        seconds = 0.0 if saved is None else saved.get("seconds")
        self.unit_seconds[key] = seconds
        if saved is not None and saved["result"] is not None:
            return saved["result"]["scores"], saved["result"]["details"]
        seed_everything(seed)
        trainee = build()
        history: list[dict[str, float]] = []
        if saved is not None:
            trainee.model.load_state_dict(saved["model"])
            trainee.optimizer.load_state_dict(saved["optimizer"])
            if trainee.scheduler is not None:
                trainee.scheduler.load_state_dict(saved["scheduler"])
            trainee.state = saved.get("state", {})
            history = saved["history"]
            set_rng_state(saved["rng"])
        bar = tqdm(total=max_epochs, initial=len(history), desc=f"{self.name}: {key}",
                   dynamic_ncols=True)
        result = None  # a checkpoint without a result is one of an unfinished unit
        while result is None:
            if self.epochs_left == 0:
                bar.close()
                raise StudyPaused(f"paused after the epochs asked for; continue with "
                                  f"--resume --out {self.out}")
            epoch = len(history) + 1
            start = time.perf_counter()
            history.append(train_epoch(trainee, epoch))
            if epoch == max_epochs or finished(history):
                parameters = sum(p.numel() for p in trainee.model.parameters())
                result = {"scores": evaluate(trainee, history),
                          "details": {"epochs": epoch, "parameters": parameters,
                                      "last_epoch": history[-1]}}
            if seconds is not None:
                seconds += time.perf_counter() - start
                self.unit_seconds[key] = seconds
            save_atomic({"model": trainee.model.state_dict(),
                         "optimizer": trainee.optimizer.state_dict(),
                         "scheduler": None if trainee.scheduler is None
                         else trainee.scheduler.state_dict(),
                         "state": trainee.state, "history": history, "rng": rng_state(),
                         "seconds": seconds, "result": result}, path)
            if self.epochs_left is not None:
                self.epochs_left -= 1
            bar.set_postfix_str(", ".join(f"{name} {value:.4g}"
                                          for name, value in history[-1].items()))
            bar.update(1)
        bar.close()
        return result["scores"], result["details"]

    def wall_time(self) -> dict[str, Any]:
        """The training time of the units read or trained by this run, summed."""
        timed = [s for s in self.unit_seconds.values() if s is not None]
        return {"seconds": round(sum(timed), 1), "units": len(self.unit_seconds),
                "untimed_units": len(self.unit_seconds) - len(timed)}

    def checkpoint_path(self, key: str) -> Path:
        """The checkpoint of unit ``key`` (its model after the last epoch once finished)."""
        return self.out / f"{_file_name(key)}.pt"

    def write_results(self, paper: dict[str, Any], ours: dict[str, Any],
                      details: dict[str, Any], std: Optional[dict[str, Any]] = None,
                      ) -> dict[str, Any]:
        """Writes the results file (and the docs page's table); returns the results.
        ``std``, nested like ``ours``, is the spread of each number (over seeds or folds)."""
        data = {"study": self.name, "budget": self.budget, "paper": paper, "ours": ours,
                **({"std": std} if std is not None else {}),
                "command": self.sessions[0]["command"], "commit": self.sessions[0]["commit"],
                "sessions": self.sessions, "wall_time": self.wall_time(),
                "settings": self.settings, "details": details, "deviations": self.deviations}
        self.results.parent.mkdir(parents=True, exist_ok=True)
        _write_json_atomic(self.results, data)
        if self.docs_page:
            # a supplementary run's file, <study>-<run>.json, has its own table
            supplementary = self.results.stem.startswith(f"{self.name}-")
            update_docs_table(Path(self.docs_page), data,
                              self.results.stem if supplementary else None)
        tqdm.write(render_table(data))
        return data


def merge_results(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One results file from ``parts``: results files of one study, budget, seed
    and protocol that ran different models or conditions (e.g. one dataset per
    session). Their cells are joined; each part's command, commit, sessions and
    wall time are kept under ``parts``, the top-level ``command`` and ``commit``
    list them all. Raises ``ValueError`` on parts of another study, budget or
    protocol (naming the setting), or on a cell that two parts hold."""
    if not parts:
        raise ValueError("merge needs at least one results file")
    first = parts[0]
    for key in ("study", "budget"):
        values = list(dict.fromkeys(part[key] for part in parts))
        if len(values) > 1:
            raise ValueError(f"parts of different {key}s cannot be merged: {values}")
    settings = dict(first["settings"])
    for part in parts[1:]:
        differing = [key for key in differing_settings(first["settings"], part["settings"])
                     if key not in PART_SETTINGS]
        if differing:
            details = ", ".join(f"{key} ({first['settings'].get(key)!r} against "
                                f"{part['settings'].get(key)!r})" for key in differing)
            raise ValueError(f"parts of different protocols cannot be merged: {details}")
        for key in PART_SETTINGS:
            if key in settings:
                settings[key] = list(dict.fromkeys([*settings[key], *part["settings"][key]]))
    merged: dict[str, Any] = {"paper": {}, "ours": {}, "std": {}, "details": {}}
    for part in parts:
        for section, models in merged.items():
            for model, conditions in part.get(section, {}).items():
                for condition, value in conditions.items():
                    held = models.setdefault(model, {})
                    if condition in held and (section != "paper" or held[condition] != value):
                        raise ValueError(f"two parts hold {section}[{model!r}][{condition!r}]")
                    held[condition] = value
    timed = [part["wall_time"] for part in parts if part.get("wall_time")]
    wall_time = {"seconds": round(sum(t["seconds"] for t in timed), 1),
                 "units": sum(t["units"] for t in timed),
                 "untimed_units": sum(t["untimed_units"] for t in timed),
                 "untimed_parts": len(parts) - len(timed)}
    return {"study": first["study"], "budget": first["budget"],
            "paper": merged["paper"], "ours": merged["ours"],
            **({"std": merged["std"]} if merged["std"] else {}),
            "command": " && ".join(part["command"] for part in parts),
            "commit": ", ".join(dict.fromkeys(part["commit"] for part in parts)),
            "sessions": [session for part in parts for session in part["sessions"]],
            "wall_time": wall_time, "settings": settings, "details": merged["details"],
            "deviations": first.get("deviations") or {},
            "parts": [{"selection": {key: part["settings"][key] for key in PART_SETTINGS
                                     if key in part["settings"]},
                       "command": part["command"], "commit": part["commit"],
                       "wall_time": part.get("wall_time")} for part in parts]}


def run_study(main: Callable[[argparse.Namespace], Any], parser: argparse.ArgumentParser,
              argv: Optional[list[str]]) -> int:
    """Parses ``argv`` (default: the command line) and runs ``main(args)`` with the
    common options applied; 0 when done or paused."""
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        main(args)
    except StudyPaused as pause:
        print(pause)
    return 0


# ------------------------------------------------------------------ tables

TABLE_START = "<!-- study-table: {name} -->"
TABLE_END = "<!-- /study-table -->"


def _cell(value: Any, std: Any = None) -> str:
    """``value`` to 3 decimals (``± std`` where given); a dict's values joined by ' / '."""
    if value is None:
        return "–"
    if isinstance(value, dict):
        stds = std if isinstance(std, dict) else {}
        return " / ".join(_cell(v, stds.get(key)) for key, v in value.items())
    return f"{value:.3f}" if std is None else f"{value:.3f} ± {std:.3f}"


def render_table(results: dict[str, Any]) -> str:
    """The markdown table of a results file: per model and condition, the paper's
    number (where it reports one) and ours, with ``± std`` where the file has a
    ``std`` nested like ``ours`` (over seeds or folds)."""
    paper, ours, std = results["paper"], results["ours"], results.get("std", {})
    conditions = list(dict.fromkeys(c for model in ours.values() for c in model))
    with_paper = {c for model in paper.values() for c in model}
    header = ["model"]
    for condition in conditions:
        if condition in with_paper:
            header.append(f"{condition} paper")
        header.append(f"{condition} ours")
    lines = ["| " + " | ".join(header) + " |",
             "| --- |" + " ---: |" * (len(header) - 1)]
    for model, values in ours.items():
        row = [model]
        for condition in conditions:
            ran = values.get(condition)
            if condition in with_paper:
                reported = paper.get(model, {}).get(condition)
                if isinstance(reported, dict) and isinstance(ran, dict):  # the cells run only
                    reported = {key: reported.get(key) for key in ran}
                row.append(_cell(reported))
            row.append(_cell(ran, std.get(model, {}).get(condition)))
        lines.append("| " + " | ".join(row) + " |")
    deviations = results.get("deviations") or {}
    budget = ("**a diagnostic, not the paper's protocol**" if deviations and results["budget"] == "full"
              else "the paper's protocol" if results["budget"] == "full" else
              "**a short check run, not the paper's protocol; the full run has not been "
              "run yet**" if results["budget"] == "small" else
              "**a reduced budget, not the paper's protocol**")
    changed = "".join(f" `{key}={value}`" for key, value in deviations.items())
    parts = results.get("parts")
    if parts:
        # parts written from one run (its units read back by selection) share a command
        origins = list(dict.fromkeys((part["command"], part["commit"]) for part in parts))
        one_command = len(origins) == 1 < len(parts)
        origin = (f"Run in {len(parts)} part{'s' if len(parts) > 1 else ''}"
                  f"{' of one command' if one_command else ''}: "
                  + "; ".join(f"`{command}` at commit `{commit}`" for command, commit in origins) + ".")
    else:
        origin = f"Command: `{results['command']}`, commit `{results['commit']}`."
    lines += ["", f"Budget `{results['budget']}`{' with' + changed if changed else ''} ({budget}). "
                  f"{origin} {_wall_time_sentence(results.get('wall_time'))}"]
    cells = next((value for model in ours.values() for value in model.values()
                  if isinstance(value, dict)), None)
    if cells is not None:
        lines[-1] += f" Cells: {' / '.join(cells)}."
    return "\n".join(lines)


def _wall_time_sentence(wall_time: Optional[dict[str, Any]]) -> str:
    if not wall_time or wall_time["untimed_units"] == wall_time["units"]:
        return "Wall time: not recorded (the units ran before the harness timed them)."
    hours = wall_time["seconds"] / 3600
    units = f"{wall_time['units']} unit{'s' if wall_time['units'] != 1 else ''}"
    text = (f"Wall time: {hours:.1f} h of training over {units}" if hours >= 0.1 else
            f"Wall time: {wall_time['seconds']:.0f} s of training over {units}")
    if wall_time["untimed_units"]:
        text += f" ({wall_time['untimed_units']} of them ran before the harness timed them)"
    untimed_parts = wall_time.get("untimed_parts", 0)
    if untimed_parts:
        text += (f", not counting {untimed_parts} part{'s' if untimed_parts > 1 else ''} "
                 "that ran before the harness timed units")
    return text + "."


def _split_page(page: Path, name: str) -> tuple[str, str, str]:
    """``page`` as (text before the study's table, the table, text after it)."""
    start = TABLE_START.format(name=name)
    text = page.read_text()
    if start not in text:
        raise ValueError(f"--docs page {page} has no {start!r} marker for the study's table")
    head, rest = text.split(start, 1)
    if TABLE_END not in rest:
        raise ValueError(f"--docs page {page}: {start!r} is not closed by {TABLE_END!r}")
    table, tail = rest.split(TABLE_END, 1)
    return head + start, table.strip(), TABLE_END + tail


def update_docs_table(page: Path, results: dict[str, Any], name: Optional[str] = None) -> None:
    """Replaces the study's table in ``page`` (between its markers) by the rendered one;
    ``name`` picks another table than the study's own (a supplementary run's, named
    after its results file ``<study>-<run>.json``, e.g. ``pna_multitask-gcn-gat-gin``)."""
    head, _, tail = _split_page(page, name or results["study"])
    page.write_text(f"{head}\n{render_table(results)}\n{tail}")


def docs_table(page: Path, name: str) -> str:
    """The table currently between the study's markers in ``page``."""
    return _split_page(page, name)[1]


def _write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def _file_name(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_=" else "_" for c in key)


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m pyg_agg.pipelines.study merge PART... --results FILE [--docs PAGE]``:
    :func:`merge_results` of the PART results files, written to FILE, and its
    table to PAGE (under the marker of FILE's name)."""
    parser = argparse.ArgumentParser(prog="python -m pyg_agg.pipelines.study",
                                     description=main.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    merge = sub.add_parser("merge", help="join the results files of a run made in parts")
    merge.add_argument("parts", nargs="+", type=Path, help="results files of the parts")
    merge.add_argument("--results", type=Path, required=True, help="the merged results file")
    merge.add_argument("--docs", type=Path, help="docs page whose table is regenerated")
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.parts if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"merge: no results file at {', '.join(missing)}")
    data = merge_results([json.loads(path.read_text()) for path in args.parts])
    for part, path in zip(data["parts"], args.parts, strict=True):
        part["file"] = os.path.relpath(path, args.results.parent)  # where its details live
    if args.docs:
        update_docs_table(args.docs, data, args.results.stem)
    _write_json_atomic(args.results, data)
    print(render_table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
