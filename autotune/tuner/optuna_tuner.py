"""``optuna``: any Optuna sampler through the ask/tell interface (TPE by default).

Each knob is one Optuna parameter whose values are the knob's choice positions: a
``CategoricalDistribution`` by default, or an ``IntDistribution`` with
``knob_distribution="int"`` (choices are ordered, e.g. split sizes, which samplers
such as CMA-ES can exploit). A batch comes from several asks:

- a config that violates a constraint is told as pruned and asked again (at most
  ``max_retries`` asks per config of the batch; the rest of the batch is then random);
- a config measured before is told its known cost at once, without measuring again;
- a config already in flight keeps its trial open, told when the result arrives.

Measured costs (seconds, minimized) are told as values, failed candidates as failures;
configs measured without a trial (random fill, the default config, resumed history) are added
to the search's study as finished trials.

The tuner keeps two studies. The search's own (``sampler_study``, in memory) holds every ask,
repeats and pruned ones included, which is what the sampler learns from. The tuner's
``study`` is the record of the run: one trial per measured config, ``COMPLETE`` with its mean
cost as the value or ``FAIL`` for a failed candidate, with user attributes ``config_index``
and ``config`` (the knob values, as AutoTVM prints a config; the trial's parameters are the
knobs' choice positions). It is written once per measured config, so a stored study costs
the search one write per measurement, not one per ask.

Where the study lives
---------------------
``tune()`` keeps the tuner's ``study`` beside its tuning log, through Optuna's RDB storage,
so that a resumed run continues the same study (its configs are not measured again, and the
search's study is seeded from the log as before) and ``optuna-dashboard`` can open it::

    optuna-dashboard sqlite:////path/to/tuning.optuna.db

- an SQLite log ``tuning.db`` keeps its studies in ``tuning.optuna.db`` beside it (a file of
  its own: Optuna and the log both version their tables in Alembic's ``alembic_version``
  table, which one database cannot hold for both);
- a PostgreSQL log keeps them in the same database, in the schema ``optuna`` (or
  ``<schema>_optuna`` where the log's URL sets a ``search_path``), created on first use; the
  storage URL names it, e.g. ``'postgresql+psycopg://u:pw@host/db?options=-csearch_path%3Doptuna'``
  (quote it in a shell);
- an in-memory log (``db=None`` or ``":memory:"``) keeps the study in memory.

The study's name is :func:`study_name` of the task (its readable workload and its workload
key), so every workload has a study of its own. The tuner's ``storage_url`` says where the
study is (``None`` in memory), and the run logs it once at INFO. ``storage=`` (a URL or an
Optuna storage) and ``study_name=`` choose otherwise.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

# optuna itself (heavy) is imported where it is used: only an OptunaTuner bound to a task needs it.
from autotune.errors import AutotuneError
from autotune.tuner.tuner import Tuner
from db import BUSY_TIMEOUT_S, hide_passwords

__all__ = ["OptunaTuner", "study_name", "study_storage_url"]

logger = logging.getLogger(__name__)

_DISTRIBUTIONS = ("categorical", "int")
_MAX_NAME = 400  # Optuna's study names hold up to 512 characters
_SCHEMA = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEARCH_PATH = re.compile(r"-c\s*search_path=(\S+)")


def study_name(task, knob_distribution: str = "categorical") -> str:
    """The name of ``task``'s study: its readable workload (template, arguments, target) and
    its workload key, e.g. ``matmul(64,64,64,float32)@llvm:znver4 [3f2a...]``. Studies of
    integer-coded knobs (``knob_distribution="int"``) are apart: ``... [3f2a...] int``."""
    readable = task.workload_name
    if len(readable) > _MAX_NAME - 60:
        readable = readable[:_MAX_NAME - 63] + "..."
    name = f"{readable} [{task.workload_key}]"
    return name if knob_distribution == "categorical" else f"{name} {knob_distribution}"


def study_storage_url(log) -> str | None:
    """Where the studies of tuning log ``log`` (a :class:`db.TuningLog`) live: an Optuna
    storage URL (password included, as the log's), or ``None`` for an in-memory log. See the
    module's documentation; a PostgreSQL schema is created here if it does not exist."""
    url = log.url
    if url.get_backend_name() == "sqlite":
        if url.database in (None, "", ":memory:"):
            return None
        path = Path(url.database)
        suffix = path.suffix or ".db"
        return f"sqlite:///{path.with_name(path.stem + '.optuna' + suffix)}"
    if url.get_backend_name() != "postgresql":
        raise AutotuneError(f"OptunaTuner: cannot keep a study beside a {url.get_backend_name()} log")
    options = url.query.get("options", "")
    options = " ".join(options) if isinstance(options, tuple) else options
    found = _SEARCH_PATH.search(options)
    base = found.group(1).split(",")[0].strip("\"'") if found else ""
    schema = f"{base}_optuna" if base and base != "public" else "optuna"
    if not _SCHEMA.match(schema):
        raise AutotuneError(f"OptunaTuner: the log's search_path {base!r} gives no plain schema name for "
                            f"its studies; pass storage= to the tuner")
    _create_schema(url, schema)
    rest = _SEARCH_PATH.sub("", options).strip()
    study_url = url.update_query_dict({"options": f"{rest} -csearch_path={schema}".strip()})
    return study_url.render_as_string(hide_password=False)


def _create_schema(url, schema: str) -> None:
    from sqlalchemy import create_engine, text
    from sqlalchemy import exc as sa_exc

    engine = create_engine(url, connect_args={"connect_timeout": 10})
    try:
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
    except sa_exc.IntegrityError:  # another process created it at the same moment
        pass
    finally:
        engine.dispose()


def _rdb_storage(url: str):
    """Optuna's RDB storage at ``url``; an SQLite file is written as the log is (WAL, waiting
    for other processes' writes): Optuna commits several times per trial, and WAL with
    ``synchronous=NORMAL`` does not sync the disk at each commit."""
    import optuna

    if not url.startswith("sqlite"):
        return optuna.storages.RDBStorage(url)
    from sqlalchemy import event

    storage = optuna.storages.RDBStorage(url, engine_kwargs={"connect_args": {"timeout": BUSY_TIMEOUT_S}})
    event.listen(storage.engine, "connect", _sqlite_pragmas)
    storage.engine.dispose()  # the connections made so far lack the pragmas
    return storage


def _sqlite_pragmas(conn, _record) -> None:
    cursor = conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class OptunaTuner(Tuner):
    """Optuna-driven search. ``sampler`` is any ``optuna.samplers.BaseSampler``; without one,
    ``TPESampler(seed=seed, constant_liar=True)`` (pending trials count as bad, which keeps a
    batch diverse). A sampler passed in is seeded by whoever made it.

    ``storage`` is an Optuna storage or its URL for the tuner's ``study``; without one the
    study stays in memory unless ``tune()`` gives the tuner its log (:meth:`use_log`), beside
    which the study is kept (see the module's documentation). ``study_name`` defaults to
    :func:`study_name` of the task; a study of that name in the storage is continued.
    Attributes: ``study`` (the ``optuna.Study`` of measured configs, created or loaded on first
    use), ``sampler_study`` (the search's own, in memory) and ``storage_url`` (where ``study``
    is, for ``optuna-dashboard <storage_url>`` or
    ``optuna.load_study(study_name=tuner.study_name, storage=tuner.storage_url)``; ``None`` in
    memory).
    """

    name = "optuna"

    def __init__(self, task=None, seed: int | None = None, sampler=None, max_retries: int = 20,
                 knob_distribution: str = "categorical", storage=None, study_name: str | None = None,
                 **options):
        if knob_distribution not in _DISTRIBUTIONS:
            raise AutotuneError(f"OptunaTuner: unknown knob_distribution {knob_distribution!r}; "
                                f"use one of {_DISTRIBUTIONS}")
        if max_retries < 1:
            raise AutotuneError(f"OptunaTuner: max_retries must be at least 1, got {max_retries}")
        self.sampler, self.max_retries, self.knob_distribution = sampler, max_retries, knob_distribution
        self.storage, self.study_name = storage, study_name
        self.storage_url: str | None = storage if isinstance(storage, str) else getattr(storage, "url", None)
        self._study = None
        super().__init__(task, seed, **options)

    def _setup(self) -> None:
        import optuna
        from optuna import distributions as dist

        # Optuna logs every finished trial at INFO on its own handler; a library stays quiet.
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = self.sampler or optuna.samplers.TPESampler(seed=self.seed, constant_liar=True)
        self.sampler_study = optuna.create_study(direction="minimize", sampler=sampler)
        categorical = self.knob_distribution == "categorical"
        self._dists = {
            name: (dist.CategoricalDistribution(list(range(len(knob)))) if categorical
                   else dist.IntDistribution(0, len(knob) - 1))
            for name, knob in self.space.space_map.items()
        }
        self._open: dict[int, list] = {}  # config index -> trials waiting for its result
        self._stored: set[int] = set()  # configs that ``study`` holds a trial of

    def use_log(self, log) -> None:
        """Keep the study beside ``log`` (see the module's documentation), unless the tuner
        was given a storage or its study is already made."""
        self._bound()
        if self.storage is None and self._study is None:
            self.storage = self.storage_url = study_storage_url(log)
        if self._study is None:  # opened now, so that the run says where it is before it measures
            self._study = self._open_study()

    @property
    def study(self):
        """The ``optuna.Study`` of the measured configs (created, or loaded from its storage, on
        first use)."""
        self._bound()
        if self._study is None:
            self._study = self._open_study()
        return self._study

    def _open_study(self):
        import optuna
        from optuna.study import StudyDirection

        name = self.study_name or study_name(self.task, self.knob_distribution)
        storage = _rdb_storage(self.storage) if isinstance(self.storage, str) else self.storage
        # Its trials are added, never asked for: the sampler is never used.
        study = optuna.create_study(study_name=name, storage=storage, direction="minimize",
                                    sampler=optuna.samplers.RandomSampler(), load_if_exists=True)
        where = "memory" if self.storage_url is None else hide_passwords(self.storage_url)
        if study.directions != [StudyDirection.MINIMIZE]:
            raise AutotuneError(f"OptunaTuner: study {name!r} in {where} does not minimize one value")
        self.study_name = name
        for trial in study.get_trials(deepcopy=False):
            if trial.distributions and trial.distributions != self._dists:
                raise AutotuneError(
                    f"OptunaTuner: study {name!r} in {where} holds trials of other knobs than the space of "
                    f"{self.task.workload_name} has (the template changed, or knob_distribution did): "
                    f"pass another study_name=, or delete that study (optuna.delete_study)")
            index = self._index_of(trial)
            if index is not None:
                self._stored.add(index)
        if self.storage_url is not None:
            logger.info("optuna study %r (%d trials) is in %s: optuna-dashboard opens it", name,
                        len(study.trials), where)
        return study

    def _index_of(self, trial) -> int | None:
        """The config a finished trial of the study measured; None for other trials."""
        from optuna.trial import TrialState

        if trial.state not in (TrialState.COMPLETE, TrialState.FAIL):
            return None
        index = trial.user_attrs.get("config_index")
        if index is None and set(trial.params) == set(self._dists):  # a trial some other program added
            index = self.space.choices_to_index([trial.params[name] for name in self._dists])
        return int(index) if index is not None else None

    def _propose(self, n: int) -> list[int]:
        from optuna.trial import TrialState

        out: list[int] = []
        for _ in range(n * self.max_retries):
            if len(out) == n:
                break
            trial = self.sampler_study.ask(self._dists)
            index = self.space.choices_to_index([trial.params[name] for name in self._dists])
            if not self.space.is_valid(index):
                self.sampler_study.tell(trial, state=TrialState.PRUNED)
            elif index in self.costs:
                self._tell(trial, self.costs[index])
            else:
                self._open.setdefault(index, []).append(trial)
                if index not in self._visited and index not in out:
                    out.append(index)
        return out

    def _observe(self, indices: list[int], costs: list[float | None]) -> None:
        study = self.study  # opened first: loading it tells which configs it holds
        for index, cost in zip(indices, costs):
            trials = self._open.pop(index, [])
            for trial in trials:
                self._tell(trial, cost)
            if not trials:
                self.sampler_study.add_trial(self._finished(index, cost))
            if index not in self._stored:  # once per config: a resumed log repeats none
                config = str(self.space.from_index(index, check=False))
                study.add_trial(self._finished(index, cost, {"config_index": index, "config": config}))
                self._stored.add(index)

    def _finished(self, index: int, cost: float | None, attrs: dict | None = None):
        import optuna
        from optuna.trial import TrialState

        params = dict(zip(self._dists, self.space.index_to_choices(index)))
        state = TrialState.COMPLETE if cost is not None else TrialState.FAIL
        return optuna.trial.create_trial(params=params, distributions=self._dists, value=cost, state=state,
                                         user_attrs=attrs)

    def _tell(self, trial, cost: float | None) -> None:
        from optuna.trial import TrialState

        if cost is None:
            self.sampler_study.tell(trial, state=TrialState.FAIL)
        else:
            self.sampler_study.tell(trial, cost)
