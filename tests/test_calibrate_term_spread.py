"""How firmly measured runs pin each fitted term (calibrate/fit_spread.py): the share of a
term's effect on the residuals that the other terms reproduce (1 - 1/VIF, weighted by the
soft_l1 loss's curvature), its partner, and the leave-one-run-out range. No torch."""

from __future__ import annotations

import numpy as np
import pytest

from calibrate.fit_spread import SHARED_WARN, TermSpread, describe_spread, spread_of
from calibrate.from_run import LOSS_SCALE


def test_two_columns_at_sixty_degrees_share_a_quarter() -> None:
    """Columns (1, 0, 1) and (1, 1, 0): cos = 1/2, so each reproduces 1/4 of the other
    (R^2 = cos^2), and each is the other's partner."""
    a = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    first, second = spread_of(a, np.zeros(3), ("x", "y"))
    assert first.seen and first.shared == pytest.approx(0.25)
    assert (first.partner, second.partner) == ("y", "x")
    assert first.alike == pytest.approx(0.5)
    assert not first.loose()


def test_the_loss_curvature_weights_the_rows() -> None:
    """The third row's residual is 100 x LOSS_SCALE: its weight (1 + 100^2)^-1.5 is ~1e-6,
    so the columns are (1, 0) and (1, 1) there: cos^2 = 1/2."""
    a = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    first, _ = spread_of(a, np.array([0.0, 0.0, 100 * LOSS_SCALE]), ("x", "y"))
    assert first.shared == pytest.approx(0.5, abs=1e-5)


def test_a_copied_column_is_loose_and_a_zero_column_unseen() -> None:
    """x and 2000 x: all of each is the other's (shared 1, cos +1); a column of zeros is not
    seen and leaves the others' measures as they were; scale does not matter."""
    rng = np.random.default_rng(0)
    x, z = rng.normal(size=50), rng.normal(size=50)
    got = spread_of(np.column_stack([x, 2e3 * x, np.zeros(50), z]), np.zeros(50),
                    ("a", "b", "c", "d"))
    assert got[0].shared == pytest.approx(1.0) and got[0].loose() and got[0].partner == "b"
    assert got[0].alike == pytest.approx(1.0)
    assert not got[2].seen and got[2].loose()
    assert "not seen" in describe_spread(got[2])
    alone = spread_of(np.column_stack([x, z]), np.zeros(50), ("a", "d"))
    assert got[3].shared == pytest.approx(alone[1].shared)


def test_one_seen_term_shares_nothing_and_the_report_reads_its_range() -> None:
    [only] = spread_of(np.ones((4, 1)), np.zeros(4), ("request_s",))
    assert only.shared == 0.0 and only.partner == ""
    ranged = TermSpread("request_s", True, 0.97, "admit_s", 0.9, 0.004, 0.006)
    assert ranged.loose() and SHARED_WARN <= 0.97
    assert describe_spread(ranged) == ("shared 97% (most like admit_s's, cos +0.90); "
                                       "leave-one-run-out 4 .. 6 ms  <- loose")
    assert ranged.to_dict()["leave_one_out"] == [0.004, 0.006]
