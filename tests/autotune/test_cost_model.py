"""The XGBoost cost model ranks unseen matmul configs better than chance.

The dataset (``data/matmul_128_costs.json``) holds measured costs of configs of
``matmul(128, 128, 128, float32)``, recorded once by ``scripts/tools/record_cost_dataset.py``;
the model trains on the first two thirds and is scored on the rest.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from autotune.tuner.cost_model import Group, XGBCostModel


@pytest.fixture(scope="module")
def dataset(cost_dataset):
    task, records = cost_dataset
    space = task.config_space
    for r in records:  # the file still matches the template's space
        assert space.from_json({"index": r["index"], "knobs": r["knobs"]}).index == r["index"]
    split = len(records) * 2 // 3
    train, test = records[:split], records[split:]
    return task, train, test


def fitted(task, train, **kwargs) -> XGBCostModel:
    model = XGBCostModel(seed=0, **kwargs)
    assert model.fit([Group(task, [r["index"] for r in train], [r["cost"] for r in train])])
    return model


@pytest.mark.parametrize("feature_type,loss_type",
                         [("itervar", "rank"), ("knob", "rank"), ("itervar", "reg")])
def test_ranks_held_out_configs(dataset, feature_type, loss_type):
    task, train, test = dataset
    assert len(train) >= 150 and len(test) >= 75
    model = fitted(task, train, feature_type=feature_type, loss_type=loss_type)
    scores = model.predict(task, [r["index"] for r in test])
    rho = spearmanr(scores, [-r["cost"] for r in test]).statistic
    assert rho > 0.5, f"Spearman {rho:.3f}"


def test_deterministic_and_failures_last(dataset):
    task, train, test = dataset
    a = fitted(task, train, feature_type="knob").predict(task, [r["index"] for r in test])
    b = fitted(task, train, feature_type="knob").predict(task, [r["index"] for r in test])
    np.testing.assert_array_equal(a, b)
    # Mark the best third of the training configs as failures: the model learns to rank them last.
    costs = [r["cost"] for r in train]
    cut = np.quantile(costs, 1 / 3)
    failed = [dict(r, cost=None) if r["cost"] <= cut else r for r in train]
    model = fitted(task, failed, feature_type="knob")
    scores = model.predict(task, [r["index"] for r in train])
    is_failed = np.array([r["cost"] is None for r in failed])
    assert scores[is_failed].mean() < scores[~is_failed].mean()


def test_unfit_model_refuses_to_predict(dataset):
    task, train, _ = dataset
    model = XGBCostModel(feature_type="knob")
    assert not model.fit([Group(task, [train[0]["index"]], [None])])  # nothing to learn from
    with pytest.raises(RuntimeError, match="not trained"):
        model.predict(task, [train[0]["index"]])
